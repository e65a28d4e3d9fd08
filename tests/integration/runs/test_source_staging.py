"""Live submits that need NPA source: staged after the run is durable, before the launch.

The sky simulator and the Kubernetes double run the launch; moto's S3 server
on loopback holds the staged source (runtime-reference.md §1 receipt order,
§6 "URI at submit"). The run's planned source is journaled with the run, the
``source_staging`` event precedes the first attempt, and the task YAML carries
the content-addressed URI that was staged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, StorageError
from npa_infra.journal.store import Journal
from npa_infra.source import tree
from tests.integration.runs.world import World
from tests.support.motoserver import MotoS3
from tests.support.specs import one_step_spec

BUCKET = "src-live"
SPEC = one_step_spec("bare-live", BUCKET)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "bare-live.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (root / ".env").write_text("TOKEN=never-uploaded\n")
    return root


def keys(s3: MotoS3) -> set[str]:
    listing = s3.client.list_objects_v2(Bucket=BUCKET)
    return {entry["Key"] for entry in listing.get("Contents") or ()}


def journal_view(
    world: World, run_id: str
) -> tuple[dict[str, object], list[tuple[str, dict[str, object], float]], float]:
    journal = Journal.open(world.home)
    try:
        run = journal.get_run(run_id)
        assert run is not None
        events = [(e.kind, e.data, e.at) for e in journal.events(run_id)]
        attempts = journal.attempts(run_id)
        first_attempt = min((a.created_at for a in attempts), default=float("inf"))
        return dict(run.data), events, first_attempt
    finally:
        journal.close()


def task_yaml(world: World, run_id: str) -> dict[str, object]:
    path = next((world.isolated.root / "submissions" / run_id).glob("*.yaml"))
    docs = list(yaml.safe_load_all(path.read_text()))
    task: dict[str, object] = docs[1]
    return task


def test_live_submit_stages_after_planned_record_before_launch(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    s3_server.create_bucket(BUCKET)

    result = world.submit(spec, run_id="src-live-1", source_root=checkout)

    assert result.exit_code == 0, result.to_json()
    fp = tree.scan(checkout).fingerprint
    uri = f"s3://{BUCKET}/npa-src/npa/{fp}/"
    assert f"npa-src/npa/{fp}/.npa-source.json" in keys(s3_server)
    assert f"npa-src/npa/{fp}/.env" not in keys(s3_server)
    data, events, first_attempt = journal_view(world, "src-live-1")
    assert data["source"] == {
        "status": "stage",
        "uri": uri,
        "would_stage": True,
        "fingerprint": fp,
        "reason": "missing",
        "origin": "checkout",
        "states": ["train"],
        "root": str(checkout),
    }
    kinds = [kind for kind, _, _ in events]
    assert kinds.index("preflight") < kinds.index("source_staging")
    staged = next((d, at) for kind, d, at in events if kind == "source_staging")
    assert staged[0]["decision"] == "staged"
    assert (staged[0]["uri"], staged[0]["fingerprint"], staged[0]["saved"]) == (uri, fp, True)
    assert staged[1] < first_attempt  # staged before the first launch attempt existed
    envs = task_yaml(world, "src-live-1")["envs"]
    assert isinstance(envs, dict) and envs["NPA_SRC_S3_URI"] == uri
    assert npa_config.load_config(world.env)["src_s3_uri"] == uri


def test_live_submit_second_run_reuses_saved_source(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    world.submit(spec, run_id="src-reuse-1", source_root=checkout)
    before = keys(s3_server)

    result = world.submit(spec, run_id="src-reuse-2", source_root=checkout)

    assert result.exit_code == 0
    _, events, _ = journal_view(world, "src-reuse-2")
    staged = next(d for kind, d, _ in events if kind == "source_staging")
    assert (staged["action"], staged["decision"], staged["uploaded"]) == ("reuse", "reused", 0)
    assert keys(s3_server) == before


def test_live_submit_staged_object_deleted_since_restaged_before_launch(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    """Issue 24 item 9: the marker stays but an object it names was deleted (a lifecycle
    rule, a cleanup): the saved URI is not reused on the marker's word; the objects are
    listed, the loss found, the checkout uploaded again, and only then the job launches."""
    s3_server.create_bucket(BUCKET)
    world.submit(spec, run_id="src-lost-1", source_root=checkout)
    fp = tree.scan(checkout).fingerprint
    lost = f"npa-src/npa/{fp}/pkg/mod.py"
    s3_server.client.delete_object(Bucket=BUCKET, Key=lost)

    result = world.submit(spec, run_id="src-lost-2", source_root=checkout)

    assert result.exit_code == 0, result.to_json()
    _, events, first_attempt = journal_view(world, "src-lost-2")
    staged, at = next((d, at) for kind, d, at in events if kind == "source_staging")
    assert (staged["action"], staged["decision"], staged["uploaded"]) == ("reuse", "staged", 1)
    assert at < first_attempt  # the source was whole again before the launch
    assert lost in keys(s3_server)


def test_live_submit_exported_uri_with_object_deleted_refused_before_launch(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    """An exported URI cannot be restaged by npa: its lost object refuses the run."""
    s3_server.create_bucket(BUCKET)
    world.submit(spec, run_id="src-lost-3", source_root=checkout)
    fp = tree.scan(checkout).fingerprint
    s3_server.client.delete_object(Bucket=BUCKET, Key=f"npa-src/npa/{fp}/pkg/mod.py")
    world.env["NPA_SRC_S3_URI"] = f"s3://{BUCKET}/npa-src/npa/{fp}/"
    launched = len(world.sim_jobs())

    with pytest.raises(ConfigError, match="objects_missing"):
        world.submit(spec, run_id="src-lost-4", source_root=checkout)

    assert len(world.sim_jobs()) == launched


def test_live_submit_exported_uri_kept_nothing_staged(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    world.env["NPA_SRC_S3_URI"] = "s3://team-bucket/src/custom"

    result = world.submit(spec, run_id="src-env-1", source_root=checkout)

    assert result.exit_code == 0
    assert keys(s3_server) == set()
    _, events, _ = journal_view(world, "src-env-1")
    staged = next(d for kind, d, _ in events if kind == "source_staging")
    assert (staged["decision"], staged["verified"]) == ("kept", False)
    envs = task_yaml(world, "src-env-1")["envs"]
    assert isinstance(envs, dict) and envs["NPA_SRC_S3_URI"] == "s3://team-bucket/src/custom"


def test_live_submit_exported_fingerprint_uri_without_marker_refused_before_launch(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    world.env["NPA_SRC_S3_URI"] = f"s3://{BUCKET}/npa-src/npa/{'e' * 64}/"

    with pytest.raises(ConfigError, match="holds no complete staged source"):
        world.submit(spec, run_id="src-env-2", source_root=checkout)

    assert world.sim_jobs() == []
    journal = Journal.open(world.home)
    try:
        run = journal.get_run("src-env-2")
        assert run is not None and run.status == "ROLLED_BACK"
    finally:
        journal.close()


def test_live_submit_staging_failure_rolls_back_then_same_command_succeeds(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        world.submit(spec, run_id="src-fail-1", source_root=checkout)  # no bucket yet
    assert world.sim_jobs() == []

    s3_server.create_bucket(BUCKET)
    result = world.submit(spec, run_id="src-fail-1", source_root=checkout)

    assert result.exit_code == 0, result.to_json()
    assert len(world.sim_jobs()) == 1


def test_live_resume_keeps_journaled_uri_after_checkout_changed(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    first = world.submit(spec, run_id="src-resume-1", source_root=checkout)
    uri = task_yaml(world, "src-resume-1")["envs"]
    (checkout / "pkg" / "mod.py").write_text("VALUE = 2\n")

    again = world.submit(spec, resume_run="src-resume-1", source_root=checkout)

    assert again.exit_code == 0, again.to_json()
    assert again.job_id == first.job_id  # the same launch identity: adopted, not relaunched
    assert len(world.sim_jobs()) == 1
    assert task_yaml(world, "src-resume-1")["envs"] == uri
    _, events, _ = journal_view(world, "src-resume-1")
    resumed = [d for kind, d, _ in events if kind == "source_staging"][-1]
    assert (resumed["reason"], resumed["decision"]) == ("resumed_run", "verified")


@pytest.mark.parametrize("when", ["before_marker", "after_marker"])
def test_live_submit_killed_while_staging_then_resume_stages_and_launches_once(
    world: World, s3_server: MotoS3, spec: Path, checkout: Path, when: str
) -> None:
    """npa SIGKILLed in the middle of staging (objects written, no marker yet) or right
    after the marker: the resume stages or verifies the source, then launches exactly once;
    no launch ever names source whose marker is missing."""
    import os
    import signal

    from npa_infra.storage.s3 import BotoStore

    s3_server.create_bucket(BUCKET)
    pid = os.fork()
    if pid == 0:  # a real npa process, killed at the chosen staging boundary
        original = BotoStore.write_bytes

        def killing(self: BotoStore, *args: object, **kwargs: object) -> None:
            if when == "before_marker":
                os.kill(os.getpid(), signal.SIGKILL)
            original(self, *args, **kwargs)  # type: ignore[arg-type]
            os.kill(os.getpid(), signal.SIGKILL)

        BotoStore.write_bytes = killing  # type: ignore[method-assign,assignment]
        try:
            world.submit(spec, run_id="src-kill-1", source_root=checkout)
        finally:
            os._exit(3)  # never reached when the kill happened
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert world.sim_calls() == [] or not any(
        c[:2] == ["jobs", "launch"] for c in world.sim_calls()
    )
    fp = tree.scan(checkout).fingerprint
    marker = f"npa-src/npa/{fp}/.npa-source.json"
    assert (marker in keys(s3_server)) is (when == "after_marker")

    result = world.submit(spec, resume_run="src-kill-1", source_root=checkout)
    assert result.exit_code == 0, result.to_json()
    assert marker in keys(s3_server)
    envs = task_yaml(world, "src-kill-1")["envs"]
    assert isinstance(envs, dict) and envs["NPA_SRC_S3_URI"] == f"s3://{BUCKET}/npa-src/npa/{fp}/"
    assert len([c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]) == 1
