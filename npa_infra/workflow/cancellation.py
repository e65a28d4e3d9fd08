"""``workflow cancel RUN_ID``: cancel every non-terminal job of a run, by exact id only.

A run the journal proves was never launched (every transaction at launch
sequence 0) is a repeat-safe no-op with no cloud calls. Otherwise the ids
come from the journal; an attempt whose launch may have been sent but whose
id was never reconciled is first looked up by its exact name, so a job a
crashed launch created is not left behind. Each non-terminal job is
cancelled by id (never by name, never ``-a``), then the queue is polled until
every one is terminal or absent: the acknowledgement is not proof
(skypilot-0.12.md §4.2). Intent and outcome are journaled. Outcomes and exit
codes: cli.md §1.6.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import ReconciliationState
from npa_infra.skypilot.models import QueueResult, QueueVerdict

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.workflow.launcher import Clock
    from npa_infra.workflow.live import LiveServices

__all__ = ["CANCEL_EXIT_CODES", "CancelReport", "cancel_run"]

CANCEL_EXIT_CODES = {
    "not_submitted": 0,
    "already_absent": 0,
    "cancelled": 0,
    "unknown_run": 1,
    "partial_cancellation": 2,
    "verification_failed": 2,
}
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
    run_id: str, *, env: Mapping[str, str], services: LiveServices | None = None
) -> CancelReport:
    """Cancel the run's jobs; never raises for an expected outcome."""
    from npa_infra.journal.store import Journal

    home = npa_config.npa_home(env)
    if not (home / "journal.sqlite3").exists():
        return CancelReport(run_id, "unknown_run", errors=["the journal has never seen this run"])
    journal = Journal.open(home)
    try:
        run = journal.get_run(run_id)
        if run is None:
            return CancelReport(
                run_id, "unknown_run", errors=["the journal has never seen this run"]
            )
        transactions = journal.transactions(run_id)
        if all(t.launch_sequence == 0 and t.job_id is None for t in transactions):
            return _never_launched(journal, run_id)
        from npa_infra.workflow import live

        context = str((run.data or {}).get("context") or "")
        sky, _, clock, _ = live.open_adapters(
            env,
            services,
            context=context,
            stack_name=run.stack or None,
            isolated_config_dir=live.recorded_state_dir(run.data),
        )
        return _cancel(journal, sky, clock, run_id)
    finally:
        journal.close()


def _never_launched(journal: Journal, run_id: str) -> CancelReport:
    import time

    journal.append_event(run_id, "cancel", {"outcome": "not_submitted"}, now=time.time())
    return CancelReport(run_id, "not_submitted")


def _known_ids(
    journal: Journal, sky: SkyPilot, clock: Clock, run_id: str
) -> tuple[set[int], list[str]]:
    """Ids from the journal, plus exact-name lookups for launches never reconciled."""
    from npa_infra.workflow.launcher import reconcile

    ids: set[int] = set()
    errors: list[str] = []
    for tx in journal.transactions(run_id):
        if tx.job_id is not None:
            ids.add(tx.job_id)
            continue
        if tx.launch_sequence == 0:
            continue
        name = str(tx.record.get("job_name") or "")
        found = reconcile(sky, name, clock.now())
        if found.state is ReconciliationState.FOUND and found.job_id is not None:
            ids.add(found.job_id)
        elif found.state is not ReconciliationState.ABSENT:
            errors.append(f"{name}: {found.state.value} {found.error}".strip())
    for attempt in journal.attempts(run_id):
        if attempt.job_id is not None:
            ids.add(attempt.job_id)
    return ids, errors


def _cancel(journal: Journal, sky: SkyPilot, clock: Clock, run_id: str) -> CancelReport:
    report = CancelReport(run_id, "cancelled")
    ids, report.errors = _known_ids(journal, sky, clock, run_id)
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
        return _record(journal, clock, report)
    journal.append_event(run_id, "cancel_requested", {"job_ids": sorted(active)}, now=clock.now())
    answer = sky.cancel(sorted(active))
    if answer.error_kind.value != "none":
        report.errors.append(answer.detail)
    remaining = _poll(sky, clock, set(active), report)
    report.remaining_job_ids = sorted(remaining)
    if remaining:
        report.outcome = "partial_cancellation"
    return _record(journal, clock, report)


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
