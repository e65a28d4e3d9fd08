"""``workflow status --watch`` end to end: the CLI against the sky simulator and FakeKube.

The command runs through ``CliRunner`` with the world's ``Services`` as the
root context's ``obj``, so its reads go to the simulator (one ``jobs queue``
call advances every job one status of its timeline) and its waits to the
world's virtual clock: ``slept`` records each wait, and none is real.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from typer.testing import CliRunner

from npa_infra.cli.main import app
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"


def _timeline(*statuses: str, nth: int | None = None) -> dict[str, object]:
    rule: dict[str, object] = {
        "command": "jobs.launch",
        "action": "timeline",
        "statuses": list(statuses),
    }
    return rule if nth is None else {**rule, "nth": nth}


@dataclass(frozen=True)
class Watched:
    exit_code: int
    stdout: str
    stderr: str
    slept: list[float]  # the virtual waits of this command only
    queue_reads: int  # ``sky jobs queue`` calls of this command only

    @property
    def frames(self) -> list[str]:
        """One rendered view per refresh (frames are separated by one blank line)."""
        return self.stdout.rstrip("\n").split("\n\n")


def _queue_reads(world: World) -> int:
    return sum(1 for c in world.sim_calls() if c[:2] == ["jobs", "queue"])


def _status(world: World, *args: str) -> Watched:
    slept, queues = len(world.clock.slept), _queue_reads(world)
    result = CliRunner().invoke(
        app,
        ["workbench", "workflow", "status", *args],
        obj=world.services(),
        env=world.env,
        catch_exceptions=False,
    )
    return Watched(
        result.exit_code,
        result.stdout,
        result.stderr,
        world.clock.slept[slept:],
        _queue_reads(world) - queues,
    )


def _frame(run_id: str, job_id: int | None, status: str) -> str:
    return (
        f"run: {run_id}  workflow: minimal  status: {status}\n"
        f"  wave 00 attempt 1: {run_id} job {job_id} {status}"
    )


def test_status_watch_in_progress_then_succeeded_one_frame_per_refresh_exit_0(
    world: World,
) -> None:
    world.faults(_timeline("PENDING", "PENDING", "RUNNING", "RUNNING", "SUCCEEDED"))
    result = world.submit(MINIMAL, run_id="w-1")
    assert result.exit_code == 0, result.to_json()
    watched = _status(world, "w-1", "--watch")
    assert watched.exit_code == 0, watched.stderr
    assert watched.frames == [
        _frame("w-1", result.job_id, status)
        for status in ("PENDING", "RUNNING", "RUNNING", "SUCCEEDED")
    ]
    assert watched.queue_reads == 4  # one verification per refresh
    assert watched.slept == [10.0, 10.0, 10.0]  # the default interval, virtual, between frames
    assert watched.stderr == ""


def test_status_watch_until_failed_uses_interval_and_exits_1(world: World) -> None:
    world.faults(_timeline("PENDING", "PENDING", "RUNNING", "FAILED"))
    result = world.submit(MINIMAL, run_id="w-2")
    watched = _status(world, "w-2", "--watch", "--interval", "2.5")
    assert watched.exit_code == 1
    assert watched.frames == [
        _frame("w-2", result.job_id, status) for status in ("PENDING", "RUNNING", "FAILED")
    ]
    assert watched.slept == [2.5, 2.5]


def test_status_without_watch_shows_one_frame_of_a_running_job_and_never_sleeps(
    world: World,
) -> None:
    world.faults(_timeline("PENDING", "PENDING", "RUNNING", "SUCCEEDED"))
    result = world.submit(MINIMAL, run_id="w-3")
    watched = _status(world, "w-3")
    assert (watched.exit_code, watched.slept, watched.queue_reads) == (0, [], 1)
    assert watched.frames == [_frame("w-3", result.job_id, "PENDING")]


def test_status_watch_json_prints_only_the_final_document(world: World) -> None:
    world.faults(_timeline("PENDING", "PENDING", "RUNNING", "SUCCEEDED"))
    result = world.submit(MINIMAL, run_id="w-4")
    watched = _status(world, "w-4", "--watch", "--json")
    assert watched.exit_code == 0
    payload = json.loads(watched.stdout)  # exactly one document: json.loads rejects two
    assert (payload["run_id"], payload["status"]) == ("w-4", "SUCCEEDED")
    assert [w["sky_status"] for w in payload["waves"]] == ["SUCCEEDED"]
    assert payload["sky_job_ids"] == [result.job_id]
    assert watched.queue_reads == 3  # it did watch: PENDING, RUNNING, SUCCEEDED
    assert watched.slept == [10.0, 10.0]
    assert watched.stderr == ""


def test_status_all_watch_one_queue_read_per_refresh_until_every_run_is_terminal_worst_exit(
    world: World,
) -> None:
    world.faults(
        _timeline("PENDING", "RUNNING", "SUCCEEDED", nth=1),
        _timeline("PENDING", "PENDING", "RUNNING", "FAILED", nth=2),
    )
    first = world.submit(MINIMAL, run_id="wa-1")
    second = world.submit(MINIMAL, run_id="wa-2")
    watched = _status(world, "--all", "--watch", "--interval", "3")
    header = "RUN  WAVE  ATTEMPT  JOB  SKY_STATUS  BLOCKER"
    rows = [
        (f"wa-1  0  1  {first.job_id}  SUCCEEDED  -", f"wa-2  0  1  {second.job_id}  {two}  -")
        for two in ("PENDING", "RUNNING", "FAILED")
    ]
    assert watched.frames == ["\n".join((header, *pair)) for pair in rows]
    assert watched.exit_code == 1  # the worst of SUCCEEDED (0) and FAILED (1)
    assert watched.queue_reads == 3  # one read serves both runs, per refresh
    assert watched.slept == [3.0, 3.0]


def test_status_all_watch_json_is_one_document_of_the_last_refresh(world: World) -> None:
    world.faults(_timeline("PENDING", "PENDING", "RUNNING", "SUCCEEDED"))
    world.submit(MINIMAL, run_id="wj-1")
    watched = _status(world, "--all", "--watch", "--json")
    payload = json.loads(watched.stdout)
    assert [r["status"] for r in payload["runs"]] == ["SUCCEEDED"]
    assert payload["queue_state"] == "verified"
    assert (watched.exit_code, len(watched.slept)) == (0, watched.queue_reads - 1)
    assert watched.slept  # the run was in progress at the first refresh
