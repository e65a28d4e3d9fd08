"""``workflow status RUN_ID``: the journal's view of a run, verified against SkyPilot.

The journal says what was launched (waves, attempts, provider job ids, the
transaction history). Unless ``cached``, one ``sky jobs queue --all -v`` read
verifies each job by exact id *and* name; for a PENDING/STARTING job the pods
carrying SkyPilot's cluster label for that exact job id are inspected and
the pending reason reported (kubernetes.md §6). Exit codes: cli.md §1.5.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.skypilot.models import JobStatus, QueueResult, QueueVerdict
from npa_infra.workflow import watch

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.workflow.live import LiveServices

__all__ = ["STATUS_EXIT_CODES", "StatusReport", "run_status"]

STATUS_EXIT_CODES: dict[str, int] = {
    "NOT_FOUND": 1,
    "ABSENT": 1,  # a launched job the controller no longer knows: not in progress
    "CANCELLED": 1,
    "BLOCKED": 1,
    "VERIFICATION_UNAVAILABLE": 2,
    "PARTIAL": 3,
    "DEGRADED": 3,
    "NOT_SUBMITTED": 4,
    "PLAN_ONLY": 4,
}


def exit_code_for(status: str) -> int:
    if status.startswith("FAILED"):
        return 1
    return STATUS_EXIT_CODES.get(status, 0)


@dataclass(slots=True)
class StatusReport:
    run_id: str
    workflow: str | None
    status: str
    lifecycle_state: str | None
    mode: str | None
    waves: list[dict[str, Any]] = field(default_factory=list)
    transactions: list[dict[str, Any]] = field(default_factory=list)
    queue_state: str = "not_read"
    updated_at: float | None = None
    remedy: str = ""
    detail: str = ""
    budgets: dict[str, dict[str, Any]] | None = None

    @property
    def sky_job_ids(self) -> list[int]:
        return [w["job_id"] for w in self.waves if w.get("job_id") is not None]

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.status)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "lifecycle_state": self.lifecycle_state,
            "mode": self.mode,
            "sky_job_ids": self.sky_job_ids,
            "waves": self.waves,
            "transactions": self.transactions,
            "queue_state": self.queue_state,
            "budgets": self.budgets,
            "updated_at": self.updated_at,
            "remedy": self.remedy,
            "detail": self.detail,
        }


def _journal_status(run_status: str) -> str | None:
    """A run whose journal status already decides the answer, without SkyPilot."""
    return {
        "ROLLED_BACK": "NOT_SUBMITTED",
        "PLANNED": "NOT_SUBMITTED",
        "RECOVERY_REQUIRED": "BLOCKED",
    }.get(run_status)


def run_status(
    run_id: str,
    *,
    env: Mapping[str, str],
    cached: bool = False,
    services: LiveServices | None = None,
) -> StatusReport:
    """The run's status; ``NOT_FOUND`` when the journal has never seen it."""
    from npa_infra.journal.store import Journal

    home = npa_config.npa_home(env)
    if not (home / "journal.sqlite3").exists():
        return StatusReport(run_id, None, "NOT_FOUND", None, None, detail="no journal yet")
    journal = Journal.open(home)
    try:
        return _status(journal, run_id, env, cached, services)
    finally:
        journal.close()


def _status(
    journal: Journal,
    run_id: str,
    env: Mapping[str, str],
    cached: bool,
    services: LiveServices | None,
) -> StatusReport:
    run = journal.get_run(run_id)
    if run is None:
        return StatusReport(run_id, None, "NOT_FOUND", None, None, detail="unknown run id")
    report = StatusReport(
        run_id,
        run.workflow,
        run.status,
        run.lifecycle_state,
        run.mode,
        transactions=[t.record for t in journal.transactions(run_id)],
        updated_at=run.updated_at,
        remedy=shlex.join(run.resume_argv) if run.status == "RECOVERY_REQUIRED" else "",
    )
    budgets = {f"{w.wave_index:02d}": dict(w.budgets) for w in journal.waves(run_id) if w.budgets}
    report.budgets = budgets or None
    latest: dict[int, Any] = {}
    for attempt in journal.attempts(run_id):
        latest[attempt.wave_index] = attempt
        report.waves.append(
            {
                "key": f"{attempt.wave_index:03d}",
                "wave": attempt.wave_index,
                "attempt": attempt.attempt,
                "job_id": attempt.job_id,
                "job_name": attempt.job_name,
                "status": attempt.status,
                "sky_status": attempt.sky_status,
                "blockers": [],
                "last_blocker": (attempt.data or {}).get("blocker"),
                "outputs": (attempt.data or {}).get("outputs"),
            }
        )
    decided = _journal_status(run.status)
    if decided is not None or cached or not any(w["job_id"] for w in report.waves):
        report.status = decided or ("NOT_SUBMITTED" if not report.sky_job_ids else run.status)
        report.queue_state = "not_read"
        return report
    context = str((run.data or {}).get("context") or "")
    from npa_infra.workflow import live

    sky, cluster, _, _ = live.open_adapters(
        env, services, context=context, stack_name=run.stack or None
    )
    queue = sky.queue(verbose=True)
    return _verify(report, queue, cluster)


def _verify(report: StatusReport, queue: QueueResult, cluster: KubeCluster) -> StatusReport:
    if queue.verdict is QueueVerdict.UNAVAILABLE:
        report.status, report.queue_state = "VERIFICATION_UNAVAILABLE", "unreadable_or_unverified"
        report.detail = queue.detail
        return report
    report.queue_state = "verified"
    statuses: list[str] = []
    for wave in report.waves:
        job_id = wave["job_id"]
        if job_id is None:
            continue
        rows = [r for r in queue.records if r.job_id == job_id]
        if rows and any(r.job_name != wave["job_name"] for r in rows):
            wave["sky_status"] = "VERIFICATION_UNAVAILABLE"
            wave["blockers"] = [{"code": "ID_BELONGS_TO_OTHER_JOB", "class": "unknown"}]
        elif not rows:
            # verified empty: no controller, so no job; a good queue without the id: the
            # controller lost it (runtime-reference.md §1, job_missing_from_queue)
            empty = queue.verdict is QueueVerdict.VERIFIED_EMPTY
            wave["sky_status"] = "ABSENT" if empty else JobStatus.FAILED_CONTROLLER.value
            if not empty:
                wave["blockers"] = [
                    {
                        "code": "JOB_MISSING_FROM_QUEUE",
                        "class": "unknown",
                        "evidence": "job_missing_from_queue",
                    }
                ]
        else:
            status = queue.status_of(job_id)
            wave["sky_status"] = status.value if status else "ABSENT"
            if status in (JobStatus.PENDING, JobStatus.STARTING):
                found = watch.diagnose_job(cluster, job_id, rows)
                wave["blockers"] = [found] if found is not None else []
        statuses.append(wave["sky_status"])
    report.status = _aggregate(statuses, report.mode)
    return report


def _aggregate(statuses: list[str], mode: str | None) -> str:
    if not statuses:
        return "NOT_SUBMITTED"
    if "VERIFICATION_UNAVAILABLE" in statuses:
        return "VERIFICATION_UNAVAILABLE"
    for status in statuses:
        if status.startswith("FAILED") or status == "CANCELLED":
            return status
    if all(s == "SUCCEEDED" for s in statuses):
        return "SUCCEEDED"
    if "ABSENT" in statuses:
        return "ABSENT" if len(set(statuses)) == 1 else "PARTIAL"
    for status in ("RUNNING", "RECOVERING", "STARTING", "PENDING", "CANCELLING"):
        if status in statuses:
            return status
    return statuses[-1]
