"""What to do next with an attempt that npa itself set out to cancel (faults.md invariants 3-5).

Every cancel npa sends while supervising a wave (a transient or an
infrastructure recovery, a permanent blocker, a recovery with no budget left)
is journaled first as a ``CancelIntent`` on the attempt, and its outcome after.
A crash anywhere between the two leaves the intent, so ``--resume-run`` can
tell npa's own cancel from someone else's and carry the step through instead
of reading it as the job's end. The supervisor runs the same decision while
it cancels, so the first pass and a resumed one take one path.

``decide(intent, observation, sent=...)`` is pure. One ordered chain, the
first matching rule wins:

1. The job could not be observed (an unreadable queue, our row missing from
   a partial answer): with an intent, block and keep observing; without one,
   leave it to supervision, which has its own rule for unreadable queues.
   Unknown never spends a budget, relaunches or fails (faults.md invariant 4).
2. No intent: CANCELLED or CANCELLING is someone else's cancel, so the run is
   cancelled by an operator and never relaunched; anything else is supervised.
3. SUCCEEDED: the job ended on its own before the cancel took hold; its own
   outcome stands (supervise it: its outputs are validated).
4. Not yet cancelled by this process and still cancellable (any status but
   CANCELLED and CANCELLING, the FAILED* ones included: a cancel by exact id
   is the only proof npa gets for a job it is about to replace): send the
   cancel the intent names.
5. Terminal, or authoritatively absent: the cancel is proven. A recovery
   continues to the relaunch proof (spending its budget, once, when the
   intent has not spent it yet); a stop fails the wave with the recorded code.
6. Otherwise (CANCELLING, or still live after this process sent the cancel):
   wait for the cancel to be terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from npa_infra.runs.supervision import TERMINAL_STATUSES, Verdict

__all__ = [
    "INTENT_KEY",
    "OUTCOME_KEY",
    "Action",
    "CancelDecision",
    "CancelIntent",
    "CancelOutcome",
    "CancelReason",
    "JobObservation",
    "Presence",
    "Rule",
    "decide",
    "reason_for",
]

INTENT_KEY = "cancel_intent"  # the attempt's journal data key of its CancelIntent
OUTCOME_KEY = "cancel_outcome"  # ... and of the outcome of that cancel

_CANCELLED = frozenset({"CANCELLED", "CANCELLING"})
_TERMINAL = TERMINAL_STATUSES  # one set of terminal SkyPilot statuses in the core


class CancelReason(StrEnum):
    """Why npa cancels an attempt; the journal value of ``CancelIntent.reason``."""

    TRANSIENT_RECOVERY = "transient_recovery"  # a transient blocker outlasted its grace
    INFRASTRUCTURE_RECOVERY = "infrastructure_recovery"  # FAILED_NO_RESOURCE, FAILED_CONTROLLER
    PERMANENT_BLOCKER = "permanent_blocker"  # stop the wave with the blocker's code
    BUDGET_EXHAUSTED = "budget_exhausted"  # a recovery was due and no budget is left: stop

    @property
    def relaunches(self) -> bool:
        """A recovery goes on to a new attempt; the other reasons end the wave."""
        return self in (CancelReason.TRANSIENT_RECOVERY, CancelReason.INFRASTRUCTURE_RECOVERY)


class CancelOutcome(StrEnum):
    """How the cancel of an intent ended (runtime-reference.md §3 "Aborting")."""

    VERIFIED = "verified"  # the id was seen terminal, or authoritatively absent
    REQUESTED = "requested"  # acknowledged, not seen terminal before the deadline
    FAILED = "failed"  # the cancel command failed and the id was not seen terminal
    UNOBSERVED = "unobserved"  # the job could not be observed; the cancel was never sent


class CancelIntent(BaseModel):
    """The durable record, journaled before ``sky jobs cancel``, of a cancel npa means to send.

    ``budget`` names the wave budget the recovery spends (None: it spends none);
    ``spent`` turns true in the same journal step that spends it, so a resume
    never spends it twice.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: int
    wave: int
    attempt: int
    reason: CancelReason
    code: str | None = None  # the blocker code or job status the cancel answers
    status: str | None = None  # the job's status when the intent was written
    blocker: dict[str, Any] | None = None  # the blocker's diagnosis (kubernetes.md §6), if any
    budget: str | None = None
    spent: bool = False

    @classmethod
    def from_json(cls, data: object) -> CancelIntent | None:
        """The intent of an attempt's journal data value; None when there is none.

        Raises:
            pydantic.ValidationError: the journaled value is not an intent.
        """
        return None if data is None else cls.model_validate(data)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Presence(StrEnum):
    PRESENT = "present"  # the queue lists the job: ``status`` is its status
    ABSENT = "absent"  # authoritative: no jobs controller, so no jobs at all
    UNKNOWN = "unknown"  # unreadable, or our row missing from an answer: never absence


