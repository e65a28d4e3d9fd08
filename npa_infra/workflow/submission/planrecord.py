"""``submit --plan-only`` records its run id in the journal, as a plan (issue 17).

A plan-only run launches nothing, stages nothing and creates no probe pod; it
now leaves one row in the journal's ``plans`` table (journal/schema.py v3), so
``workflow list`` shows it as ``plan-only``, ``status RUN`` reports it as
``PLAN_ONLY`` and ``cancel RUN`` is a repeat-safe ``not_submitted`` no-op. The
row holds names and paths only: the rendered jobs, the target (infra,
context, namespace, stack), never a secret value (the journal's guard checks
every write). A plan of a run id that is already a run records nothing: a
preview never shadows what exists. The cli.md §1.4 line "plan-only writes
nothing" predates this; the issue wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from npa_infra import config as npa_config
from npa_infra.runs.lifecycle import RunStatus

if TYPE_CHECKING:
    from npa_infra.journal.records import RunMode
    from npa_infra.render.documents import RenderedJob
    from npa_infra.workflow.target.services import Services

__all__ = ["record"]

_MODES: dict[str, RunMode] = {"one-shot": "one-shot", "runtime": "runtime", "raw": "raw"}


class PlannedReport(Protocol):
    """What a plan-only submit's report holds that its journal row needs (``SubmitReport``)."""

    @property
    def run_id(self) -> str: ...
    @property
    def workflow(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def jobs(self) -> Sequence[RenderedJob]: ...
    @property
    def yaml_paths(self) -> Sequence[str]: ...
    @property
    def infrastructure(self) -> Mapping[str, Any]: ...


Report = TypeVar("Report", bound=PlannedReport)


def record(
    report: Report,
    spec_path: Path,
    *,
    env: Mapping[str, str],
    services: Services | None,
    project: str | None = None,
) -> Report:
    """Journal ``report``'s run id as a plan and return the report unchanged; ``project``
    is the ``--project`` alias it was planned under (what ``-p`` selects it by).

    Raises:
        ConfigError: the journal under the npa home cannot be opened.
    """
    from npa_infra.journal.records import PlanRow
    from npa_infra.journal.store import Journal
    from npa_infra.workflow.target.services import Services

    now = (services or Services()).clock.now()
    infrastructure = report.infrastructure
    jobs = [
        {"job_name": job.job_name, "wave": job.wave, "path": path}
        for job, path in zip(report.jobs, report.yaml_paths, strict=True)
    ]
    row = PlanRow(
        run_id=report.run_id,
        stack=infrastructure.get("stack") or None,
        workflow=report.workflow,
        mode=_MODES.get(report.mode, "one-shot"),
        spec_path=str(spec_path),
        fingerprint=report.fingerprint,
        status=RunStatus.PLANNED,
        created_at=now,
        updated_at=now,
        data={
            "jobs": jobs,
            "waves": len({job.wave for job in report.jobs}),
            "infra": infrastructure.get("infra"),
            "context": infrastructure.get("context"),
            "namespace": infrastructure.get("namespace"),
            "project": project,
        },
    )
    journal = Journal.open(npa_config.npa_home(env))
    try:
        journal.record_plan(row)
    finally:
        journal.close()
    return report
