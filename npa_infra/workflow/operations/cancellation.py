"""``workflow cancel RUN_ID``: cancel every non-terminal job of a run, by exact id only.

A run the journal proves was never launched (every transaction at launch
sequence 0), or a run id it holds only as a ``--plan-only`` plan, is a
repeat-safe no-op with no cloud calls. Otherwise the ids
come from the journal; an attempt whose launch may have been sent but whose
id was never reconciled is first looked up by its exact name, so a job a
crashed launch created is not left behind. Each non-terminal job is
cancelled by id (never by name, never ``-a``), then the queue is polled until
every one is terminal or absent: the acknowledgement is not proof
(skypilot-0.12.md §4.2). Intent and outcome are journaled. Outcomes and exit
codes: cli.md §1.6.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.projects.models import RunIdentity
from npa_infra.runs import cancel as cancel_rules
from npa_infra.runs import codec
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import ReconciliationState, TransactionRecord
from npa_infra.skypilot.models import QueueResult, QueueVerdict

if TYPE_CHECKING:
    from npa_infra.journal.lock import RunLock
    from npa_infra.journal.store import Journal
    from npa_infra.projects.models import Selection
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.workflow.target.services import Clock, Services

__all__ = ["CANCEL_EXIT_CODES", "CancelReport", "cancel_run"]

CANCEL_EXIT_CODES = {
    "not_submitted": 0,
    "already_absent": 0,
    "cancelled": 0,
    "unknown_run": 1,
    "partial_cancellation": 2,
    "verification_failed": 2,
    "launch_in_progress": 2,
}
# A launch transaction settles within its 180 s recovery deadline plus one launch call.
LAUNCH_WAIT = 600.0
_POLL_INTERVAL = 5.0
_POLL_DEADLINE = 900.0


@dataclass(slots=True)
class CancelReport:
    run_id: str
    outcome: str
    cancelled_job_ids: list[int] = field(default_factory=list)
    already_terminal_job_ids: list[int] = field(default_factory=list)
    absent_job_ids: list[int] = field(default_factory=list)
    remaining_job_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return CANCEL_EXIT_CODES[self.outcome]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.outcome,  # issue 17: every --json object has a status
            "run_id": self.run_id,
            "outcome": self.outcome,
            "cancelled_job_ids": self.cancelled_job_ids,
            "already_terminal_job_ids": self.already_terminal_job_ids,
            "absent_job_ids": self.absent_job_ids,
            "remaining_job_ids": self.remaining_job_ids,
            "errors": self.errors,
            "cluster_down": {"attempted": False, "result": None},
            "receipt_path": None,
        }


def cancel_run(
    run_id: str,
    *,
    env: Mapping[str, str],
    services: Services | None = None,
    scope: Selection | None = None,
) -> CancelReport:
    """Cancel the run's jobs; never raises for an expected outcome.

    ``scope`` (the command's ``--stack``/``--project``): a run that is not of it is
    ``unknown_run`` there, and nothing is touched.
    """
    from npa_infra.journal.store import Journal

    home = npa_config.npa_home(env)
    if not (home / "journal.sqlite3").exists():
        return CancelReport(run_id, "unknown_run", errors=["the journal has never seen this run"])
    journal = Journal.open(home)
    try:
        run = journal.get_run(run_id)
        if run is None:
            return _plan_or_unknown(journal, run_id, scope)
        context = str((run.data or {}).get("context") or "")
        if scope is not None and not scope.admits(RunIdentity.of(run.stack, run.data)):
            theirs = f"its stack: {run.stack or 'none'}"
            return CancelReport(
                run_id, "unknown_run", errors=[f"the run is not of {scope.describe()} ({theirs})"]
            )
        from npa_infra.workflow.execution import adapters

        recorded = adapters.recorded_state_dir(run.data)

        def opened_adapters() -> tuple[SkyPilot, Clock, Path]:
            sky, _, clock, isolated = adapters.open_adapters(
                env,
                services,
                context=context,
                stack_name=run.stack or None,
                isolated_config_dir=recorded,
            )
            return sky, clock, isolated.root

        opened = None if recorded or (services and services.isolated_dir) else opened_adapters()
        state_dir = (
            opened[2]
            if opened
            else Path(recorded or str(services.isolated_dir if services else ""))
        )
        clock = opened[1] if opened else (services or _real()).clock
        progress = (services or _real()).progress
        lock = _launch_lock(state_dir, run_id, run.stack or None, clock, progress)
        if isinstance(lock, CancelReport):
            return _record(journal, clock, lock)
        try:
            # durable before any cancel: no launch of this run starts after this point
            journal.update_run(
                run_id,
                data={"cancel_requested": {"at": clock.now(), "pid": os.getpid()}},
                now=clock.now(),
            )
            transactions = journal.transactions(run_id)  # read under the lock: settled
            if all(t.launch_sequence == 0 and t.job_id is None for t in transactions):
                return _never_launched(journal, run_id, clock)
            sky, clock, _ = opened or opened_adapters()
            return _cancel(journal, sky, clock, run_id)
        finally:
            lock.release()
    finally:
        journal.close()


def _plan_or_unknown(journal: Journal, run_id: str, scope: Selection | None) -> CancelReport:
    """A ``--plan-only`` run id launched nothing: ``not_submitted``, a repeat-safe no-op with
    no SkyPilot call and no journal write (cli.md §1.6); any other id is unknown."""
    plan = journal.get_plan(run_id)
    if plan is None:
        return CancelReport(run_id, "unknown_run", errors=["the journal has never seen this run"])
    if scope is not None and not scope.admits(RunIdentity.of(plan.stack, plan.data)):
        theirs = f"its stack: {plan.stack or 'none'}"
        return CancelReport(
            run_id, "unknown_run", errors=[f"the run is not of {scope.describe()} ({theirs})"]
        )
    return CancelReport(run_id, "not_submitted")


def _real() -> Services:
    from npa_infra.workflow.target.services import Services

    return Services()


def _launch_lock(
    state_dir: Path,
    run_id: str,
    stack: str | None,
    clock: Clock,
    progress: Callable[[str], None] | None,
) -> RunLock | CancelReport:
    """The run's launch lock, waited for while a launch of the run is in flight.

    A submit holds it only while a launch may be in flight, so cancel waits for
    that launch to settle (its job id reconciled) before it cancels by exact id.
    """
    from npa_infra.errors import RunLockedError
    from npa_infra.journal.lock import RunLock

    def waiting(holder: Mapping[str, object]) -> None:
        if progress is not None:
            progress(
                f"run {run_id}: a launch is in flight (pid {holder.get('pid')}); waiting up to "
                f"{LAUNCH_WAIT:.0f} s for it to settle before cancelling"
            )

    lock = RunLock.in_state(
        state_dir, "launches", run_id, stack=stack, argv=["npa", "cancel", run_id], now=clock.now()
    )
    try:
        lock.acquire(wait=LAUNCH_WAIT, on_wait=waiting)
    except RunLockedError as exc:
        return CancelReport(
            run_id,
            "launch_in_progress",
            errors=[
                f"a launch of run {run_id} is still in flight ({exc.message}); nothing was "
                "cancelled, and a job of the run may still appear: rerun the cancel when it "
                "has settled"
            ],
        )
    return lock


def _never_launched(journal: Journal, run_id: str, clock: Clock) -> CancelReport:
    journal.append_event(run_id, "cancel", {"outcome": "not_submitted"}, now=clock.now())
    return CancelReport(run_id, "not_submitted")


def _judge(
    sky: SkyPilot, record: TransactionRecord, name: ReconciliationState
) -> cancel_rules.LaunchVerdict:
    """Observe what could still act for an unreconciled launch, then let the core judge."""
    from npa_infra.runs.children import ChildState
    from npa_infra.skypilot import children
    from npa_infra.workflow.execution.launcher import check_request

    child = ChildState.NOT_RECORDED
    if record.launch_child is not None:
        child = children.observe(record.launch_child)
    request = None
    if name is ReconciliationState.ABSENT:
        latest = record.request_ids[-1] if record.accepted and record.request_ids else None
        request = check_request(sky, latest).state
    return cancel_rules.judge_unreconciled(record, name, child, request)


def _known_ids(
    journal: Journal, sky: SkyPilot, clock: Clock, run_id: str
) -> tuple[set[int], list[str], list[str]]:
    """Ids from the journal, plus exact-name lookups for launches never reconciled, and the
    names of launches that may still create a job."""
    from npa_infra.workflow.execution.launcher import reconcile

    ids: set[int] = set()
    errors: list[str] = []
    in_flight: list[str] = []
    for tx in journal.transactions(run_id):
        if tx.job_id is not None:
            ids.add(tx.job_id)
            continue
        if tx.launch_sequence == 0:
            continue
        name = str(tx.record.get("job_name") or "")
        found = reconcile(sky, name, clock.now())
        verdict = _judge(sky, codec.record_from_json(tx.record), found.state)
        if verdict is cancel_rules.LaunchVerdict.CANCEL_FOUND and found.job_id is not None:
            ids.add(found.job_id)
        elif verdict is cancel_rules.LaunchVerdict.IN_FLIGHT:
            in_flight.append(name)
        elif verdict is cancel_rules.LaunchVerdict.UNKNOWN:
            errors.append(f"{name}: {found.state.value} {found.error}".strip())
    for attempt in journal.attempts(run_id):
        if attempt.job_id is not None:
            ids.add(attempt.job_id)
    return ids, errors, in_flight


def _cancel(journal: Journal, sky: SkyPilot, clock: Clock, run_id: str) -> CancelReport:
    report = CancelReport(run_id, "cancelled")
    ids, report.errors, in_flight = _known_ids(journal, sky, clock, run_id)
    queue = sky.queue()
    if queue.verdict is QueueVerdict.UNAVAILABLE or report.errors:
        report.outcome = "verification_failed"
        if queue.detail:
            report.errors.append(queue.detail)
        report.remaining_job_ids = sorted(ids)
        return _record(journal, clock, report)
    active = _classify(queue, ids, report)
    if not active:
        report.outcome = "already_absent"
        return _record(journal, clock, _unsettled(report, in_flight))
    journal.append_event(run_id, "cancel_requested", {"job_ids": sorted(active)}, now=clock.now())
    answer = sky.cancel(sorted(active))
    if answer.error_kind.value != "none":
        report.errors.append(answer.detail)
    remaining = _poll(sky, clock, set(active), report)
    report.remaining_job_ids = sorted(remaining)
    if remaining:
        report.outcome = "partial_cancellation"
    return _record(journal, clock, _unsettled(report, in_flight))


def _unsettled(report: CancelReport, in_flight: list[str]) -> CancelReport:
    """Never report success while a launch of the run may still create a job."""
    if in_flight and report.outcome in ("cancelled", "already_absent"):
        report.outcome = "launch_in_progress"
        report.errors.extend(
            f"{name}: a launch child or request of an interrupted submit may still create this "
            "job; resume the run (its --resume-run command) to settle it, then cancel again"
            for name in in_flight
        )
    return report


def _classify(queue: QueueResult, ids: set[int], report: CancelReport) -> set[int]:
    active: set[int] = set()
    for job_id in sorted(ids):
        status = queue.status_of(job_id)
        if status is None:
            report.absent_job_ids.append(job_id)
        elif status.terminal:
            report.already_terminal_job_ids.append(job_id)
        else:
            active.add(job_id)
    return active


def _poll(sky: SkyPilot, clock: Clock, waiting: set[int], report: CancelReport) -> set[int]:
    """Poll until every cancelled id is terminal or absent, within the deadline."""
    started = clock.now()
    while waiting:
        queue = sky.queue()
        if queue.verdict is not QueueVerdict.UNAVAILABLE:
            for job_id in sorted(waiting):
                status = queue.status_of(job_id)
                if status is None or status.terminal:
                    waiting.discard(job_id)
                    report.cancelled_job_ids.append(job_id)
        if not waiting or clock.now() - started >= _POLL_DEADLINE:
            break
        clock.sleep(_POLL_INTERVAL)
    return waiting


def _record(journal: Journal, clock: Clock, report: CancelReport) -> CancelReport:
    journal.append_event(report.run_id, "cancel", report.to_json(), now=clock.now())
    if report.outcome == "cancelled" and report.cancelled_job_ids:
        journal.update_run(report.run_id, status=RunStatus.CANCELLED, now=clock.now())
    return report
