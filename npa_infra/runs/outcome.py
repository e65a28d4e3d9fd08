"""How a run ended, accounted over every job its plan rendered (issue 15, faults.md §3).

The supervisor walks a run's planned jobs (one-shot: one pipeline; runtime:
one job per wave batch, the route a run's decisions took) and records, per
job it took, what it knows of each attempt. ``decide`` turns that evidence,
and how the walk stopped, into the run's one ``RunStatus``. The rules, in
order (the first that applies decides):

1. evidence for a job that is not planned, a job taken twice, or an attempt
   replaced while it could still be live: recovery required (faults.md
   invariants 1 and 2);
2. a job taken while a job planned ahead of it had not succeeded (or never
   ran): recovery required (dsl.md §5.4: batches and waves run in order);
3. a walk stopped by the operator's cancel: cancelled (the cancel is the
   operator's, never a failure of the run);
4. any attempt whose outcome is unknown, or a walk that stopped uncertain or
   interrupted: recovery required (invariant 4: unknown is neither success
   nor failure);
5. a walk stopped by a proven failure: rolled back when the only launch
   tried sent no request, otherwise failed;
6. a walk that says it completed: a planned job never launched is recovery
   required ("planned job X was never launched"), a proven failed job fails
   the run, a supervised job not watched to its end is recovery required;
7. otherwise every planned job was launched exactly once: SUCCEEDED when the
   jobs were supervised to validated ends, SUBMITTED when not (one-shot).

Pure: the driver observes, this decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import LaunchState, TransactionRecord

__all__ = [
    "Attempt",
    "AttemptResult",
    "JobEvidence",
    "Reason",
    "RunOutcome",
    "Stop",
    "decide",
    "launch_result",
]


class AttemptResult(StrEnum):
    """What is proven about one attempt of a planned job."""

    SUCCEEDED = "succeeded"  # ended SUCCEEDED and its declared outputs validated
    FAILED = "failed"  # proven ended without success; no job of it is live
    SUBMITTED = "submitted"  # launched, id reconciled, not watched to an end (one-shot)
    NOT_SENT = "not_sent"  # its launch sent no request: no job exists
    UNKNOWN = "unknown"  # a job may exist, or how it ended is not proven


@dataclass(frozen=True, slots=True)
class Attempt:
    result: AttemptResult
    job_id: int | None = None


@dataclass(frozen=True, slots=True)
class JobEvidence:
    """One planned job the driver took, by its rendered name; attempts oldest first."""

    name: str
    attempts: tuple[Attempt, ...]


class Stop(StrEnum):
    """How the driver's walk over the planned jobs ended."""

    COMPLETED = "completed"  # it reached the end of the route without an error
    FAILED = "failed"  # it stopped on a proven failure
    UNCERTAIN = "uncertain"  # it stopped on an unproven outcome, or was interrupted
    CANCELLED = "cancelled"  # the operator's cancel stopped it


class Reason(StrEnum):
    NOTHING_PLANNED = "nothing_planned"
    UNPLANNED_LAUNCH = "unplanned_launch"
    REPEATED_LAUNCH = "repeated_launch"
    OUT_OF_ORDER = "out_of_order"
    UNKNOWN_EVIDENCE = "unknown_evidence"
    CANCELLED = "cancelled"
    STOPPED_UNCERTAIN = "stopped_uncertain"
    NOTHING_LAUNCHED = "nothing_launched"
    STOPPED_FAILED = "stopped_failed"
    NEVER_LAUNCHED = "never_launched"
    JOB_FAILED = "job_failed"
    NOT_FINISHED = "not_finished"
    ALL_SUBMITTED = "all_submitted"
    ALL_SUCCEEDED = "all_succeeded"


_MESSAGES = {
    Reason.NOTHING_PLANNED: "the run's plan has no job",
    Reason.UNPLANNED_LAUNCH: "job {job} was launched but is not in the run's plan",
    Reason.REPEATED_LAUNCH: "planned job {job} was launched more than once",
    Reason.OUT_OF_ORDER: (
        "planned job {job} was launched before every job planned ahead of it had succeeded"
    ),
    Reason.UNKNOWN_EVIDENCE: "the outcome of planned job {job} is not proven",
    Reason.NEVER_LAUNCHED: "planned job {job} was never launched",
    Reason.JOB_FAILED: "planned job {job} failed",
    Reason.NOT_FINISHED: "planned job {job} was not supervised to its end",
}


@dataclass(frozen=True, slots=True)
class RunOutcome:
    status: RunStatus
    reason: Reason
    job: str | None = None  # the planned job the reason names

    def describe(self) -> str:
        """The reason in one sentence; empty when the driver's own error says it."""
        template = _MESSAGES.get(self.reason)
        return template.format(job=self.job) if template else ""


_REPLACEABLE = (AttemptResult.FAILED, AttemptResult.NOT_SENT)


