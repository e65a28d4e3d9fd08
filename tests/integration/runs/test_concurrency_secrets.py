"""Two submits of one run, and canary secret values that must never be written anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from npa_infra.errors import RunLockedError, RunStateError
from npa_infra.journal.lock import RunLock
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
CANARY_NAME = "NPA_CANARY_TOKEN"
CANARY_VALUE = "canary-5be1c0ffee"


def test_submit_while_another_process_holds_the_run_lock_refuses_with_holder(world: World) -> None:
    lock = RunLock(world.home, None, "locked-1", argv=["npa", "other"], now=1.0)
    lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # a second process tries the same run
            try:
                world.submit(MINIMAL, run_id="locked-1")
                os._exit(0)
            except RunLockedError as exc:
                (world.root / "refusal.json").write_text(json.dumps(exc.details))
                os._exit(7)
            except BaseException:
                os._exit(9)
        _, status = os.waitpid(pid, 0)
    finally:
        lock.release()
    assert os.WEXITSTATUS(status) == 7
    holder = json.loads((world.root / "refusal.json").read_text())
    assert holder["pid"] == os.getpid()
    assert world.sim_jobs() == []


def test_two_concurrent_submits_of_one_run_launch_exactly_one_job(world: World) -> None:
    read_end, write_end = os.pipe()
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)  # start together
            try:
                world.submit(MINIMAL, run_id="race-1")
                os._exit(0)
            except (RunLockedError, RunStateError):
                os._exit(7)
            except BaseException:
                os._exit(9)
        children.append(pid)
    os.close(read_end)
    os.write(write_end, b"go")
    os.close(write_end)
    codes = sorted(os.WEXITSTATUS(os.waitpid(pid, 0)[1]) for pid in children)
    assert codes == [0, 7]
    assert len(world.jobs_named("race-1")) == 1


def _everything_written(world: World) -> bytes:
    blobs = []
    for path in world.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            blobs.append(path.read_bytes())
    return b"\n".join(blobs)


@pytest.mark.parametrize(
    "rules",
    [[], [{"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "transport"}]],
    ids=["clean", "transient-retry"],
)
def test_canary_secret_value_never_in_journal_yaml_logs_or_json(
    world: World, rules: list[dict[str, object]]
) -> None:
    world.env[CANARY_NAME] = CANARY_VALUE
    world.faults(*rules)
    result = world.submit(MINIMAL, run_id="canary-1", secret_env=[CANARY_NAME])
    assert result.exit_code == 0
    payload = json.dumps(result.to_json())
    status = json.dumps(world.status("canary-1").to_json())
    assert CANARY_VALUE not in payload and CANARY_VALUE not in status
    assert CANARY_NAME in payload or CANARY_NAME in json.dumps(
        [c for c in world.sim_calls() if "--secret" in c]
    )
    written = _everything_written(world)  # journal (+WAL), YAML, sim state and logs, locks
    assert CANARY_VALUE.encode() not in written
    launches = [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]
    assert all(
        c[c.index("--secret") : c.index("--secret") + 2] == ["--secret", CANARY_NAME]
        for c in launches
    )


def test_journal_refuses_a_secret_value_in_any_record(world: World, tmp_path: Path) -> None:
    from npa_infra.errors import InvariantError
    from npa_infra.journal.store import Journal

    journal = Journal.open(tmp_path / "j", secret_values=[CANARY_VALUE])
    try:
        with pytest.raises(InvariantError) as info:
            journal.append_event("nope", "x", {"note": f"token is {CANARY_VALUE}"}, now=1.0)
        assert "secret value" in str(info.value)
        assert CANARY_VALUE not in str(info.value)
    finally:
        journal.close()


def _npa(world: World, *args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from npa_infra.cli.main import app

    result = CliRunner().invoke(
        app, ["workbench", "workflow", *args], obj=world.services(), env=world.env
    )
    return result.exit_code, result.stdout, result.stderr


def _written_by_npa(world: World) -> bytes:
    """Every file but the simulator's own (its state, and the fault rule holding the echo)."""
    theirs = (world.state_dir, Path(world.env["SKYSIM_FAULTS"]))
    blobs = []
    for path in world.root.rglob("*"):
        ours = not any(path == p or p in path.parents for p in theirs)
        if ours and path.is_file() and not path.is_symlink():
            blobs.append(path.read_bytes())
    return b"\n".join(blobs)


# no "TOKEN=" before the value: the credential patterns (runs.classifier.redact) would mask it
# anyway, and the test is about the value itself wherever it stands
_ECHO = f"RuntimeError: task env rejected: the value {CANARY_VALUE} (\x1b[31mcheck it\x1b[0m)"


@pytest.mark.parametrize(
    ("rule", "code", "status"),
    [
        ({"action": "accept_then_fail", "stderr": _ECHO}, 0, "SUBMITTED"),
        ({"action": "fail", "stderr": _ECHO}, 2, "RECOVERY_REQUIRED"),
        ({"action": "request_fails", "stderr": _ECHO}, 2, "RECOVERY_REQUIRED"),
    ],
    ids=["job-created", "refused", "request-failed"],
)
def test_canary_secret_echoed_by_sky_is_redacted_and_the_submit_ends_normally(
    world: World, rule: dict[str, object], code: int, status: str
) -> None:
    """A launch error that echoes a secret value: redacted where SkyPilot's text enters npa,
    so the journal's guard never trips and the run ends as the fault says (issue 24 item 5)."""
    world.env[CANARY_NAME] = CANARY_VALUE
    world.faults({"command": "jobs.launch", "nth": 1, **rule})
    submit = [str(MINIMAL), "--infra", "k8s/fake-a", "--no-resolve-accelerators"]
    submit += ["--no-preflight-images", "--secret-env", CANARY_NAME, "--run-id", "echo-1"]
    got, out, err = _npa(world, "submit", *submit)
    assert got == code, err
    assert "InvariantError" not in err and "unexpected" not in err
    if code == 2:  # the launch may exist: the exact command that continues the run
        assert "--resume-run echo-1" in err
        assert "\x1b[" not in err  # SkyPilot's colour codes stay out of npa's messages
    outputs = [out, err]
    for args in (["status", "echo-1", "--json"], ["status", "echo-1", "--cached", "--json"]):
        outputs.append(_npa(world, *args)[1])
    listed = _npa(world, "list", "--json")[1]
    outputs.append(listed)
    live, cached = (json.loads(text) for text in outputs[2:4])
    [row] = json.loads(listed)["runs"]
    assert row["status"] == cached["status"] == status  # one status, status and list alike
    if code == 2:
        assert live["status"] == status and live["remedy"].endswith("--resume-run echo-1")
    else:
        assert live["sky_job_ids"] == row["job_ids"] != []
    assert all(CANARY_VALUE not in text for text in outputs)
    assert CANARY_VALUE.encode() not in _written_by_npa(world)  # journal, WAL, launch logs
    logs = list((world.home / "logs").rglob("*launch.log"))
    assert logs and any(b"<redacted>" in log.read_bytes() for log in logs)
