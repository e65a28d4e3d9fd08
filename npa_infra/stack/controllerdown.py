"""The jobs controller's guarded teardown: every user's queue, the gate, ``sky down``, the retry.

One loop executes the decisions of ``runs.controllergate`` on one state
directory, and both teardown paths run it: ``npa skypilot cleanup-controller``
(``workflow.operations.controllercleanup``) and the stack's controller resource
(``stack.providers``, whose ``delete`` the engine runs in its own process during
``npa stack destroy`` or a replacement). It lives in the stack package, below
``workflow``, so that the provider can import it (the import-linter layers).

1. Read ``sky jobs queue --all --all-users -o json`` (``observation``: tasks
   collapsed per job with the user that owns it; a row without its user is a
   partial answer, hence unknown).
   With each queue read, list the launches recorded in flight in the state
   directory (``journal.inflight``): a launch accepted by the API server but
   not yet in the queue holds the down off like a job does.
2. Decide. WAIT sleeps one poll on the injected clock, with a progress line
   naming the CANCELLING jobs or the launches in flight and the time left of
   the shown deadline, then reads again; RETRY_AFTER_DRAIN does the same after
   SkyPilot's own "In-progress managed jobs found" refusal.
3. DOWN is a journaled mutation (faults.md invariant 5): the record
   ``<state>/npa-locks/controller-down.json`` is durable before ``sky down``
   (never ``--purge``; the ``delete`` prompt answered) is sent, and cleared on
   a definite answer (torn down, already absent, refused untouched). While it
   stands no submit launches into the state, and a rerun finishes the teardown:
   it reads the queue again, so a down that completed before the crash is seen
   as no controller, and one that did not is sent again. Once the record is
   durable the launch records are listed once more: a submit writes its launch
   record before it checks for a down record, so of the two that race, at
   least one sees the other and backs off (a launch recorded now clears the
   down record and the gate waits for it).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from npa_infra.journal import inflight
from npa_infra.runs import controllergate as gate
from npa_infra.skypilot.base import SkyPilot
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.models import DownOutcome, DownResult, QueueResult, QueueVerdict
from npa_infra.stack.models import BlockingJob, ControllerReport, ControllerStatus, LaunchInFlight

__all__ = [
    "DEFAULT_DEADLINE",
    "POLL_SECONDS",
    "Outcome",
    "Teardown",
    "execute",
    "observation",
    "report",
]

DEFAULT_DEADLINE = 600.0  # CANCELLING jobs tear their clusters down within minutes
POLL_SECONDS = 5.0

_STATUS = {
    gate.Action.REMOVED: ControllerStatus.REMOVED,
    gate.Action.ALREADY_GONE: ControllerStatus.ALREADY_GONE,
    gate.Action.REFUSE: ControllerStatus.REFUSED,
    gate.Action.WOULD_REMOVE: ControllerStatus.WOULD_REMOVE,
    gate.Action.TIMED_OUT: ControllerStatus.TIMED_OUT,
    gate.Action.STOP_FAILED: ControllerStatus.FAILED,
    gate.Action.FAIL_CLOSED: ControllerStatus.UNKNOWN,
}
_DOWN_KINDS = {
    DownOutcome.TORN_DOWN: gate.DownKind.REMOVED,
    DownOutcome.ALREADY_ABSENT: gate.DownKind.ALREADY_ABSENT,
    DownOutcome.BLOCKED_IN_PROGRESS: gate.DownKind.IN_PROGRESS,
    DownOutcome.FAILED: gate.DownKind.FAILED,
}


@dataclass(frozen=True, slots=True)
class Teardown:
    """What to tear down and how long to wait for CANCELLING jobs."""

    isolated: IsolatedDir
    stack: str
    controller: str
    yes: bool
    deadline_seconds: float = DEFAULT_DEADLINE
    poll_seconds: float = POLL_SECONDS


@dataclass(frozen=True, slots=True)
class Outcome:
    decision: gate.Decision
    queue_reads: int
    sky_down_calls: int


def pending_launches(isolated: IsolatedDir) -> tuple[gate.PendingLaunch, ...] | None:
    """The launches recorded in flight in the state directory; None: not listable."""
    found = inflight.launches_in_flight(isolated.root)
    if found is None:
        return None
    return tuple(
        gate.PendingLaunch(run_id, launch.job_name, launch.home)
        for run_id, launch in sorted(found.items())
    )


def observation(result: QueueResult) -> gate.QueueObservation:
    """An all-users queue answer as the gate reads it (skypilot-0.12.md §3.2, §3.3)."""
    if result.verdict is QueueVerdict.VERIFIED_EMPTY:
        return gate.QueueObservation(gate.QueueKind.CONTROLLER_ABSENT, detail=result.detail)
    if result.verdict is QueueVerdict.UNAVAILABLE:
        detail = result.detail or result.error_kind.value
        return gate.QueueObservation(gate.QueueKind.UNKNOWN, detail=detail)
    if not result.records:
        return gate.QueueObservation(gate.QueueKind.EMPTY)
    if any(not r.user_name for r in result.records):
        # `--all-users` fills user_name on every row; without it the answer is not the one asked
        return gate.QueueObservation(
            gate.QueueKind.UNKNOWN, detail="partial queue answer: rows without their user"
        )
    jobs = []
    for job_id in sorted({r.job_id for r in result.records}):
        rows = sorted((r for r in result.records if r.job_id == job_id), key=lambda r: r.task_id)
        status = gate.job_status([r.status.value for r in rows])
        jobs.append(gate.ManagedJob(job_id, rows[0].job_name, str(rows[0].user_name), status))
    return gate.QueueObservation(gate.QueueKind.JOBS, tuple(jobs))


def _down(
    sky: SkyPilot, plan: Teardown, now: float
) -> DownResult | tuple[gate.PendingLaunch, ...] | None:
    """``sky down`` of the controller, journaled before it is sent (module docstring, 3);
    the launches (or None: not listable) instead when one was recorded meanwhile."""
    root = plan.isolated.root
    inflight.begin_controller_down(
        root, inflight.ControllerDown(plan.controller, plan.stack, os.getpid(), now)
    )
    launches = pending_launches(plan.isolated)
    if launches != ():
        inflight.end_controller_down(root)  # nothing sent: the launch goes on, the gate waits
        return launches
    result = sky.down_controller()
    if result.outcome is not DownOutcome.FAILED:  # a definite answer; a failure may have acted
        inflight.end_controller_down(root)
    return result


def _left(deadline: float, now: float) -> float:
    return max(0.0, deadline - now)


def execute(
    sky: SkyPilot,
    plan: Teardown,
    *,
    now: Callable[[], float],
    sleep: Callable[[float], None],
    progress: Callable[[str], None],
) -> Outcome:
    """Run the gate to a final decision (module docstring); ``sky down`` only under ``yes``."""
    deadline = now() + plan.deadline_seconds
    queue: gate.QueueObservation | None = observation(sky.queue(all_users=True))
    launches = pending_launches(plan.isolated)
    reads, downs = 1, 0
    last, detail = gate.DownKind.NONE, ""
    while True:
        decision = gate.decide(
            gate.GateInput(
                queue, last, detail, now() >= deadline, confirmed=plan.yes, launches=launches
            )
        )
        if decision.action in (gate.Action.WAIT, gate.Action.RETRY_AFTER_DRAIN):
            progress(_waiting(decision, plan, _left(deadline, now())))
            sleep(min(plan.poll_seconds, _left(deadline, now())))
            queue, reads = observation(sky.queue(all_users=True)), reads + 1
            launches = pending_launches(plan.isolated)
            continue
        if decision.action is gate.Action.DOWN:
            progress(f"tearing down {plan.controller} (sky down, answering its delete prompt)")
            answer = _down(sky, plan, now())
            if not isinstance(answer, DownResult):
                launches = answer  # recorded after the decision: decide again, nothing sent
                continue
            downs += 1
            queue, last, detail = None, _DOWN_KINDS[answer.outcome], answer.detail
            continue
        if decision.action is gate.Action.ALREADY_GONE:
            inflight.end_controller_down(plan.isolated.root)  # a crashed down had finished
        return Outcome(decision, reads, downs)


def _waiting(decision: gate.Decision, plan: Teardown, left: float) -> str:
    """The progress line of one wait, with the time left of the shown deadline."""
    deadline = f"{left:.0f}s left of the {plan.deadline_seconds:.0f}s deadline"
    if decision.action is gate.Action.RETRY_AFTER_DRAIN:
        return (
            "SkyPilot refused the teardown: in-progress managed jobs found; reading "
            f"the queue again ({deadline})"
        )
    if decision.launches:
        return (
            f"waiting for {len(decision.launches)} launch(es) in flight to settle "
            f"({decision.describe()}): {deadline}"
        )
    return (
        f"waiting for {len(decision.draining)} CANCELLING job(s) to reach "
        f"CANCELLED ({decision.describe()}): {deadline}"
    )


def _settle(launch: gate.PendingLaunch, stack: str) -> str:
    """The command that settles one launch in flight: cancel its run, from its own home."""
    home = f"NPA_HOME={shlex.quote(launch.home)} " if launch.home != "?" else ""
    return f"{home}npa workbench workflow cancel {launch.run_id} -s {stack} --json"


def _next(plan: Teardown, status: ControllerStatus, decision: gate.Decision) -> list[str]:
    rerun = f"npa skypilot cleanup-controller --stack {plan.stack} --yes"
    if decision.launches and status in (ControllerStatus.REFUSED, ControllerStatus.TIMED_OUT):
        return [*(_settle(launch, plan.stack) for launch in decision.launches), rerun]
    if status in (ControllerStatus.REFUSED, ControllerStatus.TIMED_OUT):
        return ["npa workbench workflow cancel <run> --json", rerun]
    if status is ControllerStatus.WOULD_REMOVE:
        return [rerun]
    if status in (ControllerStatus.FAILED, ControllerStatus.UNKNOWN):
        return ["npa skypilot status", rerun]
    return [f"npa stack destroy --stack {plan.stack} --yes"]


def report(plan: Teardown, outcome: Outcome) -> ControllerReport:
    """The typed result of one teardown (``ControllerReport``, its exit code beside it)."""
    decision = outcome.decision
    status = _STATUS[decision.action]
    held = [*decision.blocking, *decision.draining]
    return ControllerReport(
        status=status,
        stack=plan.stack,
        state_dir=str(plan.isolated.root),
        controller=plan.controller,
        reason=decision.reason.value,
        blocking_jobs=[
            BlockingJob(id=j.job_id, name=j.name, user=j.user, status=j.status) for j in held
        ],
        launches_in_flight=[
            LaunchInFlight(run_id=launch.run_id, job_name=launch.job_name, home=launch.home)
            for launch in decision.launches
        ],
        next=_next(plan, status, decision),
        deadline_seconds=plan.deadline_seconds,
        detail=decision.describe()[:1000],
        sky_down_calls=outcome.sky_down_calls,
        queue_reads=outcome.queue_reads,
    )
