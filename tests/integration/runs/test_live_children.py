"""Process death with a live ``sky`` child, cancel racing a launch, and two npa homes.

These are faults.md's first and third fault classes, driven where they happen:
a real npa process (a fork running the real submit against the simulator and
the Kubernetes double) is killed while its real ``sky jobs launch`` child is
still running and has not acted yet; a cancel runs while a submit's launch is
in flight; two npa homes submit one run into one SkyPilot state. Every wait is
on an event: the simulator writes the hanging child's pid into a FIFO, and the
test releases it through another.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from pathlib import Path

import pytest

from npa_infra import signals
from npa_infra.errors import NpaError, RunLockedError, RunStateError
from npa_infra.runs.children import ChildState
from npa_infra.skypilot import children
from npa_infra.workflow.operations import cancellation
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
WAIT = 120.0  # the bound on every event wait; a healthy run takes well under a second


@dataclasses.dataclass
class Hang:
    """A FIFO pair: the simulator signals 'hanging now' on one and waits for release on the other."""

    signal_fifo: Path
    release_fifo: Path

    @classmethod
    def make(cls, root: Path) -> Hang:
        hang = cls(root / "hanging.fifo", root / "release.fifo")
        os.mkfifo(hang.signal_fifo)
        os.mkfifo(hang.release_fifo)
        return hang

    def rule(self, command: str = "jobs.launch", **extra: object) -> dict[str, object]:
        return {
            "command": command,
            "nth": 1,
            "action": "hang",
            "signal_fifo": str(self.signal_fifo),
            "release_fifo": str(self.release_fifo),
            **extra,
        }

    def hanging_pid(self) -> int:
        with open(self.signal_fifo, encoding="ascii") as fifo:  # blocks until the child hangs
            return int(fifo.readline())

    def release(self) -> None:
        with open(self.release_fifo, "w", encoding="ascii") as fifo:
            fifo.write("go\n")


def _fork_submit(world: World, run_id: str, *, pdeathsig: bool = True, **options: object) -> int:
    """A real npa process: the submit SDK with SIGTERM/SIGHUP handled as the CLI does."""
    pid = os.fork()
    if pid == 0:
        code = 9
        try:
            signals.install()
            if not pdeathsig:
                os.environ["PATH"] = "/nonexistent"  # no setpriv: only the gate and the journal
            result = world.submit(MINIMAL, run_id=run_id, **options)
            code = signals.exit_code() if result.exit_code == 130 else result.exit_code
        except (RunLockedError, RunStateError):
            code = 7
        except BaseException as exc:
            import traceback

            (world.root / f"{run_id}.error").write_text(
                repr(exc) + "\n" + "".join(traceback.format_exception(exc))
            )
            code = 9
        os._exit(code)
    return pid


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _launch_calls(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]


@pytest.mark.parametrize(
    "how", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=["kill", "term", "hup"]
)
def test_npa_killed_with_its_launch_child_alive_then_resume_launches_once(
    world: World, how: signal.Signals
) -> None:
    hang = Hang.make(world.root)
    world.faults(hang.rule())
    npa = _fork_submit(world, "kill-1")
    child = children.identify(hang.hanging_pid())  # the launch child is running, not yet acted
    os.kill(npa, how)
    assert _wait(npa) == (-signal.SIGKILL if how is signal.SIGKILL else 128 + how)
    # the child died with npa: it can never create the job after the resume looked
    assert children.wait_gone(child, WAIT) is ChildState.GONE
    assert world.jobs_named("kill-1") == []
    resumed = world.submit(MINIMAL, resume_run="kill-1")
    assert resumed.status == "SUBMITTED", resumed.to_json()
    assert len(world.jobs_named("kill-1")) == 1
    assert len(_launch_calls(world)) == 2  # the killed attempt's call, and the resume's


def test_resume_waits_for_a_launch_child_that_outlived_npa(world: World) -> None:
    """Where the child cannot die with npa (no parent-death signal), its journaled identity
    makes the resume wait for it, saying so, and adopt what it created: one job."""
    hang = Hang.make(world.root)
    world.faults(hang.rule())
    npa = _fork_submit(world, "orphan-1", pdeathsig=False)
    child = children.identify(hang.hanging_pid())
    os.kill(npa, signal.SIGKILL)
    assert _wait(npa) == -signal.SIGKILL
    assert children.observe(child) is ChildState.ALIVE  # orphaned, still able to act

    waiting = threading.Event()
    lines: list[str] = []

    def progress(line: str) -> None:
        lines.append(line)
        if f"waiting for pid {child.pid}" in line:
            waiting.set()

    outcome: dict[str, object] = {}

    def resume() -> None:
        from npa_infra.workflow.submission import pipeline

        try:
            outcome["result"] = pipeline.submit(
                MINIMAL,
                world.options(resume_run="orphan-1"),
                env=world.env,
                services=dataclasses.replace(world.services(), progress=progress),
            )
        except NpaError as exc:  # pragma: no cover - reported by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=resume)
    thread.start()
    assert waiting.wait(WAIT), lines
    assert len(_launch_calls(world)) == 1  # the resume waits: it has not launched beside it
    hang.release()  # the orphan goes on and creates its job
    thread.join(WAIT)
    assert not thread.is_alive()
    result = outcome.get("result")
    assert result is not None, outcome
    assert result.status == "SUBMITTED"  # type: ignore[attr-defined]
    assert len(world.jobs_named("orphan-1")) == 1
    assert len(_launch_calls(world)) == 1  # the orphan's job was adopted, never launched again


def test_cancel_while_an_orphaned_launch_child_may_act_never_reports_absent(world: World) -> None:
    hang = Hang.make(world.root)
    world.faults(hang.rule())
    npa = _fork_submit(world, "orphan-2", pdeathsig=False)
    child = children.identify(hang.hanging_pid())
    os.kill(npa, signal.SIGKILL)
    _wait(npa)
    report = world.cancel("orphan-2")
    assert report.outcome == "launch_in_progress" and report.exit_code == 2
    assert any("may still create" in e for e in report.errors)
    hang.release()
    assert children.wait_gone(child, WAIT) is ChildState.GONE
    [job] = world.jobs_named("orphan-2")
    again = world.cancel("orphan-2")
    assert again.outcome == "cancelled" and again.cancelled_job_ids == [job["job_id"]]
    # the run is cancelled: a resume launches nothing more
    resumed = world.submit(MINIMAL, resume_run="orphan-2")
    assert resumed.status == "CANCELLED"
    assert len(world.jobs_named("orphan-2")) == 1


def test_cancel_racing_an_accepted_launch_waits_then_cancels_the_exact_job(world: World) -> None:
    """The submit holds the launch lock while its accepted launch has not answered; cancel
    waits for it to settle, then cancels that job by id: never 'already_absent'."""
    hang = Hang.make(world.root)
    world.faults(hang.rule(after_accept=True))  # the job exists; the launch has not answered
    npa = _fork_submit(world, "race-2")
    hang.hanging_pid()

    waiting = threading.Event()
    report: dict[str, cancellation.CancelReport] = {}

    def progress(line: str) -> None:
        if "a launch is in flight" in line:
            waiting.set()

    def cancel() -> None:
        services = dataclasses.replace(world.services(), progress=progress)
        report["r"] = cancellation.cancel_run("race-2", env=world.env, services=services)

    thread = threading.Thread(target=cancel)
    thread.start()
    assert waiting.wait(WAIT)
    assert not any(c[:2] == ["jobs", "cancel"] for c in world.sim_calls())
    hang.release()
    assert _wait(npa) == 0  # the one-shot submit reconciled and adopted its job
    thread.join(WAIT)
    [job] = world.jobs_named("race-2")
    assert report["r"].outcome == "cancelled"
    assert report["r"].cancelled_job_ids == [job["job_id"]]
    assert job["cancel"] is not None  # the simulator recorded the cancel of that job
    cancels = [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]
    assert cancels == [["jobs", "cancel", "--yes", str(job["job_id"])]]


def test_two_npa_homes_one_state_directory_launch_one_job(world: World, tmp_path: Path) -> None:
    other_home = tmp_path / "second-home"
    read_end, write_end = os.pipe()
    pids = []
    for home in (world.env["NPA_HOME"], str(other_home)):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)  # start together
            world.env["NPA_HOME"] = home
            code = 9
            try:
                code = world.submit(MINIMAL, run_id="homes-1").exit_code
            except (RunLockedError, RunStateError):
                code = 7
            except BaseException:
                code = 9
            os._exit(code)
        pids.append(pid)
    os.close(read_end)
    os.write(write_end, b"go")
    os.close(write_end)
    codes = sorted(_wait(pid) for pid in pids)
    assert 9 not in codes and codes[0] == 0
    assert len(world.jobs_named("homes-1")) == 1
    assert len(_launch_calls(world)) == 1


def test_second_home_never_launches_beside_another_homes_request_in_flight(
    world: World, tmp_path: Path
) -> None:
    """Home A's accepted request is still waiting in the API server when A dies; home B
    submits the same run into the same SkyPilot state. B must not launch a second job:
    it refuses while A's launch may still create it, and adopts the job once it exists."""
    from npa_infra.errors import UncertainOutcomeError
    from npa_infra.journal import inflight

    hang = Hang.make(world.root)
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "delay_appearance", "queue_calls": 4},
        hang.rule("jobs.queue", nth=2),  # A's first read after its launch: A is waiting
    )
    npa = _fork_submit(world, "homes-2")
    hang.hanging_pid()
    os.kill(npa, signal.SIGKILL)
    assert _wait(npa) == -signal.SIGKILL
    marker = inflight.read(inflight.inflight_path(world.isolated.root, "homes-2"))
    assert marker is not None and marker.home == world.env["NPA_HOME"] and marker.request_ids

    first_home = world.env["NPA_HOME"]
    world.env["NPA_HOME"] = str(tmp_path / "second-home")
    with pytest.raises(UncertainOutcomeError, match="launch in flight from npa home"):
        world.submit(MINIMAL, run_id="homes-2")
    assert len(_launch_calls(world)) == 1  # B sent nothing beside A's request
    from npa_infra.skypilot.skycli import SkyCli

    for _ in range(4):  # queue reads move the simulated server on: A's job appears
        SkyCli(world.sky_bin, world.isolated, world.env, check_ports=False).queue()
    result = world.submit(MINIMAL, resume_run="homes-2")
    assert result.status == "SUBMITTED", result.to_json()
    [job] = world.jobs_named("homes-2")
    assert result.job_id == job["job_id"]
    assert len(_launch_calls(world)) == 1  # adopted, never launched again
    world.env["NPA_HOME"] = first_home


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
@pytest.mark.parametrize("pdeathsig", [True, False], ids=["pdeathsig", "no-pdeathsig"])
@pytest.mark.parametrize("point", ["before_acting", "after_accept"])
def test_crash_matrix_point_by_child_fate_by_signal_keeps_one_job(
    world: World, point: str, pdeathsig: bool, how: signal.Signals
) -> None:
    """faults.md's orchestration matrix: where npa dies (its launch child about to act, or
    the job already created and the child not yet answered) x whether the child can die
    with it x the signal. Whatever survives, the resume ends with exactly one job."""
    hang = Hang.make(world.root)
    world.faults(hang.rule(after_accept=point == "after_accept"))
    npa = _fork_submit(world, "matrix-1", pdeathsig=pdeathsig)
    child = children.identify(hang.hanging_pid())
    os.kill(npa, how)
    _wait(npa)
    # SIGTERM is an interrupt: npa kills its child itself; only a SIGKILL without the
    # parent-death signal leaves the child running
    orphaned = how is signal.SIGKILL and not pdeathsig
    if not orphaned:
        assert children.wait_gone(child, WAIT) is ChildState.GONE
    assert (children.observe(child) is ChildState.ALIVE) is orphaned

    waiting = threading.Event()
    outcome: dict[str, object] = {}

    def progress(line: str) -> None:
        if f"waiting for pid {child.pid}" in line:
            waiting.set()

    def resume() -> None:
        from npa_infra.workflow.submission import pipeline

        services = dataclasses.replace(world.services(), progress=progress)
        outcome["result"] = pipeline.submit(
            MINIMAL, world.options(resume_run="matrix-1"), env=world.env, services=services
        )

    thread = threading.Thread(target=resume)
    thread.start()
    if orphaned:
        assert waiting.wait(WAIT)  # the resume waits for the orphan, saying so
        hang.release()
    thread.join(WAIT)
    assert not thread.is_alive()
    result = outcome["result"]
    assert result.status == "SUBMITTED", result.to_json()  # type: ignore[attr-defined]
    assert len(world.jobs_named("matrix-1")) == 1
    created_by_first = point == "after_accept" or orphaned
    assert len(_launch_calls(world)) == (1 if created_by_first else 2)


