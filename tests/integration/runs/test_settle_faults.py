"""Faults in the settle tick of a supervised launch (issue 19), where they happen.

An accepted supervised launch takes its job id from the next shared queue read,
one tick after the POST; meanwhile the launch driver keeps the next launch's
readiness window, so the tick's ``/readyz`` sample is where the test holds a
real npa process (a fork running the real submit against the simulator and the
Kubernetes double): the job exists, its id is not journaled yet, and the run's
launch lock is held. Every wait is on an event: the double sets one when the
held sample arrives, and answers when the test sets the other.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from pathlib import Path

import pytest

from npa_infra import signals
from npa_infra.workflow.operations import cancellation
from tests.integration.runs.supervised import single_wave_spec
from tests.integration.runs.test_partial_answers import _foreign_job
from tests.integration.runs.world import World
from tests.support.skysim import harness

WAIT = 120.0  # the bound on every event wait
RUN = "settle-1"
FINISHES = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING", "SUCCEEDED"]}


@dataclasses.dataclass
class Held:
    """The settle tick's readiness sample, held: ``reached`` when npa is inside it."""

    reached: threading.Event = dataclasses.field(default_factory=threading.Event)
    release: threading.Event = dataclasses.field(default_factory=threading.Event)

    def script(self, world: World) -> None:
        # three samples prove the window before the launch; the fourth is the settle's
        world.fake.script_readyz([200, 200, 200, ("hold", self.reached, self.release)])


def _fork_submit(world: World, spec: Path) -> int:
    pid = os.fork()
    if pid == 0:
        code = 9
        try:
            signals.install()
            result = world.submit(spec, run_id=RUN)
            code = signals.exit_code() if result.exit_code == 130 else int(result.exit_code)
        except BaseException as exc:
            (world.root / "child.error").write_text(repr(exc))
        os._exit(code)
    return pid


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _calls(world: World, *command: str) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[: len(command)] == list(command)]


def _in_settle(world: World) -> None:
    """The job exists, and no queue read has followed its launch yet."""
    calls = world.sim_calls()
    launches = [i for i, c in enumerate(calls) if c[:2] == ["jobs", "launch"]]
    assert len(launches) == 1 and len(world.jobs_named(f"{RUN}-00-train")) == 1
    assert all(c[:2] != ["jobs", "queue"] for c in calls[launches[0] + 1 :])


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_npa_killed_in_the_settle_tick_then_resume_adopts_the_one_job(
    world: World, tmp_path: Path, how: signal.Signals
) -> None:
    spec = single_wave_spec(tmp_path / "spec")
    world.faults(FINISHES)
    held = Held()
    held.script(world)
    npa = _fork_submit(world, spec)
    assert held.reached.wait(WAIT)
    _in_settle(world)
    os.kill(npa, how)
    held.release.set()
    assert _wait(npa) == (-signal.SIGKILL if how is signal.SIGKILL else 128 + how)
    resumed = world.submit(spec, resume_run=RUN)
    assert resumed.status == "SUCCEEDED", resumed.to_json()
    assert len(world.jobs_named(f"{RUN}-00-train")) == 1
    assert len(_calls(world, "jobs", "launch")) == 1  # adopted by exact name, never relaunched
    (record,) = resumed.transactions
    assert record["job_id"] == world.jobs_named(f"{RUN}-00-train")[0]["job_id"]


def test_cancel_during_the_settle_tick_waits_then_cancels_the_exact_job(
    world: World, tmp_path: Path
) -> None:
    spec = single_wave_spec(tmp_path / "spec")  # the default timeline: RUNNING until cancelled
    held = Held()
    held.script(world)
    npa = _fork_submit(world, spec)
    assert held.reached.wait(WAIT)
    _in_settle(world)

    waiting = threading.Event()
    report: dict[str, cancellation.CancelReport] = {}

    def progress(line: str) -> None:
        if "a launch is in flight" in line:
            waiting.set()

    def cancel() -> None:
        services = dataclasses.replace(world.services(), progress=progress)
        report["r"] = cancellation.cancel_run(RUN, env=world.env, services=services)

    thread = threading.Thread(target=cancel)
    thread.start()
    assert waiting.wait(WAIT)  # the second operator waits for the launch to settle
    assert _calls(world, "jobs", "cancel") == []
    held.release.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    code = _wait(npa)
    [job] = world.jobs_named(f"{RUN}-00-train")
    assert report["r"].outcome == "cancelled", report["r"]
    assert report["r"].cancelled_job_ids == [job["job_id"]]
    assert _calls(world, "jobs", "cancel") == [["jobs", "cancel", "--yes", str(job["job_id"])]]
    assert code != 0  # the supervised run ends cancelled, not succeeded
    assert len(_calls(world, "jobs", "launch")) == 1


def test_partial_answer_at_the_settled_lookup_is_not_absence(world: World, tmp_path: Path) -> None:
    # the first read after the settle lists another user's job but leaves ours out: that
    # is not absence; the request is checked, the name read again, and the one job adopted
    _foreign_job(world)
    spec = single_wave_spec(tmp_path / "spec")
    name = f"{RUN}-00-train"
    world.faults(
        FINISHES, {"command": "jobs.queue", "action": "partial", "names": [name], "times": 1}
    )
    result = world.submit(spec, run_id=RUN, poll_seconds=5.0)
    assert result.status == "SUCCEEDED", result.to_json()
    assert sum(harness.read_state(world.state_dir).get("partial_answers", {}).values()) == 1
    assert len(world.jobs_named(name)) == 1
    assert len([c for c in _calls(world, "jobs", "launch") if name in c]) == 1
    (record,) = result.transactions
    states = [r["state"] for r in record["reconciliations"]]
    assert states == ["absent", "absent", "found"]  # before; the partial read; after the check
    assert _calls(world, "api", "status")  # the request was asked about, not presumed gone
