"""The supervisor's ledger of the planned jobs it took, and the run outcome from it.

The supervisor records here, for every rendered job of the run's route, the
launch records of the attempts it made and how the last one ended; the
route itself is re-recorded after every re-plan (a routed run's plan grows by
prefixes, dsl.md §5.4). ``conclude`` hands that evidence to the pure
``runs.outcome.decide`` and returns the run's status with the error to
report: a run that left a planned job unlaunched, or whose evidence is not
proven, never ends SUCCEEDED (issue 15, faults.md invariant 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from npa_infra.errors import (
    LaunchFailedError,
    NpaError,
    RunCancelledError,
    UncertainOutcomeError,
)
from npa_infra.runs import outcome
from npa_infra.runs.lifecycle import RunStatus

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.render.documents import RenderedJob
    from npa_infra.runs.models import TransactionRecord

__all__ = ["Ledger", "conclude", "prefix_moved", "slot_conflict", "stop_of"]

_INTERRUPTED_EXIT = 130  # cli.md §1.4


@dataclass(slots=True)
class Ledger:
    """What the supervisor did with each planned job, in the order it did it."""

    supervised: bool  # runtime: each job is watched to its end
    planned: list[str] = field(default_factory=list)
    taken: list[outcome.JobEvidence] = field(default_factory=list)

    def plan(self, jobs: Sequence[RenderedJob]) -> None:
        """The route's jobs as rendered now (the latest re-plan), in order."""
        self.planned = [job.job_name for job in jobs]

    def take(
        self, job: RenderedJob, records: Sequence[TransactionRecord], error: NpaError | None
    ) -> None:
        """The attempts made of ``job`` (their launch records, oldest first) and how the
        last one ended (``error``: None when it ended as the mode requires)."""
        if not records:
            return
        # an attempt is replaced only once it is proven ended: a terminal payload
        # failure or a verified cancel (runtime-reference.md §3)
        attempts = [outcome.Attempt(outcome.AttemptResult.FAILED, r.job_id) for r in records[:-1]]
        last = records[-1]
        attempts.append(outcome.Attempt(self._last_result(last, error), last.job_id))
        self.taken.append(outcome.JobEvidence(job.job_name, tuple(attempts)))

    def _last_result(
        self, record: TransactionRecord, error: NpaError | None
    ) -> outcome.AttemptResult:
        launched = outcome.launch_result(record)
        if launched is not None:
            return launched
        stop = stop_of(error)
        if stop is outcome.Stop.UNCERTAIN:
            return outcome.AttemptResult.UNKNOWN
        if stop is outcome.Stop.FAILED:
            return outcome.AttemptResult.FAILED
        if self.supervised:  # watched to SUCCEEDED, its outputs validated
            return outcome.AttemptResult.SUCCEEDED
        return outcome.AttemptResult.SUBMITTED


def stop_of(error: NpaError | None, *, cancelled: bool = False) -> outcome.Stop:
    """How the supervisor's walk ended: an operator's cancel (``cancelled``: one was
    requested), else an unproven outcome or an interrupt is uncertain."""
    if error is None:
        return outcome.Stop.COMPLETED
    if cancelled or isinstance(error, RunCancelledError):
        return outcome.Stop.CANCELLED
    if isinstance(error, UncertainOutcomeError) or error.exit_code == _INTERRUPTED_EXIT:
        return outcome.Stop.UNCERTAIN
    return outcome.Stop.FAILED


def conclude(
    ledger: Ledger,
    error: NpaError | None,
    *,
    command: str,
    run_id: str,
    cancelled: bool = False,
) -> tuple[outcome.RunOutcome, NpaError | None]:
    """The run's outcome, and the error to report with it (the supervisor's own when it
    says what happened; otherwise the outcome's reason, with the command that continues).

    ``cancelled``: the operator asked to cancel the run, so the error that stopped
    the walk is the cancel's doing.
    """
    stop = stop_of(error, cancelled=cancelled)
    decided = outcome.decide(ledger.planned, ledger.taken, stop, supervised=ledger.supervised)
    reason = decided.describe()
    if decided.status is RunStatus.RECOVERY_REQUIRED and stop is not outcome.Stop.UNCERTAIN:
        message = f"{error.message}; and {reason}" if error is not None else reason
        return decided, UncertainOutcomeError(
            f"the run's outcome is not proven: {message}", remedy=f"rerun: {command}"
        )
    if decided.status is RunStatus.FAILED and error is None:
        return decided, LaunchFailedError(
            reason, remedy=f"inspect: npa workbench workflow status {run_id}"
        )
    return decided, error


def slot_conflict(
    journal: Journal, run_id: str, index: int, job: RenderedJob, command: str
) -> NpaError | None:
    """An error when the journal's job ``index`` of this run is another job than the plan's.

    The journal keys a runtime run's jobs by their position in the route; a run
    journaled under another numbering (before JobGroup batches had their own
    positions) must not have one job's launch adopted as another's.
    """
    found = journal.wave(run_id, index)
    if found is None or found.name == job.job_name:
        return None
    return UncertainOutcomeError(
        f"the journal's job {index:02d} of run {run_id} is {found.name}, but the plan's is "
        f"{job.job_name}: npa will not adopt one job's launch as another's",
        remedy=f"inspect it with `npa workbench workflow status {run_id}`; resuming cannot "
        f"continue it ({command} stops here again), so submit the spec under a new --run-id",
    )


def prefix_moved(
    done: Mapping[int, str], jobs: Sequence[RenderedJob], command: str
) -> NpaError | None:
    """An error when a re-plan no longer starts with the jobs already run (by position).

    A routed run's plan grows by prefixes (dsl.md §5.4); a route whose prefix
    changed would have the next positions name other jobs than the ones run.
    """
    for index, name in sorted(done.items()):
        now = jobs[index].job_name if index < len(jobs) else None
        if now != name:
            return UncertainOutcomeError(
                f"the re-planned route no longer starts with the jobs already run: job "
                f"{index:02d} was {name}, now {now or 'nothing'}",
                remedy=f"inspect the spec and the decisions read, then rerun: {command}",
            )
    return None
