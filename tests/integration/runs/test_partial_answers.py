"""Partial queue answers (issue 15 item 3, runtime-reference.md §1, faults.md).

A queue answer that lists another user's job but not ours proves nothing: the
supervisor journals each such read, keeps watching, and confirms an absence
only over reads spanning the grace window and by an exact-name lookup; a
recovery acts only when a fresh read shows the job terminal or absent. Each
test reads the simulator's own records of every launch and cancel, and the
simulator's count of the partial answers it served (so a fault that never
applied fails the test).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.runs import supervised
from tests.integration.runs.world import ROOT, World
from tests.support.skysim import harness

FOREIGN_USER = "someone-else"
MINIMAL = ROOT / "workflows/testing/minimal.yaml"
RUN = "partial-1"
FIRST = f"{RUN}-00-train"
# long enough RUNNING for the hidden reads, the lookups and the rechecks (one step per queue call)
LONG_RUN = {
    "command": "jobs.launch",
    "action": "timeline",
    "statuses": ["PENDING", *["RUNNING"] * 10, "SUCCEEDED"],
}


def _foreign_job(world: World) -> None:
    """Another user's job on the same API server: partial answers list it, not ours."""
    env = {**world.env, "SKYPILOT_USER_ID": FOREIGN_USER}
    argv = [str(world.sky_bin), "jobs", "launch", "--name", "theirs", "--yes", "-d", "echo hi"]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)


def _partial(**rule: Any) -> dict[str, Any]:
    return {"command": "jobs.queue", "action": "partial", "status": "RUNNING", **rule}


def _ours(world: World) -> list[dict[str, Any]]:
    jobs = [j for j in world.sim_jobs() if j["user_hash"] != FOREIGN_USER]
    return sorted(jobs, key=lambda j: j["job_id"])


def _cancels(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]


def _served(world: World) -> int:
    """How many partial answers the simulator gave."""
    return sum(harness.read_state(world.state_dir).get("partial_answers", {}).values())


def _submit(world: World, tmp_path: Path, **options: Any) -> Any:
    _foreign_job(world)
    return supervised.run(
        world,
        supervised.single_wave_spec(tmp_path / "spec"),
        run_id=RUN,
        poll_seconds=5.0,
        **{"max_wait_seconds": 600.0, **options},
    )


@pytest.mark.parametrize(
    "grace",
    [600.0, 5.0],
    ids=["inside-the-window", "window-spanned-lookup-finds-it"],
)
def test_partial_answers_missing_a_running_job_neither_cancel_nor_relaunch(
    world: World, tmp_path: Path, grace: float
) -> None:
    # two -v reads list the other user's job but not our RUNNING one
    world.faults(LONG_RUN, _partial(verbose=True, times=2))

    result = _submit(world, tmp_path, infrastructure_grace_seconds=grace)

    assert result.exit_code == 0, result.to_json()
    assert result.status == "SUCCEEDED"
    assert _served(world) == 2
    assert [j["name"] for j in _ours(world)] == [FIRST]  # one job launched, never relaunched
    assert _cancels(world) == []
    events = supervised.events(world, RUN)
    kinds = [kind for kind, _ in events]
    missing = [data for kind, data in events if kind == "job_missing"]
    assert [m["missing_reads"] for m in missing] == [1, 2]
    assert all(m["evidence"] == "job_missing_from_queue" for m in missing)
    assert "infrastructure_recovery" not in kinds
    assert not [d for k, d in events if k == "job_status" and d["status"] == "FAILED_CONTROLLER"]
    lookups = [data["answer"] for kind, data in events if kind == "job_missing_lookup"]
    if grace == 600.0:
        assert lookups == [] and "job_reappeared" in kinds  # the window never spanned
    else:
        assert lookups == ["found"]  # the exact-name lookup saw it alive


def test_confirmed_absence_is_failed_controller_but_an_alive_recheck_cancels_nothing(
    world: World, tmp_path: Path
) -> None:
    # every read misses the job three times: two -v reads, then the exact-name lookup;
    # the recheck before the recovery is the first read that lists it again
    world.faults(LONG_RUN, _partial(times=3))

    result = _submit(world, tmp_path, infrastructure_grace_seconds=5.0)

    assert result.exit_code == 0, result.to_json()
    assert _served(world) == 3
    assert [j["name"] for j in _ours(world)] == [FIRST]
    assert _cancels(world) == []
    events = supervised.events(world, RUN)
    assert [d["answer"] for k, d in events if k == "job_missing_lookup"] == ["absent"]
    lost = [d for k, d in events if k == "job_status" and d["status"] == "FAILED_CONTROLLER"]
    assert [d.get("evidence") for d in lost] == ["job_missing_from_queue"]
    rechecks = [
        (d["presence"], d["status"], d["verdict"]) for k, d in events if k == "recovery_recheck"
    ]
    assert rechecks == [("present", "RUNNING", "watch_again")]
    assert "infrastructure_recovery" not in [k for k, _ in events]
    report = world.status(RUN)
    assert report.budgets is not None
    assert report.budgets["00"]["infrastructure_recoveries_used"] == 0
    [wave] = report.waves
    assert wave["last_blocker"] is None  # listed again: the missing reads no longer show


def test_absence_confirmed_and_rechecked_recovers_through_the_relaunch_checks(
    world: World, tmp_path: Path
) -> None:
    # the first attempt is missing from every read from the time it runs: lost for npa
    world.faults(LONG_RUN, _partial(names=[FIRST]))

    result = _submit(world, tmp_path, infrastructure_grace_seconds=5.0)

    assert result.exit_code == 0, result.to_json()
    ours = _ours(world)
    assert [j["name"] for j in ours] == [FIRST, f"{FIRST}-a2"]
    # recovery cancels exactly the lost id (its verified end), once, before the relaunch
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(ours[0]["job_id"])]]
    events = supervised.events(world, RUN)
    kinds = [k for k, _ in events]
    assert [d["verdict"] for k, d in events if k == "recovery_recheck"] == ["proceed"]
    assert kinds.index("recovery_recheck") < kinds.index("relaunch_checks")
    [spent] = [d for k, d in events if k == "infrastructure_recovery"]
    assert (spent["verdict"], spent["status"]) == ("infrastructure_failed", "FAILED_CONTROLLER")
    # status shows the journaled missing reads of the lost attempt, none for its successor
    first, second = world.status(RUN).waves
    assert (first["last_blocker"]["code"], first["last_blocker"]["evidence"]) == (
        "JOB_MISSING_FROM_QUEUE",
        "job_missing_from_queue",
    )
    assert second["last_blocker"] is None


def test_status_of_a_job_missing_from_one_read_is_unverified_not_failed(world: World) -> None:
    world.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]})
    _foreign_job(world)
    launched = world.submit(MINIMAL, run_id="st-partial")  # one-shot: SUBMITTED, not watched
    assert launched.exit_code == 0, launched.to_json()
    world.faults(_partial(times=1))

    report = world.status("st-partial")

    assert _served(world) == 1
    assert (report.status, report.exit_code) == ("VERIFICATION_UNAVAILABLE", 2)
    [wave] = report.waves
    assert wave["sky_status"] == "VERIFICATION_UNAVAILABLE"
    assert [(b["code"], b["class"]) for b in wave["blockers"]] == [
        ("JOB_MISSING_FROM_QUEUE", "unknown")
    ]
    assert world.status("st-partial").status == "RUNNING"  # the next read lists it again
