"""The pure resume decision for one in-flight wave attempt (runtime-reference.md §3 Resume).

Given the attempt's last launch-transaction record and an exact lookup by
its name (and recorded id), decide whether ``--resume-run`` adopts, attaches
to, keeps, relaunches or blocks the attempt. One ordered chain of early
returns; the first matching rule wins:

1. ``found``: SUCCEEDED → adopt; FAILED* or CANCELLED → keep failed; any
   other status (CANCELLING included) → attach and poll.
2. ``unavailable``/``ambiguous``, or an absence that is not authoritative
   (a launch request may still be running) → ``block_indeterminate``.
3. Authoritative absence:
   a. no record, or ``launch_sequence`` 0 → relaunch (nothing was ever sent);
   b. a transient or interrupted latest category with a deadline-exhausted,
      interrupted or ``block_indeterminate`` decision, or
      ``block_after_uncertain_success`` whose *latest* failure is itself
      transient or interrupted → relaunch;
   c. a record still ``launching`` (the process crashed) → relaunch;
   d. ``--retry-absent-in-flight`` with ``launch_sequence`` > 0 → relaunch
      only when every declared output is proven absent;
   e. anything else → ``resume_block_terminal_or_legacy_absence``, which is
      sticky: only rule d clears it.

``ResumeVerdict.DONE`` is reserved for the caller (the ledger already shows
the wave complete); ``decide_resume`` never returns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from npa_infra.runs.models import (
    Category,
    LaunchState,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    TransactionRecord,
)

__all__ = [
    "CRASHED_VERIFIED_ABSENT",
    "FOUND_IN_PROGRESS",
    "FOUND_TERMINAL_FAILURE",
    "NEVER_LAUNCHED",
    "TERMINAL_STATUSES",
    "ResumeDecision",
    "ResumeVerdict",
    "decide_resume",
    "is_terminal_status",
]


class ResumeVerdict(StrEnum):
    ADOPT = "adopt"
    ATTACH = "attach"
    KEEP_FAILED = "keep_failed"
    RELAUNCH = "relaunch"
    BLOCK = "block"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class ResumeDecision:
    """The verdict, its journal reason and one sentence for the operator."""

    verdict: ResumeVerdict
    reason: RecoveryDecision | str
    message: str


# Reasons that are not launch-transaction decisions.
FOUND_TERMINAL_FAILURE = "found_terminal_failure"
FOUND_IN_PROGRESS = "found_in_progress"
NEVER_LAUNCHED = "never_launched"
CRASHED_VERIFIED_ABSENT = "crashed_verified_absent"

TERMINAL_STATUSES = frozenset({"SUCCEEDED", "CANCELLED"})  # plus every FAILED* status
_RELAUNCH_DECISIONS = frozenset(
    {
        RecoveryDecision.RECOVERY_DEADLINE_EXHAUSTED,
        RecoveryDecision.INTERRUPTED_VERIFIED_ABSENT,
        RecoveryDecision.BLOCK_INDETERMINATE,
    }
)


def is_terminal_status(status: str | None) -> bool:
    """SUCCEEDED, CANCELLED or any FAILED* status; CANCELLING is not terminal."""
    normalized = (status or "").upper()
    return normalized in TERMINAL_STATUSES or normalized.startswith("FAILED")


def decide_resume(
    record: TransactionRecord | None,
    lookup: Reconciliation,
    *,
    authoritative_absence: bool,
    retry_absent_in_flight: bool = False,
    outputs_absent: bool | None = None,
) -> ResumeDecision:
    """Decide what ``--resume-run`` does with one in-flight attempt (see the module docstring).

    ``lookup`` is the exact lookup by the attempt's name (and recorded id);
    ``authoritative_absence`` says the caller proved no launch request is
    live; ``outputs_absent`` is None when the outputs could not be proven
    either way.
    """
    if lookup.state is ReconciliationState.FOUND and len(lookup.job_ids) == 1:
        return _found(lookup)
    if lookup.state is not ReconciliationState.ABSENT:  # §3 Resume 2: unavailable, no submit
        return _block(RecoveryDecision.BLOCK_INDETERMINATE, f"the job queue is {lookup.state}")
    if not authoritative_absence:  # §1: absence counts only after the request settled
        return _block(
            RecoveryDecision.BLOCK_INDETERMINATE, "the name is absent, but a request may be live"
        )
    return _absent(record, retry_absent_in_flight, outputs_absent)


def _found(lookup: Reconciliation) -> ResumeDecision:
    status = (lookup.status or "").upper()
    job = f"job {lookup.job_id} ({status or 'status unknown'})"
    if status == "SUCCEEDED":  # §3 Resume 2: adopt, outputs required
        return ResumeDecision(ResumeVerdict.ADOPT, RecoveryDecision.ADOPT_EXISTING, f"adopt {job}")
    if is_terminal_status(status):  # §3 Resume 2: found-failed → keep
        return ResumeDecision(ResumeVerdict.KEEP_FAILED, FOUND_TERMINAL_FAILURE, f"keep {job}")
    return ResumeDecision(ResumeVerdict.ATTACH, FOUND_IN_PROGRESS, f"attach to {job} and poll")


def _absent(
    record: TransactionRecord | None, retry_absent_in_flight: bool, outputs_absent: bool | None
) -> ResumeDecision:
    if record is None or record.launch_sequence == 0:  # §3 Resume 3: nothing was ever sent
        return _relaunch(NEVER_LAUNCHED, "no launch request was ever sent")
    if _automatic_relaunch(record):  # §3 Resume 3: transient or interrupted, verified absent
        return _relaunch(
            RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
            f"{_latest(record)} failure, name verified absent",
        )
    if record.state is LaunchState.LAUNCHING:  # the process crashed mid-transaction
        return _relaunch(CRASHED_VERIFIED_ABSENT, "crashed mid-launch, name verified absent")
    if retry_absent_in_flight:  # §3 Resume 3: explicit operator flag
        return _operator_relaunch(outputs_absent)
    return _block(
        RecoveryDecision.RESUME_BLOCK_TERMINAL_OR_LEGACY_ABSENCE,
        f"absent after a {record.recovery_decision or 'recorded'} outcome; "
        "rerun with --retry-absent-in-flight once the outputs are proven absent",
    )


def _automatic_relaunch(record: TransactionRecord) -> bool:
    if record.recovery_decision is RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS:
        return _retryable(record.last_category)  # only a failure of the latest launch counts
    return record.recovery_decision in _RELAUNCH_DECISIONS and _retryable(_latest(record))


def _retryable(category: Category) -> bool:
    return category.transient or category is Category.INTERRUPTED


def _operator_relaunch(outputs_absent: bool | None) -> ResumeDecision:
    if outputs_absent is True:
        return _relaunch(
            RecoveryDecision.OPERATOR_AUTHORIZED_RELAUNCH, "operator-authorized, outputs absent"
        )
    if outputs_absent is False:
        return _block(RecoveryDecision.RESUME_BLOCK_OUTPUT_PRESENT, "declared outputs exist")
    return _block(
        RecoveryDecision.RESUME_BLOCK_OUTPUT_INDETERMINATE, "declared outputs are not proven absent"
    )


def _latest(record: TransactionRecord) -> Category:
    return record.category if record.last_category is Category.NONE else record.last_category


def _relaunch(reason: RecoveryDecision | str, why: str) -> ResumeDecision:
    return ResumeDecision(ResumeVerdict.RELAUNCH, reason, f"relaunch: {why}")


def _block(reason: RecoveryDecision | str, why: str) -> ResumeDecision:
    return ResumeDecision(ResumeVerdict.BLOCK, reason, f"blocked ({reason}): {why}")
