"""Checkpoint recovery (issue 9): a relaunched attempt resumes mid-stage only with an explicit
loader and a validated checkpoint in S3; otherwise it restarts and never claims a resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from npa_infra.runs import checkpoints
from npa_infra.storage.s3 import BotoStore
from npa_infra.workflow.execution.liverun import LiveResult
from tests.integration.runs import supervised
from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube
from tests.support.motoserver import MotoS3
from tests.support.skysim.inprocess import InProcessRunner

BUCKET = "example-bucket"
LOADER = {"checkpoint_loader": "torch-dcp/v1"}


def _ckpt(run_id: str) -> str:
    return f"s3://{BUCKET}/ckpt/{run_id}/"


def _world(tmp_path: Path, fake: FakeKube) -> World:
    return make_world(tmp_path / "w", fake, pods=True, runner=InProcessRunner())


def _fails_first(status: str = "FAILED") -> list[dict[str, Any]]:
    return [
        {"command": "jobs.launch", "nth": 1, "action": "timeline", "statuses": ["PENDING", status]},
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING", "SUCCEEDED"]},
    ]


def _submit(
    world: World, s3: MotoS3, tmp_path: Path, run_id: str, params: dict[str, str], **kw: Any
) -> LiveResult:
    spec = supervised.single_wave_spec(tmp_path / "spec", params=params)
    return supervised.run(
        world, spec, store=lambda _endpoint: BotoStore.create(s3.endpoint_url), run_id=run_id, **kw
    )


def _envs(world: World, run_id: str, job_name: str) -> dict[str, str]:
    path = world.isolated.root / "submissions" / run_id / f"{job_name}.yaml"
    task = next(d for d in yaml.safe_load_all(path.read_text()) if d and "execution" not in d)
    return {str(k): str(v) for k, v in task["envs"].items()}


def _resumes(world: World, run_id: str) -> list[dict[str, Any]]:
    return [data for _, data in supervised.events(world, run_id, "wave_resume")]


def test_loader_and_validated_checkpoint_resume_the_retry_from_it(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "ckpt/ck-1/step-100/model.pt", b"weights")
    world.faults(*_fails_first())
    params = {"checkpoint_uri": _ckpt("ck-1"), **LOADER}
    result = _submit(world, s3_server, tmp_path, "ck-1", params, retries=1)
    assert result.exit_code == 0, result.to_json()
    first, second = _envs(world, "ck-1", "ck-1-00-train"), _envs(world, "ck-1", "ck-1-00-train-a2")
    assert checkpoints.RESUME_MODE not in first
    assert first[checkpoints.FENCE_ATTEMPT] == "1" and first[checkpoints.DECLARED_URI] == _ckpt(
        "ck-1"
    )
    assert second[checkpoints.RESUME_MODE] == "checkpoint"
    assert second[checkpoints.RESUME_CHECKPOINT] == _ckpt("ck-1")
    assert (second[checkpoints.FENCE_ATTEMPT], second[checkpoints.FENCE_SEQUENCE]) == ("2", "1")
    [event] = _resumes(world, "ck-1")
    assert (event["resume_mode"], event["reason"], event["attempt"]) == (
        "checkpoint",
        "checkpoint_validated",
        2,
    )
    assert event["loader"] == "torch-dcp/v1" and event["evidence"]["state"] == "present"
    assert event["evidence"]["detail"].endswith("step-100/model.pt")


def test_no_loader_restarts_and_claims_no_checkpoint(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "ckpt/ck-2/model.pt", b"weights")  # a checkpoint, but nothing loads it
    world.faults(*_fails_first())
    result = _submit(
        world, s3_server, tmp_path, "ck-2", {"checkpoint_uri": _ckpt("ck-2")}, retries=1
    )
    assert result.exit_code == 0, result.to_json()
    second = _envs(world, "ck-2", "ck-2-00-train-a2")
    assert second[checkpoints.RESUME_MODE] == "restart"
    assert checkpoints.RESUME_CHECKPOINT not in second
    [event] = _resumes(world, "ck-2")
    assert (event["resume_mode"], event["reason"], event["evidence"]) == (
        "restart",
        "no_loader",
        {},
    )


def test_loader_with_missing_checkpoint_restarts(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    world.faults(*_fails_first())
    params = {"checkpoint_uri": _ckpt("ck-3"), **LOADER}
    result = _submit(world, s3_server, tmp_path, "ck-3", params, retries=1)
    assert result.exit_code == 0, result.to_json()
    assert checkpoints.RESUME_CHECKPOINT not in _envs(world, "ck-3", "ck-3-00-train-a2")
    [event] = _resumes(world, "ck-3")
    assert (event["resume_mode"], event["reason"]) == ("restart", "checkpoint_absent")
    assert event["evidence"]["state"] == "absent"


def test_loader_with_empty_checkpoint_restarts(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "ckpt/ck-4/model.pt", b"")  # written, then the pod died: 0 bytes
    world.faults(*_fails_first())
    params = {"checkpoint_uri": _ckpt("ck-4"), **LOADER}
    result = _submit(world, s3_server, tmp_path, "ck-4", params, retries=1)
    assert result.exit_code == 0, result.to_json()
    second = _envs(world, "ck-4", "ck-4-00-train-a2")
    assert second[checkpoints.RESUME_MODE] == "restart"
    [event] = _resumes(world, "ck-4")
    assert (event["resume_mode"], event["reason"]) == ("restart", "checkpoint_empty")


def test_loader_with_unreadable_checkpoint_blocks_the_relaunch_and_spends_nothing(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    world.faults(*_fails_first())
    # no such bucket: the store cannot say whether a checkpoint exists
    params = {"checkpoint_uri": _ckpt("ck-5"), **LOADER}
    result = _submit(world, s3_server, tmp_path, "ck-5", params, retries=1)
    assert result.exit_code == 2, result.to_json()
    assert result.error is not None and "could not be checked" in result.error.message
    assert len(world.sim_jobs()) == 1  # neither a resume nor a restart
    [event] = _resumes(world, "ck-5")
    assert (event["resume_mode"], event["reason"], event["relaunch_blocked"]) == (
        None,
        "checkpoint_unreadable",
        True,
    )
    assert world.status("ck-5", cached=True).budgets == {
        "00": {
            "retries_left": 1,
            "infrastructure_recoveries_left": 1,
            "retries_used": 0,
            "infrastructure_recoveries_used": 0,
            "retries_total": 1,
            "infrastructure_recoveries_total": 1,
        }
    }


def test_infrastructure_relaunch_resumes_from_checkpoint_after_verified_cancel(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "ckpt/ck-6/model.pt", b"weights")
    world.faults(*_fails_first("FAILED_NO_RESOURCE"))
    params = {"checkpoint_uri": _ckpt("ck-6"), **LOADER}
    result = _submit(world, s3_server, tmp_path, "ck-6", params)
    assert result.exit_code == 0, result.to_json()
    kinds = [k for k, _ in supervised.events(world, "ck-6")]
    assert kinds.index("relaunch_checks") < kinds.index("wave_resume")
    assert kinds.index("wave_resume") < kinds.index("infrastructure_recovery")
    second = _envs(world, "ck-6", "ck-6-00-train-a2")
    assert second[checkpoints.RESUME_MODE] == "checkpoint"


def test_fence_sequence_is_the_real_launch_sequence_of_each_post(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "transport"},
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING", "SUCCEEDED"]},
    )
    result = _submit(world, s3_server, tmp_path, "fence-1", {})
    assert result.exit_code == 0, result.to_json()
    assert result.transactions[-1]["launch_sequence"] == 2
    envs = _envs(world, "fence-1", "fence-1-00-train")
    assert (envs[checkpoints.FENCE_ATTEMPT], envs[checkpoints.FENCE_SEQUENCE]) == ("1", "2")


def test_resumed_run_relaunches_the_attempt_with_its_journaled_resume_variables(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = _world(tmp_path, fake_kube)
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "ckpt/ck-7/model.pt", b"weights")
    params = {"checkpoint_uri": _ckpt("ck-7"), **LOADER}
    # attempt 2's launch keeps failing in transport until the recovery deadline passes
    world.faults(
        *_fails_first(),
        {
            "command": "jobs.launch",
            "nth": list(range(2, 60)),
            "action": "fail",
            "kind": "transport",
        },
    )
    first = _submit(world, s3_server, tmp_path, "ck-7", params, retries=1)
    assert first.exit_code == 2, first.to_json()
    assert len(world.sim_jobs()) == 1
    world.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    again = _submit(world, s3_server, tmp_path, None, params, resume_run="ck-7", retries=1)
    assert again.exit_code == 0, again.to_json()
    second = _envs(world, "ck-7", "ck-7-00-train-a2")
    assert second[checkpoints.RESUME_MODE] == "checkpoint"
    assert second[checkpoints.RESUME_CHECKPOINT] == _ckpt("ck-7")
    assert int(second[checkpoints.FENCE_SEQUENCE]) > 1  # the real sequence of the last POST
    assert len(_resumes(world, "ck-7")) == 1  # decided once, when the attempt was created
