"""``runs.listing``: the rows of ``workflow list``, newest first, active runs never dropped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import lifecycle, listing
from npa_infra.runs.listing import ListMode, RunEntry
from tests.strategies import run_entries

NOW = 1_700_000_100.0


def _entry(
    run_id: str,
    created: float,
    status: str = "SUCCEEDED",
    *,
    waves: int = 0,
    job_ids: tuple[int, ...] = (),
    plan_only: bool = False,
) -> RunEntry:
    return RunEntry(
        run_id, "dev", "wf", "runtime", status, created, created + 1.0, waves, job_ids, plan_only
    )


def test_rows_newest_first_with_modes_statuses_and_age() -> None:
    found = listing.rows(
        [
            _entry("old", NOW - 90.0, waves=2, job_ids=(4, 3, 4)),
            _entry("plan", NOW - 10.0, "PLANNED", plan_only=True),
            _entry("future", NOW + 5.0, "LAUNCHING"),
        ],
        now=NOW,
    )
    assert [r.run_id for r in found.rows] == ["future", "plan", "old"]
    future, plan, old = found.rows
    assert (plan.mode, plan.status, plan.waves) == (ListMode.PLAN_ONLY, "PLANNED", 0)
    assert (old.mode, old.job_ids, old.waves, old.age_seconds) == ("runtime", (3, 4), 2, 90.0)
    assert future.age_seconds == 0.0  # a clock that stepped back never gives a negative age
    assert found.omitted == 0


def test_rows_plan_of_an_id_that_became_a_run_is_hidden() -> None:
    found = listing.rows(
        [
            _entry("r-1", NOW - 5.0, "SUBMITTED"),
            _entry("r-1", NOW - 9.0, "PLANNED", plan_only=True),
        ],
        now=NOW,
    )
    assert [(r.run_id, r.mode) for r in found.rows] == [("r-1", ListMode.RUNTIME)]


def test_rows_limit_keeps_every_active_run_and_counts_the_rest() -> None:
    entries = [_entry(f"done-{i}", NOW - 100.0 + i) for i in range(5)]
    entries.append(_entry("stuck", NOW - 1000.0, "RECOVERY_REQUIRED"))
    found = listing.rows(entries, now=NOW, limit=2)
    assert [r.run_id for r in found.rows] == ["done-4", "done-3", "stuck"]
    assert found.omitted == 3
    everything = listing.rows(entries, now=NOW, limit=2, all_runs=True)
    assert (len(everything.rows), everything.omitted) == (6, 0)


@given(run_entries(), st.integers(0, 6), st.booleans())
def test_rows_property_complete_ordered_and_deterministic(
    entries: list[RunEntry], limit: int, all_runs: bool
) -> None:
    found = listing.rows(entries, now=NOW, all_runs=all_runs, limit=limit)
    assert found == listing.rows(list(reversed(entries)), now=NOW, all_runs=all_runs, limit=limit)
    runs = {e.run_id for e in entries if not e.plan_only}
    ids = [r.run_id for r in found.rows]
    assert len(ids) == len(set(ids))  # one row per run id: a run hides its plan
    visible = {e.run_id for e in entries}
    assert len(found.rows) + found.omitted == len(visible)
    created = [r.created_at for r in found.rows]
    assert created == sorted(created, reverse=True)
    for row in found.rows:
        assert row.age_seconds >= 0.0
        assert (row.mode is ListMode.PLAN_ONLY) == (row.run_id not in runs)
        assert row.mode is not ListMode.PLAN_ONLY or row.status == "PLANNED"
    active = {e.run_id for e in entries if not e.plan_only and e.status not in lifecycle.SETTLED}
    assert active <= set(ids)  # an active run is never left out
    if all_runs:
        assert found.omitted == 0
    else:
        assert len(found.rows) <= max(limit, 0) + len(active)
