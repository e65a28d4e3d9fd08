"""Two runs supervised at once on one controller: one ``sky jobs queue`` call per tick.

Two supervisors (threads here, processes in production; the shared read is
a file under the state directory, so it does not care) watch one job each
through the real ``SkyCli`` against the ``sky`` simulator, on one virtual
clock that advances only when both have slept (``Lockstep``). Every job
moves one status per queue call in the simulator, so the count of queue
calls is exactly the number of reads that reached it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.runs import supervision
from npa_infra.skypilot.sharedqueue import SharedQueue
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.supervision import watch
from npa_infra.workflow.supervision.watch import WatchResult
from tests.integration.skypilot.simenv import Sim, make_sim
from tests.support.lockstep import Lockstep, RecordingJournal, supervise_together

INTERVAL = 30.0
TIMELINE = ["PENDING", "STARTING", "RUNNING", "RUNNING", "SUCCEEDED"]


def _launch_two(sim: Sim) -> tuple[SkyCli, dict[str, int]]:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": TIMELINE})
    cli = sim.cli()
    ids = {}
    for run in ("run-a", "run-b"):
        assert cli.launch(sim.task(), name=f"{run}-00-train", infra="k8s/npa-ctx").accepted
        (ids[run],) = cli.queue().job_ids(f"{run}-00-train")
    return cli, ids


def _verbose_queue_calls(sim: Sim) -> int:
    calls = sim.state()["calls"]
    return sum(1 for c in calls if c["argv"][:2] == ["jobs", "queue"] and "-v" in c["argv"])


def _supervise_both(sim: Sim, *, shared: bool) -> tuple[dict[str, WatchResult], Lockstep]:
    cli, ids = _launch_two(sim)
    lockstep = Lockstep(parties=2, interval=INTERVAL)
    journal = RecordingJournal()

    def supervise(run: str) -> WatchResult:
        reader = SharedQueue(cli, sim.root / "state" / "supervision", lockstep.now)
        return watch.watch_job(
            run_id=run,
            wave_index=0,
            attempt=1,
            job_id=ids[run],
            sky=cli,
            cluster=None,
            journal=journal,  # type: ignore[arg-type]
            clock=lockstep.clock(),
            policy=supervision.WatchPolicy(),
            interval=INTERVAL,
            read_queue=(lambda since: reader.read(max_age=INTERVAL, not_before=since))
            if shared
            else None,
        )

    return supervise_together(lockstep, ids, supervise), lockstep


def test_two_supervised_runs_share_one_queue_call_per_tick(tmp_path: Path) -> None:
    sim = make_sim(tmp_path)
    before = _verbose_queue_calls(sim)

    results, lockstep = _supervise_both(sim, shared=True)

    assert {run: r.verdict for run, r in results.items()} == {
        "run-a": supervision.Verdict.SUCCEEDED,
        "run-b": supervision.Verdict.SUCCEEDED,
    }
    reads = _verbose_queue_calls(sim) - before
    ticks = lockstep.ticks + 1  # the last tick ends the watches without a sleep
    assert reads == ticks, (reads, ticks)


def test_without_sharing_each_supervisor_reads_every_tick(tmp_path: Path) -> None:
    """The control: the same two watches, each reading for itself."""
    sim = make_sim(tmp_path)
    before = _verbose_queue_calls(sim)

    results, lockstep = _supervise_both(sim, shared=False)

    assert all(r.verdict is supervision.Verdict.SUCCEEDED for r in results.values())
    reads = _verbose_queue_calls(sim) - before
    assert reads >= 2 * lockstep.ticks


@pytest.mark.parametrize("fault_kind", ["server"])
def test_an_unavailable_tick_is_read_again_by_the_other_supervisor(
    tmp_path: Path, fault_kind: str
) -> None:
    sim = make_sim(tmp_path)
    cli, ids = _launch_two(sim)
    counters = sim.state().get("counters", {})
    nth = int(counters.get("jobs.queue", 0)) + 1
    sim.faults(
        {"command": "jobs.launch", "action": "timeline", "statuses": TIMELINE},
        {"command": "jobs.queue", "nth": nth, "action": "fail", "kind": fault_kind},
    )
    now = [1000.0]
    first = SharedQueue(cli, sim.root / "state" / "supervision", lambda: now[0])
    second = SharedQueue(cli, sim.root / "state" / "supervision", lambda: now[0])

    assert first.read(max_age=INTERVAL, not_before=0).verdict.value == "unavailable"
    answer = second.read(max_age=INTERVAL, not_before=0)

    assert answer.verdict.value == "records"
    assert set(ids.values()) <= {r.job_id for r in answer.records}
    assert (first.calls, second.calls) == (1, 1)