def decide(
    planned: Sequence[str],
    taken: Sequence[JobEvidence],
    stop: Stop,
    *,
    supervised: bool,
) -> RunOutcome:
    """The run's status from its planned job names (in order), the evidence of the jobs
    the driver took (in the order it took them), and how the walk stopped.

    ``supervised``: the driver watches each job to its end (runtime mode); a
    one-shot run ends at its submission.
    """
    recovery = RunStatus.RECOVERY_REQUIRED
    if not planned:  # a route always renders a job; an empty one is nothing to account for
        return RunOutcome(recovery, Reason.NOTHING_PLANNED)
    names = [job.name for job in taken]
    # rule 1: faults.md invariant 2, every launch is of a planned job
    unplanned = next((name for name in names if name not in planned), None)
    if unplanned is not None:
        return RunOutcome(recovery, Reason.UNPLANNED_LAUNCH, unplanned)
    # rule 1: invariant 1, each planned job taken once, and an attempt replaced only
    # once it is proven ended (runtime-reference.md §3: a retry is a new attempt)
    repeated = next((job.name for job in taken if _repeated(job, names)), None)
    if repeated is not None:
        return RunOutcome(recovery, Reason.REPEATED_LAUNCH, repeated)
    # rule 2: dsl.md §5.4, waves and the batches of a group run in order
    early = _out_of_order(planned, taken, supervised)
    if early is not None:
        return RunOutcome(recovery, Reason.OUT_OF_ORDER, early)
    # rule 3: cli.md §1.6, the operator's cancel ends the run as cancelled
    if stop is Stop.CANCELLED:
        return RunOutcome(RunStatus.CANCELLED, Reason.CANCELLED)
    # rule 4: invariant 4, unknown is not an outcome
    unknown = next((j.name for j in taken if _any(j, AttemptResult.UNKNOWN)), None)
    if unknown is not None:
        return RunOutcome(recovery, Reason.UNKNOWN_EVIDENCE, unknown)
    if stop is Stop.UNCERTAIN:
        return RunOutcome(recovery, Reason.STOPPED_UNCERTAIN)
    # rule 5: a proven failure; nothing sent at all leaves nothing to clean up
    if stop is Stop.FAILED:
        attempts = [a for job in taken for a in job.attempts]
        if attempts and all(a.result is AttemptResult.NOT_SENT for a in attempts):
            return RunOutcome(RunStatus.ROLLED_BACK, Reason.NOTHING_LAUNCHED)
        return RunOutcome(RunStatus.FAILED, Reason.STOPPED_FAILED)
    # rule 6: the walk completed; the evidence must cover the whole route
    last = {job.name: job.attempts[-1].result for job in taken if job.attempts}
    for name in planned:
        result = last.get(name, AttemptResult.NOT_SENT)
        if result is AttemptResult.NOT_SENT:
            return RunOutcome(recovery, Reason.NEVER_LAUNCHED, name)
        if result is AttemptResult.FAILED:
            return RunOutcome(RunStatus.FAILED, Reason.JOB_FAILED, name)
        if supervised and result is not AttemptResult.SUCCEEDED:
            return RunOutcome(recovery, Reason.NOT_FINISHED, name)
    # rule 7: every planned job launched exactly once, and ended as its mode requires
    if supervised:
        return RunOutcome(RunStatus.SUCCEEDED, Reason.ALL_SUCCEEDED)
    return RunOutcome(RunStatus.SUBMITTED, Reason.ALL_SUBMITTED)


def launch_result(record: TransactionRecord) -> AttemptResult | None:
    """What a finished launch transaction proves about its attempt; None when it
    launched (submitted or adopted: the job's end is for supervision to prove).
    Only a launch that sent no request proves its attempt (``NOT_SENT``)."""
    if record.state in (LaunchState.SUBMITTED, LaunchState.ADOPTED):
        return None
    if record.state is LaunchState.INTERRUPTED:
        return AttemptResult.UNKNOWN
    if record.launch_sequence == 0:  # no launch request was ever sent
        return AttemptResult.NOT_SENT
    # A request was sent. Even a terminal failure whose name read absent once the request
    # settled is not proof that no job exists (one read proves nothing, and the operator
    # guide: any failure after a launch may have been issued remains recovery-required).
    return AttemptResult.UNKNOWN


def _any(job: JobEvidence, result: AttemptResult) -> bool:
    return any(a.result is result for a in job.attempts)


def _repeated(job: JobEvidence, names: Sequence[str]) -> bool:
    if names.count(job.name) > 1:
        return True
    return any(a.result not in _REPLACEABLE for a in job.attempts[:-1])


def _out_of_order(
    planned: Sequence[str], taken: Sequence[JobEvidence], supervised: bool
) -> str | None:
    """The first job taken out of the planned order, or taken while the job before it had
    not ended as the mode requires (its result is what lets the next one start)."""
    done = (
        (AttemptResult.SUCCEEDED,)
        if supervised
        else (AttemptResult.SUCCEEDED, AttemptResult.SUBMITTED)
    )
    for position, job in enumerate(taken):
        if planned[position] != job.name:
            return job.name
        if position > 0:
            before = taken[position - 1].attempts
            if not before or before[-1].result not in done:
                return job.name
    return None