def test_no_launch_into_a_state_whose_controller_down_is_recorded(world: World) -> None:
    from npa_infra.journal import inflight

    inflight.begin_controller_down(
        world.isolated.root, inflight.ControllerDown("sky-jobs-controller-x", "dev", 1, 1.0)
    )
    with pytest.raises(RunStateError, match="is being torn down"):
        world.submit(MINIMAL, run_id="down-1")
    assert _launch_calls(world) == []
    inflight.end_controller_down(world.isolated.root)
    assert world.submit(MINIMAL, resume_run="down-1").status == "SUBMITTED"
    assert len(world.jobs_named("down-1")) == 1


def test_injected_readiness_gate_is_the_one_the_launch_uses(world: World) -> None:
    """The services object's readiness replaces the real /readyz window (style: one seam)."""
    from npa_infra.runs.models import Category, Evidence

    seen: list[object] = []

    def not_ready(cluster: object) -> tuple[Evidence, tuple[dict[str, object], ...], Category, str]:
        seen.append(cluster)
        return Evidence.TERMINAL, (), Category.CONTEXT, "context refused by the test"

    from npa_infra.workflow.submission import pipeline

    services = dataclasses.replace(world.services(), readiness=not_ready)
    result = pipeline.submit(
        MINIMAL, world.options(run_id="ready-1"), env=world.env, services=services
    )
    assert seen and result.exit_code == 1, result.to_json()  # type: ignore[union-attr]
    assert _launch_calls(world) == []  # not ready: nothing was sent


