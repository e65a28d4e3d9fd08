"""Supervision (issue 9): permanent blockers, verified infrastructure relaunch, separate budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.runs import supervised
from tests.integration.runs.test_runtime import BUCKET, FINISHES, _decision_key, _submit
from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube
from tests.support.motoserver import MotoS3

PENDING = {"command": "jobs.launch", "nth": 1, "action": "timeline", "statuses": ["PENDING"]}


def _pod(waiting: dict[str, str] | None = None, unschedulable: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"phase": "Pending"}
    if waiting:
        pod["waiting"] = waiting
    if unschedulable:
        pod["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        ]
    return {"command": "jobs.launch", "nth": 1, "action": "pod_state", "task": 0, "pod": pod}


def _events(world: World, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    from npa_infra.journal.store import Journal

    journal = Journal.open(world.home)
    try:
        return [(e.kind, e.data) for e in journal.events(run_id)]
    finally:
        journal.close()


def _cancels(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]


def _seed(s3: MotoS3, run_id: str) -> None:
    s3.create_bucket(BUCKET)
    s3.put(BUCKET, _decision_key(run_id), b'{"decision": "loop_back"}')


def test_permanent_image_auth_blocker_cancels_exactly_that_job_and_spends_no_budget(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(
        PENDING,
        _pod(waiting={"reason": "ErrImagePull", "message": "pull failed: 401 Unauthorized"}),
        FINISHES,
    )
    result = _submit(world, s3_server, "perm-1", retries=2)
    assert result.exit_code == 1, result.to_json()
    assert result.error is not None and "IMAGE_PULL_AUTH" in result.error.message
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(result.job_ids[0])]]
    assert len(world.sim_jobs()) == 1  # no relaunch
    budgets = world.status("perm-1").budgets
    assert budgets == {
        "00": {
            "retries_left": 2,
            "infrastructure_recoveries_left": 1,
            "retries_used": 0,
            "infrastructure_recoveries_used": 0,
            "retries_total": 2,
            "infrastructure_recoveries_total": 1,
        }
    }


def test_transient_capacity_blocker_past_grace_relaunches_once_after_verified_cancel(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    _seed(s3_server, "cap-1")
    world.faults(
        PENDING,
        _pod(unschedulable="0/3 nodes are available: 3 Insufficient cpu."),
        FINISHES,
    )
    result = _submit(world, s3_server, "cap-1", infrastructure_grace_seconds=30.0)
    assert result.exit_code == 0, result.to_json()
    names = [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]
    assert names[:2] == ["cap-1-00-prepare", "cap-1-00-prepare-a2"]
    assert len(_cancels(world)) == 1
    budgets = world.status("cap-1").budgets
    assert budgets is not None and budgets["00"] == {
        "retries_left": 0,
        "infrastructure_recoveries_left": 0,
        "retries_used": 0,
        "infrastructure_recoveries_used": 1,
        "retries_total": 0,
        "infrastructure_recoveries_total": 1,
    }


def test_transient_blocker_with_no_recovery_budget_fails_and_cancels_the_pending_job(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(PENDING, _pod(unschedulable="0/3 nodes are available: 3 Insufficient memory."))
    result = _submit(
        world,
        s3_server,
        "cap-2",
        infrastructure_grace_seconds=30.0,
        max_infrastructure_recoveries=0,
    )
    assert result.exit_code == 1, _events(world, "cap-2")
    assert result.error is not None and "budget is exhausted" in result.error.message
    assert len(world.sim_jobs()) == 1
    assert len(_cancels(world)) == 1


def test_failed_no_resource_relaunches_with_the_infrastructure_budget_not_retries(
    world: World, s3_server: MotoS3
) -> None:
    _seed(s3_server, "nores-1")
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED_NO_RESOURCE"],
        },
        FINISHES,
    )
    result = _submit(world, s3_server, "nores-1", retries=1)
    assert result.exit_code == 0, result.to_json()
    budgets = world.status("nores-1").budgets
    assert budgets is not None
    assert budgets["00"] == {
        "retries_left": 1,
        "infrastructure_recoveries_left": 0,
        "retries_used": 0,
        "infrastructure_recoveries_used": 1,
        "retries_total": 1,
        "infrastructure_recoveries_total": 1,
    }


def test_infrastructure_failure_with_declared_output_present_is_not_relaunched(
    world: World, s3_server: MotoS3
) -> None:
    _seed(s3_server, "outs-1")  # the gate's declared output (its decision artifact) exists
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 3,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED_NO_RESOURCE"],
        },
        FINISHES,
    )
    result = _submit(world, s3_server, "outs-1")
    assert result.exit_code == 1
    assert result.error is not None and "already exists" in result.error.message
    assert [j["name"] for j in world.sim_jobs()][-1] == "outs-1-02-gate"


def test_unknown_blocker_never_acts(tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(PENDING, _pod(unschedulable="something nobody classified"), FINISHES)
    result = _submit(
        world, s3_server, "unk-1", infrastructure_grace_seconds=5.0, max_wait_seconds=300.0
    )
    assert result.exit_code == 2  # timed out waiting: left running, never cancelled or relaunched
    assert _cancels(world) == []
    assert len(world.sim_jobs()) == 1


def test_resume_of_an_adopted_job_proven_failed_retries_only_with_budget(
    world: World, s3_server: MotoS3
) -> None:
    _seed(s3_server, "adopt-2")
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED"],
        },
        FINISHES,
    )
    first = _submit(world, s3_server, "adopt-2")
    assert first.exit_code == 1  # no retries: the terminal outcome stays
    again = _submit(world, s3_server, None, resume_run="adopt-2")
    assert again.exit_code == 1
    assert len(world.sim_jobs()) == 1  # nothing launched again without --retries


def _blocked(nth: int, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Launch ``nth`` stays PENDING with ``pod``'s blocker."""
    pending = {**PENDING, "nth": nth}
    return [pending, {**pod, "nth": nth}]


