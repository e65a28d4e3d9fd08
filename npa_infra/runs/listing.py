"""``workflow list``: the journal's runs as rows, newest first, from the journal alone.

A row is built from what the journal holds (``RunEntry``): a run of the
``runs`` table, or a ``submit --plan-only`` run id of the ``plans`` table,
shown with mode ``plan-only``. A row's status is ``runs.runview``'s, the one
``status`` and ``submit`` report (``PLANNED`` for a plan). ``rows`` decides, as one
ordered chain per entry:

1. a plan whose run id is also a run: **hidden** (a live submit of that id
   came later, and the run is what exists now);
2. ``--all``: **shown**;
3. an active run (a journal status that is not settled, ``runs.lifecycle``):
   **shown**, however old: it may still hold jobs;
4. one of the newest ``limit`` entries: **shown**;
5. otherwise **omitted** (counted, so the output can say how many ``--all`` adds).

Rows are ordered by ``created_at`` then ``run_id``, newest first; a row's age
is ``now - created_at`` (never negative: clocks may step back). Nothing here
reads the clock or SkyPilot: ``now`` is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from npa_infra.runs import lifecycle, runview

__all__ = ["DEFAULT_LIMIT", "ListMode", "ListRow", "Listing", "RunEntry", "rows"]

DEFAULT_LIMIT = 50


class ListMode(StrEnum):
    ONE_SHOT = "one-shot"
    RUNTIME = "runtime"
    RAW = "raw"
    PLAN_ONLY = "plan-only"


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One journaled run (or plan-only run id): what a row is built from."""

    run_id: str
    stack: str | None
    workflow: str
    mode: str  # the journal's execution mode: one-shot, runtime or raw
    status: str
    created_at: float
    updated_at: float
    waves: int = 0
    job_ids: tuple[int, ...] = ()
    plan_only: bool = False
    holder: runview.Holder = runview.Holder.UNKNOWN  # the run's process, for LAUNCHING (runview)


class ListRow(BaseModel):
    """One row of ``workflow list --json`` (README, the JSON table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    stack: str | None
    workflow: str
    mode: ListMode
    status: str
    waves: int
    job_ids: tuple[int, ...]
    created_at: float
    updated_at: float
    age_seconds: float


@dataclass(frozen=True, slots=True)
class Listing:
    rows: tuple[ListRow, ...]
    omitted: int  # entries not shown without --all


def _active(entry: RunEntry) -> bool:
    return not entry.plan_only and entry.status not in lifecycle.SETTLED


def _row(entry: RunEntry, now: float) -> ListRow:
    mode = ListMode.PLAN_ONLY if entry.plan_only else ListMode(entry.mode)
    return ListRow(
        run_id=entry.run_id,
        stack=entry.stack or None,
        workflow=entry.workflow,
        mode=mode,
        status=runview.run_status(runview.RunFacts(entry.status, entry.plan_only, entry.holder)),
        waves=entry.waves,
        job_ids=tuple(sorted(set(entry.job_ids))),
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        age_seconds=round(max(now - entry.created_at, 0.0), 1),
    )


def rows(
    entries: Sequence[RunEntry], *, now: float, all_runs: bool = False, limit: int = DEFAULT_LIMIT
) -> Listing:
    """The rows to show, newest first, and how many were left out (the module docstring)."""
    runs = {e.run_id for e in entries if not e.plan_only}
    # rule 1: a run hides the plan of the same id
    visible = [e for e in entries if not (e.plan_only and e.run_id in runs)]
    visible.sort(key=lambda e: (e.created_at, e.run_id), reverse=True)
    shown: list[RunEntry] = []
    for index, entry in enumerate(visible):
        # rule 2: --all; rule 3: an active run; rule 4: among the newest `limit`
        if all_runs or _active(entry) or index < max(limit, 0):
            shown.append(entry)
    # rule 5: the rest is counted, never silently dropped
    return Listing(tuple(_row(e, now) for e in shown), len(visible) - len(shown))
