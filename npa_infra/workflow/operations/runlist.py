"""``workflow list``: the runs this npa home's journal holds, finished ones included.

Journal only: no SkyPilot, Kubernetes or S3 call is made, so a run's status
is the journal's (``status RUN`` verifies one against SkyPilot). Each run of
the ``runs`` table and each ``--plan-only`` run id of the ``plans`` table
becomes one row (``runs.listing``): its waves, the exact job ids its attempts
adopted, and its age on ``Services.clock``. ``-s/--stack`` and ``-p/--project``
keep only that selection's runs (``Selection.admits``, as ``status`` does).
Without ``all_runs`` every active run is listed, with the newest runs up to
``limit`` in all; the rest are counted in ``omitted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from npa_infra import config as npa_config
from npa_infra.projects.models import RunIdentity
from npa_infra.runs import listing

if TYPE_CHECKING:
    from pathlib import Path

    from npa_infra.journal.store import Journal
    from npa_infra.projects.models import Selection
    from npa_infra.workflow.target.services import Services

__all__ = ["RunList", "list_runs"]


class RunList(BaseModel):
    """``workflow list --json``: one object (README, the JSON table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok"] = "ok"
    runs: tuple[listing.ListRow, ...] = ()
    omitted: int = 0  # runs left out without --all
    source: Literal["journal"] = "journal"  # never SkyPilot: statuses are the journal's

    @property
    def exit_code(self) -> int:
        return 0


def list_runs(
    *,
    env: Mapping[str, str],
    all_runs: bool = False,
    limit: int = listing.DEFAULT_LIMIT,
    services: Services | None = None,
    scope: Selection | None = None,
) -> RunList:
    """The journal's runs (of ``scope`` when given), newest first.

    Raises:
        ConfigError: the journal exists but cannot be read.
    """
    from npa_infra.journal.store import Journal, present
    from npa_infra.workflow.target.services import Services

    home = npa_config.npa_home(env)
    if not present(home):
        return RunList()  # reading never creates the journal
    now = (services or Services()).clock.now()
    journal = Journal.open(home)
    try:
        entries = _entries(journal, scope, home)
    finally:
        journal.close()
    found = listing.rows(entries, now=now, all_runs=all_runs, limit=limit)
    return RunList(runs=found.rows, omitted=found.omitted)


def _entries(journal: Journal, scope: Selection | None, home: Path) -> list[listing.RunEntry]:
    from npa_infra.workflow.operations.runstatus import facts_of

    def admitted(stack: str | None, data: Mapping[str, object] | None) -> bool:
        return scope is None or scope.admits(RunIdentity.of(stack, data))

    entries: list[listing.RunEntry] = []
    for run in journal.runs():
        if not admitted(run.stack, run.data):
            continue
        attempts = journal.attempts(run.run_id)
        ids = [a.job_id for a in attempts if a.job_id is not None]
        ids += [t.job_id for t in journal.transactions(run.run_id) if t.job_id is not None]
        entries.append(
            listing.RunEntry(
                run_id=run.run_id,
                stack=run.stack,
                workflow=run.workflow,
                mode=run.mode,
                status=run.status,
                created_at=run.created_at,
                updated_at=run.updated_at,
                waves=len(journal.waves(run.run_id)),
                job_ids=tuple(ids),
                holder=facts_of(home, run).holder,
            )
        )
    for plan in journal.plans():
        if not admitted(plan.stack, plan.data):
            continue
        waves = (plan.data or {}).get("waves")
        entries.append(
            listing.RunEntry(
                run_id=plan.run_id,
                stack=plan.stack,
                workflow=plan.workflow,
                mode=plan.mode,
                status=plan.status,
                created_at=plan.created_at,
                updated_at=plan.updated_at,
                waves=waves if isinstance(waves, int) else 0,
                plan_only=True,
            )
        )
    return entries