NOT_FOUND = (
    'rpc error: code = NotFound desc = failed to pull and unpack image "ghcr.io/acme/t:v1": '
    'failed to resolve reference "ghcr.io/acme/t:v1": ghcr.io/acme/t:v1: not found'
)
PERMANENT = [
    ("IMAGE_NOT_FOUND", {"reason": "ErrImagePull", "message": NOT_FOUND}),
    ("IMAGE_REFERENCE_INVALID", {"reason": "InvalidImageName", "message": "bad ref"}),
    (
        "CONFIG_REFERENCE_MISSING",
        {"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'},
    ),
    ("POD_CONFIG_INVALID", {"reason": "CreateContainerError", "message": "invalid mount"}),
]
TRANSIENT = [
    ("CAPACITY_OR_QUOTA", "0/3 nodes are available: 3 Insufficient cpu."),
    (
        "NODE_NOT_READY",
        "0/1 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling.",
    ),
]


@pytest.mark.parametrize(("code", "waiting"), PERMANENT, ids=[c for c, _ in PERMANENT])
def test_each_permanent_reason_cancels_exactly_that_job_and_never_relaunches(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3, code: str, waiting: dict[str, str]
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(*_blocked(1, _pod(waiting=waiting)), FINISHES)
    result = _submit(world, s3_server, f"perm-{code.lower()[:8]}", retries=1)
    assert result.exit_code == 1, result.to_json()
    assert result.error is not None and code in result.error.message
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(result.job_ids[0])]]
    assert len(world.sim_jobs()) == 1
    budgets = world.status(result.run_id).budgets
    assert budgets == {
        "00": {
            "retries_left": 1,
            "infrastructure_recoveries_left": 1,
            "retries_used": 0,
            "infrastructure_recoveries_used": 0,
            "retries_total": 1,
            "infrastructure_recoveries_total": 1,
        }
    }


@pytest.mark.parametrize(("code", "message"), TRANSIENT, ids=[c for c, _ in TRANSIENT])
def test_each_transient_reason_one_verified_relaunch_then_exhaustion(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3, code: str, message: str
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    blocker = _pod(unschedulable=message)
    world.faults(*_blocked(1, blocker), *_blocked(2, blocker), FINISHES)
    run_id = f"tr-{code.lower()[:8]}"
    result = _submit(world, s3_server, run_id, retries=2, infrastructure_grace_seconds=30.0)
    assert result.exit_code == 1, result.to_json()
    assert result.error is not None and "budget is exhausted" in result.error.message
    jobs = sorted(world.sim_jobs(), key=lambda j: j["job_id"])
    assert [j["name"] for j in jobs] == [f"{run_id}-00-prepare", f"{run_id}-00-prepare-a2"]
    # each blocked job was cancelled by its exact id, the first before the relaunch
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(j["job_id"])] for j in jobs]
    calls = world.sim_calls()
    launches = [i for i, c in enumerate(calls) if c[:2] == ["jobs", "launch"]]
    first_cancel = next(i for i, c in enumerate(calls) if c[:2] == ["jobs", "cancel"])
    assert first_cancel < launches[1]  # the relaunch only after the old id's cancel
    budgets = world.status(run_id).budgets
    assert budgets == {
        "00": {
            "retries_left": 2,
            "infrastructure_recoveries_left": 0,
            "retries_used": 0,
            "infrastructure_recoveries_used": 1,
            "retries_total": 2,
            "infrastructure_recoveries_total": 1,
        }
    }


