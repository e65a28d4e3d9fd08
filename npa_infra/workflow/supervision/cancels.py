"""The cancels npa itself sends while supervising a wave: intent, cancel, outcome.

Before ``sky jobs cancel`` the attempt's ``runs.resume.CancelIntent`` is
journaled, with the budget its recovery will spend; after it, the outcome
(faults.md invariant 5). ``settle`` drives the cancel with the pure
``runs.resume.decide`` until the cancel is proven, or its deadline passes. A
resumed run calls the same ``settle`` on the intent it finds on the attempt,
so a crash between any two of these steps is carried through and never read
as the job's own end (invariant 3). ``spend`` spends the intent's budget and
marks the intent spent in one journal step, so no resume spends it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from npa_infra.runs import resume
from npa_infra.runs.resume import Action, CancelIntent, CancelOutcome, JobObservation
from npa_infra.skypilot.models import ErrorKind, QueueVerdict
from npa_infra.workflow.execution import recovery

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.models import CancelResult
    from npa_infra.workflow.target.services import Clock

__all__ = [
    "CANCEL_DEADLINE",
    "CANCEL_POLL",
    "Settled",
    "intent_of",
    "observe",
    "record",
    "settle",
    "spend",
]

CANCEL_POLL = 5.0
CANCEL_DEADLINE = 300.0
_WAITING = (Action.WAIT_FOR_CANCEL, Action.BLOCK_UNKNOWN)
_VERDICTS = {
    resume.CancelReason.TRANSIENT_RECOVERY: "transient_expired",
    resume.CancelReason.INFRASTRUCTURE_RECOVERY: "infrastructure_failed",
}


@dataclass(frozen=True, slots=True)
class Settled:
    """Where the cancel of an intent ended: the last decision and the cancel's proof."""

    decision: resume.CancelDecision
    check: recovery.Check


def intent_of(journal: Journal, run_id: str, wave_index: int, attempt: int) -> CancelIntent | None:
    """The cancel intent journaled on one attempt, or None."""
    row = next((a for a in journal.attempts(run_id, wave_index) if a.attempt == attempt), None)
    return CancelIntent.from_json((row.data if row is not None else {}).get(resume.INTENT_KEY))


def record(journal: Journal, run_id: str, intent: CancelIntent, now: float) -> None:
    """Journal the intent (before its cancel is sent): one durable step."""
    journal.record_attempt_step(
        run_id,
        intent.wave,
        intent.attempt,
        data={resume.INTENT_KEY: intent.to_json(), resume.OUTCOME_KEY: None},
        event=("cancel_intent", intent.to_json()),
        now=now,
    )


def observe(sky: SkyPilot, job_id: int) -> JobObservation:
    """One read of the job by exact id; only a missing controller proves absence."""
    queue = sky.queue()
    if queue.verdict is QueueVerdict.VERIFIED_EMPTY:
        return JobObservation.absent()
    status = queue.status_of(job_id) if queue.verdict is QueueVerdict.RECORDS else None
    # a row missing from an answer is unknown, not absent (runtime-reference.md §1)
    return JobObservation.present(status.value) if status is not None else JobObservation.unknown()


def settle(
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    run_id: str,
    intent: CancelIntent,
    first: JobObservation | None = None,
) -> Settled:
    """Send the intent's cancel if it is due (at most once here), poll the id to terminal,
    and journal the outcome; ``first`` is an observation just made (the watch's last).

    Bounded by ``CANCEL_DEADLINE``: past it the check is indeterminate (never a failure).
    """
    started = clock.now()
    sent: CancelResult | None = None
    seen = first
    while True:
        observation = seen if seen is not None else observe(sky, intent.job_id)
        seen = None
        decision = resume.decide(intent, observation, sent=sent is not None)
        if decision.action is Action.SEND_CANCEL:
            sent = sky.cancel([intent.job_id])
            continue
        if decision.action not in _WAITING:
            what = observation.status or "absent (no jobs controller)"
            check = recovery.Check(True, f"job {intent.job_id} is {what}")
            return _outcome(journal, clock, run_id, intent, decision, check, CancelOutcome.VERIFIED)
        if clock.now() - started >= CANCEL_DEADLINE:
            return _overdue(journal, clock, run_id, intent, decision, observation, sent)
        clock.sleep(CANCEL_POLL)


def spend(
    journal: Journal, run_id: str, intent: CancelIntent, budgets: dict[str, int], now: float
) -> CancelIntent:
    """Spend the intent's budget and mark the intent spent, in one journal step."""
    assert intent.budget is not None and not intent.spent
    budgets[intent.budget] -= 1
    spent = intent.model_copy(update={"spent": True})
    body: dict[str, Any] = {
        "wave": intent.wave,
        "verdict": _VERDICTS.get(intent.reason, intent.reason.value),
        "status": intent.status,
        "blocker": intent.blocker,
        "job_id": intent.job_id,
        "attempt": intent.attempt,
        **budgets,
    }
    journal.record_attempt_step(
        run_id,
        intent.wave,
        intent.attempt,
        data={resume.INTENT_KEY: spent.to_json()},
        budgets=budgets,
        event=("infrastructure_recovery", body),
        now=now,
    )
    return spent


def _overdue(
    journal: Journal,
    clock: Clock,
    run_id: str,
    intent: CancelIntent,
    decision: resume.CancelDecision,
    observation: JobObservation,
    sent: CancelResult | None,
) -> Settled:
    if sent is not None and sent.error_kind is not ErrorKind.NONE:
        outcome = CancelOutcome.FAILED
    elif sent is None and decision.action is Action.BLOCK_UNKNOWN:
        outcome = CancelOutcome.UNOBSERVED
    else:
        outcome = CancelOutcome.REQUESTED
    seen = observation.status or "unreadable"
    detail = (sent.detail if sent is not None else "") or outcome.value
    reason = (
        f"job {intent.job_id} did not reach a terminal state after cancel "
        f"(last seen {seen}; {detail})"
    )
    check = recovery.Check(False, reason, indeterminate=True)
    return _outcome(journal, clock, run_id, intent, decision, check, outcome)


def _outcome(
    journal: Journal,
    clock: Clock,
    run_id: str,
    intent: CancelIntent,
    decision: resume.CancelDecision,
    check: recovery.Check,
    outcome: CancelOutcome,
) -> Settled:
    body: Mapping[str, Any] = {
        "wave": intent.wave,
        "attempt": intent.attempt,
        "job_id": intent.job_id,
        "reason": intent.reason.value,
        "outcome": outcome.value,
        "next": decision.action.value,
        "rule": decision.rule.value,
        "detail": check.reason,
    }
    journal.record_attempt_step(
        run_id,
        intent.wave,
        intent.attempt,
        data={resume.OUTCOME_KEY: dict(body)},
        event=("cancel_outcome", body),
        now=clock.now(),
    )
    return Settled(decision, check)
