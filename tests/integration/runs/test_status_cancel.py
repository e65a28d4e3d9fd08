"""``status`` and ``cancel`` of live runs: exact ids, pending-pod reasons, outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.runs.crash import KILLED, run_killed_after
from tests.integration.runs.world import ROOT, World, make_world
from tests.support.fakekube import FakeKube

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
PENDING_FOREVER = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING"]}


def test_status_unknown_run_is_not_found_exit_1(world: World) -> None:
    report = world.status("nobody-1")
    assert (report.status, report.exit_code) == ("NOT_FOUND", 1)


def test_status_submitted_run_shows_job_id_and_sky_status(world: World) -> None:
    result = world.submit(MINIMAL, run_id="st-1")
    report = world.status("st-1")
    assert report.sky_job_ids == [result.job_id]
    assert report.waves[0]["sky_status"] in ("PENDING", "STARTING", "RUNNING", "SUCCEEDED")
    assert report.queue_state == "verified"
    assert report.transactions[-1]["state"] == "submitted"
    assert set(report.to_json()) >= {
        "run_id",
        "workflow",
        "status",
        "lifecycle_state",
        "mode",
        "sky_job_ids",
        "waves",
        "queue_state",
        "budgets",
        "updated_at",
    }


def test_status_cached_makes_no_cloud_call(world: World) -> None:
    world.submit(MINIMAL, run_id="st-2")
    world.faults({"command": "*", "action": "fail", "kind": "auth"})  # any sky call would fail
    report = world.status("st-2", cached=True)
    assert report.queue_state == "not_read"
    assert report.sky_job_ids


def test_status_unreadable_queue_is_verification_unavailable_exit_2(world: World) -> None:
    world.submit(MINIMAL, run_id="st-3")
    world.faults({"command": "jobs.queue", "action": "fail", "kind": "server"})
    report = world.status("st-3")
    assert (report.status, report.exit_code) == ("VERIFICATION_UNAVAILABLE", 2)


def test_status_pending_job_reports_the_pod_reason(tmp_path: Path, fake_kube: FakeKube) -> None:
    world = make_world(tmp_path / "pods", fake_kube, pods=True)
    world.faults(
        PENDING_FOREVER,
        {
            "command": "jobs.launch",
            "action": "pod_state",
            "task": 0,
            "pod": {
                "phase": "Pending",
                "waiting": {
                    "reason": "ErrImagePull",
                    "message": "failed to pull: 401 Unauthorized",
                },
            },
        },
    )
    result = world.submit(MINIMAL, run_id="pod-1")
    assert result.exit_code == 0
    report = world.status("pod-1")
    wave = report.waves[0]
    assert wave["sky_status"] == "PENDING"
    assert wave["blockers"], report.to_json()
    assert wave["blockers"][0]["code"] == "IMAGE_PULL_AUTH"


def test_cancel_unknown_run_exit_1(world: World) -> None:
    report = world.cancel("nobody-2")
    assert (report.outcome, report.exit_code) == ("unknown_run", 1)


def test_cancel_never_launched_run_is_a_repeat_safe_no_op(world: World) -> None:
    world.faults({"command": "jobs.queue", "nth": 1, "action": "fail", "kind": "unknown"})
    assert world.submit(MINIMAL, run_id="c-0").status == "ROLLED_BACK"
    world.faults({"command": "*", "action": "fail", "kind": "auth"})  # no cloud call may happen
    for _ in range(2):
        report = world.cancel("c-0")
        assert (report.outcome, report.exit_code) == ("not_submitted", 0)


def test_cancel_running_job_by_exact_id_and_polls_to_terminal(world: World) -> None:
    world.faults(PENDING_FOREVER, {"command": "jobs.cancel", "action": "slow_cancel", "delay": 2})
    result = world.submit(MINIMAL, run_id="c-1")
    report = world.cancel("c-1")
    assert (report.outcome, report.exit_code) == ("cancelled", 0), report.to_json()
    assert report.cancelled_job_ids == [result.job_id]
    cancels = [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]
    assert cancels == [["jobs", "cancel", "--yes", str(result.job_id)]]
    again = world.cancel("c-1")
    assert again.outcome == "already_absent"
    assert again.already_terminal_job_ids == [result.job_id]


def test_cancel_with_unreadable_queue_is_verification_failed_exit_2(world: World) -> None:
    world.submit(MINIMAL, run_id="c-2")
    world.faults({"command": "jobs.queue", "action": "fail", "kind": "server"})
    report = world.cancel("c-2")
    assert (report.outcome, report.exit_code) == ("verification_failed", 2)


def test_cancel_that_never_reaches_terminal_is_partial_exit_2_with_what_remains(
    world: World,
) -> None:
    # a RUNNING job goes through CANCELLING; this one stays there past the poll deadline
    world.faults(
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]},
        {"command": "jobs.cancel", "action": "slow_cancel", "delay": 10_000},
    )
    result = world.submit(MINIMAL, run_id="c-3")
    report = world.cancel("c-3")
    assert (report.outcome, report.exit_code) == ("partial_cancellation", 2), report.to_json()
    assert report.remaining_job_ids == [result.job_id]


@pytest.mark.parametrize("step", [1, 2, 3], ids=["flag", "ids", "outcome"])
def test_cancel_killed_after_its_intent_then_rerun_cancels_once(world: World, step: int) -> None:
    """A cancel SIGKILLed after each of its journal writes (the cancel flag, the exact ids,
    the outcome): rerunning it finishes the job off by exact id, never twice
    by name, and the run never launches again."""
    world.faults(PENDING_FOREVER)
    result = world.submit(MINIMAL, run_id=f"cx-{step}")
    assert result.job_id is not None
    code = run_killed_after(step, lambda: world.cancel(f"cx-{step}"), world.root / "child.json")
    assert code == KILLED
    again = world.cancel(f"cx-{step}")
    assert again.outcome in ("cancelled", "already_absent"), again.to_json()
    cancels = [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]
    assert cancels and all(c == ["jobs", "cancel", "--yes", str(result.job_id)] for c in cancels)
    assert world.status(f"cx-{step}").waves[0]["sky_status"] in ("CANCELLED", "CANCELLING")
    resumed = world.submit(MINIMAL, resume_run=f"cx-{step}")
    assert len(world.jobs_named(f"cx-{step}")) == 1
    assert resumed.job_id in (None, result.job_id)