@pytest.mark.parametrize("retries", [0, 1], ids=["no-retries", "one-retry"])
def test_resume_adopts_an_in_flight_job_proven_failed_and_retries_only_with_budget(
    world: World, s3_server: MotoS3, retries: int
) -> None:
    _seed(s3_server, f"inflight-{retries}")
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "timeline",
            "statuses": ["PENDING", *["RUNNING"] * 6, "FAILED"],
        },
        FINISHES,
    )
    run_id = f"inflight-{retries}"
    first = _submit(world, s3_server, run_id, max_wait_seconds=10.0)
    assert first.exit_code == 2, first.to_json()  # timed out, left running: in flight
    assert _cancels(world) == []
    again = _submit(world, s3_server, None, resume_run=run_id, retries=retries)
    names = [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]
    if retries:
        assert again.exit_code == 0, again.to_json()
        assert names[:2] == [f"{run_id}-00-prepare", f"{run_id}-00-prepare-a2"]
    else:
        assert again.exit_code == 1, again.to_json()
        assert names == [f"{run_id}-00-prepare"]  # the terminal outcome stays
    # the resume's --retries raised the wave's stored total (the first submit gave it 0)
    budgets = world.status(run_id, cached=True).budgets
    assert budgets is not None
    assert budgets["00"] == {
        "retries_left": 0,
        "infrastructure_recoveries_left": 1,
        "retries_used": retries,
        "infrastructure_recoveries_used": 0,
        "retries_total": retries,
        "infrastructure_recoveries_total": 1,
    }


FORBIDDEN = (
    'rpc error: code = Unknown desc = failed to pull and unpack image "ghcr.io/acme/trainer:v1": '
    "unexpected status from HEAD request to https://ghcr.io/v2/acme/trainer/manifests/v1: "
    "403 Forbidden"
)


def _watch_reads(world: World) -> list[list[str]]:
    """The queue reads between the launch and npa's cancel: the launch's id lookup is the
    first supervision tick too (issue 19), so the watch's reads are all of them."""
    calls = world.sim_calls()
    launch = next(i for i, c in enumerate(calls) if c[:2] == ["jobs", "launch"])
    cancel = next((i for i, c in enumerate(calls) if c[:2] == ["jobs", "cancel"]), len(calls))
    return [c for c in calls[launch:cancel] if c[:2] == ["jobs", "queue"]]


def test_forbidden_image_pull_stops_at_the_first_confirming_read_and_spends_nothing(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(PENDING, _pod(waiting={"reason": "ImagePullBackOff", "message": FORBIDDEN}))
    poll = 7.0  # distinct from the cancel poll (5 s): a supervision tick is a sleep of 7 s

    result = supervised.run(
        world,
        supervised.single_wave_spec(tmp_path / "spec"),
        run_id="forbid-1",
        poll_seconds=poll,
        retries=1,
        max_infrastructure_recoveries=2,
    )

    assert result.exit_code == 1, result.to_json()
    assert result.error is not None and "IMAGE_PULL_AUTH" in result.error.message
    [job] = world.sim_jobs()  # no second attempt
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(job["job_id"])]]
    watch_reads = _watch_reads(world)
    assert len(watch_reads) == 1 and poll not in world.clock.slept  # the first tick acted
    events = supervised.events(world, "forbid-1")
    [stop] = [d for k, d in events if k == "permanent_blocker"]
    assert (stop["job_id"], stop["blocker"]["code"]) == (job["job_id"], "IMAGE_PULL_AUTH")
    assert stop["blocker"]["class"] == "permanent"
    kinds = [k for k, _ in events]
    assert "infrastructure_recovery" not in kinds and "payload_retry" not in kinds
    budgets = world.status("forbid-1").budgets
    assert budgets is not None and budgets["00"] == {
        "retries_left": 1,
        "infrastructure_recoveries_left": 2,
        "retries_used": 0,
        "infrastructure_recoveries_used": 0,
        "retries_total": 1,
        "infrastructure_recoveries_total": 2,
    }


def test_permanent_blocker_grace_flag_widens_the_window(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(PENDING, _pod(waiting={"reason": "ImagePullBackOff", "message": FORBIDDEN}))

    result = supervised.run(
        world,
        supervised.single_wave_spec(tmp_path / "spec"),
        run_id="forbid-2",
        poll_seconds=7.0,
        permanent_blocker_grace_seconds=20.0,
    )

    assert result.exit_code == 1, result.to_json()
    watch_reads = _watch_reads(world)
    assert len(watch_reads) == 4  # held 0, 7, 14, then 21 s >= 20 s
    assert len(_cancels(world)) == 1 and len(world.sim_jobs()) == 1
