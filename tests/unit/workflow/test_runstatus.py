"""``runstatus``: budget totals (stored, or left + used for old journals) and ``refreshes``.

A real journal in a temporary npa home, read ``cached`` (no SkyPilot, no
cluster); ``refreshes`` sleeps on an injected clock whose ``sleep`` also moves
the journaled run along, so the watch loop ends without any real wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from npa_infra.journal.records import AttemptRow, RunRow, WaveRow
from npa_infra.journal.store import Journal
from npa_infra.workflow.operations import runstatus
from npa_infra.workflow.target.services import Clock, Services

RUN = "rs-1"


def _journal(home: Path, budgets: dict[str, Any], status: str = "RUNNING") -> Journal:
    journal = Journal.open(home)
    journal.create_run(
        RunRow(
            run_id=RUN,
            stack=None,
            workflow="minimal",
            mode="one-shot",
            spec_path="spec.yaml",
            fingerprint="f" * 16,
            resume_argv=["npa", "workbench", "workflow", "submit", "--resume-run", RUN],
            status=status,
            lifecycle_state="SUBMITTED",
            created_at=1.0,
            updated_at=1.0,
        )
    )
    journal.upsert_wave(
        WaveRow(
            run_id=RUN,
            wave_index=0,
            key="000",
            name="report",
            kind="serial",
            states=["report"],
            status="RUNNING",
            updated_at=1.0,
            budgets=budgets,
        )
    )
    journal.create_attempt(
        AttemptRow(
            run_id=RUN,
            wave_index=0,
            attempt=1,
            job_name=f"{RUN}-00",
            logical_launch_id="lid-1",
            created_at=1.0,
            status="SUBMITTED",
            updated_at=1.0,
            job_id=7,
        )
    )
    return journal


def _spend(journal: Journal, kind: str, times: int) -> None:
    for _ in range(times):
        journal.append_event(RUN, kind, {"wave": 0}, now=2.0)


@pytest.mark.parametrize(
    ("stored", "expected_totals"),
    [
        ({"retries_left": 1, "infrastructure_recoveries_left": 0}, (3, 1)),
        (
            {
                "retries_left": 1,
                "infrastructure_recoveries_left": 0,
                "retries_total": 4,
                "infrastructure_recoveries_total": 1,
            },
            (4, 1),
        ),
    ],
    ids=["old_journal_left_plus_used", "stored_totals_win"],
)
def test_budget_totals_stored_or_left_plus_used_reported_beside_used_and_left(
    tmp_path: Path, stored: dict[str, Any], expected_totals: tuple[int, int]
) -> None:
    journal = _journal(tmp_path, stored)
    _spend(journal, "payload_retry", 2)
    _spend(journal, "infrastructure_recovery", 1)
    journal.append_event(RUN, "payload_retry", {"wave": 3}, now=2.0)  # another wave's spend
    journal.close()
    report = runstatus.run_status(RUN, env={"NPA_HOME": str(tmp_path)}, cached=True)
    assert report.budgets == {
        "00": {
            "retries_left": 1,
            "retries_used": 2,
            "retries_total": expected_totals[0],
            "infrastructure_recoveries_left": 0,
            "infrastructure_recoveries_used": 1,
            "infrastructure_recoveries_total": expected_totals[1],
        }
    }


@dataclass
class _FinishingClock:
    """Virtual sleep that records each wait and ends the run after ``finish_after`` of them."""

    home: Path
    finish_after: int
    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if len(self.slept) == self.finish_after:
            journal = Journal.open(self.home)
            journal.update_run(RUN, status="SUCCEEDED", now=3.0)
            journal.close()

    def services(self) -> Services:
        return Services(clock=Clock(lambda: 0.0, self.sleep, lambda: 0.5))


def test_refreshes_in_progress_until_terminal_sleeps_interval_on_the_injected_clock(
    tmp_path: Path,
) -> None:
    _journal(tmp_path, {"retries_left": 0, "infrastructure_recoveries_left": 1}).close()
    clock = _FinishingClock(tmp_path, finish_after=2)
    reports = list(
        runstatus.refreshes(
            RUN,
            env={"NPA_HOME": str(tmp_path)},
            cached=True,
            interval=4.0,
            services=clock.services(),
        )
    )
    assert [r.status for r in reports] == ["RUNNING", "RUNNING", "SUCCEEDED"]
    assert clock.slept == [4.0, 4.0]
    assert [r.in_progress for r in reports] == [True, True, False]


def test_refreshes_all_with_nothing_in_progress_reads_once_and_never_sleeps(
    tmp_path: Path,
) -> None:
    clock = _FinishingClock(tmp_path, finish_after=99)
    reports = list(
        runstatus.refreshes(None, env={"NPA_HOME": str(tmp_path)}, services=clock.services())
    )
    assert [r.to_json() for r in reports] == [
        {"status": "ok", "runs": [], "queue_state": "not_read"}
    ]
    assert clock.slept == []