@dataclass(frozen=True, slots=True)
class JobObservation:
    """One read of the job's status by exact id."""

    presence: Presence
    status: str | None = None

    @classmethod
    def present(cls, status: str) -> JobObservation:
        return cls(Presence.PRESENT, status)

    @classmethod
    def absent(cls) -> JobObservation:
        return cls(Presence.ABSENT)

    @classmethod
    def unknown(cls) -> JobObservation:
        return cls(Presence.UNKNOWN)


class Action(StrEnum):
    SUPERVISE = "supervise"  # no cancel of npa's to carry through: watch the job as usual
    SEND_CANCEL = "send_cancel"  # send the cancel the intent names
    WAIT_FOR_CANCEL = "wait_for_cancel"  # observe again until the cancel is terminal
    CONTINUE_RECOVERY = "continue_recovery"  # the relaunch proof, then the next attempt
    FAIL_WITH_CODE = "fail_with_code"  # end the wave failed with the intent's code
    CANCELLED_BY_OPERATOR = "cancelled_by_operator"  # someone else's cancel: never relaunch
    BLOCK_UNKNOWN = "block_unknown"  # keep observing; past the deadline, recovery-required


class Rule(StrEnum):
    """Which rule of the module docstring decided (journaled with the outcome)."""

    UNKNOWN_WITH_INTENT = "unknown_with_intent"
    UNKNOWN_WITHOUT_INTENT = "unknown_without_intent"
    FOREIGN_CANCEL = "foreign_cancel"
    NO_INTENT = "no_intent"
    SUCCEEDED_ON_ITS_OWN = "succeeded_on_its_own"
    CANCEL_NOT_SENT = "cancel_not_sent"
    CANCEL_PROVEN = "cancel_proven"
    CANCEL_IN_PROGRESS = "cancel_in_progress"


@dataclass(frozen=True, slots=True)
class CancelDecision:
    """The next action; ``spend`` is the budget to spend now (CONTINUE_RECOVERY only)."""

    action: Action
    rule: Rule
    spend: str | None = None
    code: str | None = None  # FAIL_WITH_CODE: the code the wave fails with


def decide(
    intent: CancelIntent | None, observation: JobObservation, *, sent: bool = False
) -> CancelDecision:
    """The next step for an attempt (see the module docstring).

    ``sent``: this process already sent the intent's cancel (and so does not
    send it again while it waits for it to be terminal).
    """
    status = observation.status if observation.presence is Presence.PRESENT else None
    if observation.presence is Presence.UNKNOWN or (
        observation.presence is Presence.PRESENT and status is None
    ):  # rule 1: faults.md invariant 4, unknown is not absent
        if intent is None:
            return CancelDecision(Action.SUPERVISE, Rule.UNKNOWN_WITHOUT_INTENT)
        return CancelDecision(Action.BLOCK_UNKNOWN, Rule.UNKNOWN_WITH_INTENT)
    if intent is None:  # rule 2: no intent journaled, so npa never sent this cancel
        if status in _CANCELLED:
            return CancelDecision(Action.CANCELLED_BY_OPERATOR, Rule.FOREIGN_CANCEL)
        return CancelDecision(Action.SUPERVISE, Rule.NO_INTENT)
    if status == "SUCCEEDED":  # rule 3: the job's own outcome stands
        return CancelDecision(Action.SUPERVISE, Rule.SUCCEEDED_ON_ITS_OWN)
    if not sent and status is not None and status not in _CANCELLED:  # rule 4
        return CancelDecision(Action.SEND_CANCEL, Rule.CANCEL_NOT_SENT)
    if status is None or status in _TERMINAL:  # rule 5: terminal, or authoritatively absent
        return _proven(intent)
    return CancelDecision(Action.WAIT_FOR_CANCEL, Rule.CANCEL_IN_PROGRESS)  # rule 6


def _proven(intent: CancelIntent) -> CancelDecision:
    if intent.reason.relaunches:  # faults.md invariant 3: our own cancel never fails the run
        spend = intent.budget if not intent.spent else None
        return CancelDecision(Action.CONTINUE_RECOVERY, Rule.CANCEL_PROVEN, spend=spend)
    return CancelDecision(Action.FAIL_WITH_CODE, Rule.CANCEL_PROVEN, code=intent.code)


def reason_for(verdict: Verdict, recoveries_left: int) -> CancelReason | None:
    """Which cancel a finished watch calls for; None when npa cancels nothing."""
    if verdict is Verdict.PERMANENT_BLOCKER:  # runtime-reference.md §3: stop, spend no budget
        return CancelReason.PERMANENT_BLOCKER
    if verdict is Verdict.TRANSIENT_EXPIRED:  # a job still pending must not start behind a failure
        if recoveries_left > 0:
            return CancelReason.TRANSIENT_RECOVERY
        return CancelReason.BUDGET_EXHAUSTED
    if verdict is Verdict.INFRASTRUCTURE_FAILED and recoveries_left > 0:  # §3: provider recovery
        return CancelReason.INFRASTRUCTURE_RECOVERY
    return None  # exhausted on a job already ended, or not npa's to cancel (payload, timeout)
