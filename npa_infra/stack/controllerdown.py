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
2. Decide. WAIT sleeps one poll on the injected clock, with a progress line
   naming the CANCELLING jobs and the time left of the shown deadline, then
   reads again; RETRY_AFTER_DRAIN does the same after SkyPilot's own
   "In-progress managed jobs found" refusal.
3. DOWN is a journaled mutation (faults.md invariant 5): the record
   ``<state>/npa-locks/controller-down.json`` is durable before ``sky down``
   (never ``--purge``; the ``delete`` prompt answered) is sent, and cleared on
   a definite answer (torn down, already absent, refused untouched). While it
   stands no submit launches into the state, and a rerun finishes the teardown:
   it reads the queue again, so a down that completed before the crash is seen
   as no controller, and one that did not is sent again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from npa_infra.journal import inflight
from npa_infra.runs import controllergate as gate
from npa_infra.skypilot.base import SkyPilot
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.models import DownOutcome, DownResult, QueueResult, QueueVerdict
from npa_infra.stack.models import BlockingJob, ControllerReport, ControllerStatus

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


def _down(sky: SkyPilot, plan: Teardown, now: float) -> DownResult:
    """``sky down`` of the controller, journaled before it is sent (module docstring, 3)."""
    root = plan.isolated.root
    inflight.begin_controller_down(
        root, inflight.ControllerDown(plan.controller, plan.stack, os.getpid(), now)
    )
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
    reads, downs = 1, 0
    last, detail = gate.DownKind.NONE, ""
    while True:
        decision = gate.decide(
            gate.GateInput(queue, last, detail, now() >= deadline, confirmed=plan.yes)
        )
        if decision.action in (gate.Action.WAIT, gate.Action.RETRY_AFTER_DRAIN):
            left = _left(deadline, now())
            if decision.action is gate.Action.WAIT:
                progress(
                    f"waiting for {len(decision.draining)} CANCELLING job(s) to reach "
                    f"CANCELLED ({decision.describe()}): {left:.0f}s left of the "
                    f"{plan.deadline_seconds:.0f}s deadline"
                )
            else:
                progress(
                    "SkyPilot refused the teardown: in-progress managed jobs found; reading "
                    f"the queue again ({left:.0f}s left of the {plan.deadline_seconds:.0f}s "
                    "deadline)"
                )
            sleep(min(plan.poll_seconds, left))
            queue, reads = observation(sky.queue(all_users=True)), reads + 1
            continue
        if decision.action is gate.Action.DOWN:
            progress(f"tearing down {plan.controller} (sky down, answering its delete prompt)")
            answer = _down(sky, plan, now())
            downs += 1
            queue, last, detail = None, _DOWN_KINDS[answer.outcome], answer.detail
            continue
        if decision.action is gate.Action.ALREADY_GONE:
            inflight.end_controller_down(plan.isolated.root)  # a crashed down had finished
        return Outcome(decision, reads, downs)


def _next(plan: Teardown, status: ControllerStatus) -> list[str]:
    rerun = f"npa skypilot cleanup-controller --stack {plan.stack} --yes"
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
        next=_next(plan, status),
        deadline_seconds=plan.deadline_seconds,
        detail=decision.describe()[:1000],
        sky_down_calls=outcome.sky_down_calls,
        queue_reads=outcome.queue_reads,
    )