def test_cancel_refuses_when_the_launch_lock_stays_held_past_its_wait(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch that does not settle within cancel's bound: cancel says so (exit 2) and
    sends nothing, never a success while a launch of the run may still be in flight."""
    from npa_infra.journal.lock import RunLock

    world.submit(MINIMAL, run_id="held-1")
    monkeypatch.setattr(cancellation, "LAUNCH_WAIT", 0.05)  # the bound, not an adapter
    holder = RunLock.in_state(
        world.isolated.root, "launches", "held-1", stack=None, argv=["npa", "submit"], now=1.0
    )
    holder.acquire()
    try:
        report = world.cancel("held-1")
    finally:
        holder.release()
    assert (report.outcome, report.exit_code) == ("launch_in_progress", 2)
    assert not any(c[:2] == ["jobs", "cancel"] for c in world.sim_calls())
    assert world.cancel("held-1").outcome == "cancelled"  # once the launch lock is free


def test_unreadable_inflight_record_is_settled_only_by_authoritative_answers(
    world: World, tmp_path: Path
) -> None:
    """A torn in-flight record names no job: the other home proceeds only because no
    launch request is active and no child is recorded, and then drops the record."""
    from npa_infra.journal import inflight

    path = inflight.inflight_path(world.isolated.root, "torn-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{not json")
    assert inflight.read(path) is not None  # unreadable is never taken as nothing in flight
    world.env["NPA_HOME"] = str(tmp_path / "other-home")
    assert world.submit(MINIMAL, run_id="torn-1").status == "SUBMITTED"
    assert inflight.read(path) is None and len(world.jobs_named("torn-1")) == 1
