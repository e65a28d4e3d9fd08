"""The supervisor's ledger and the outcome it concludes: a skipped planned job, unknown
evidence or a changed route never lets a run succeed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from npa_infra.errors import (
    InterruptedRunError,
    LaunchFailedError,
    RunCancelledError,
    UncertainOutcomeError,
)
from npa_infra.journal.records import RunRow, WaveRow
from npa_infra.journal.store import Journal
from npa_infra.render.documents import RenderedJob
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import LaunchState, TransactionRecord
from npa_infra.runs.outcome import AttemptResult, Reason
from npa_infra.runs.transaction import begin
from npa_infra.workflow.supervision import accounting

COMMAND = "npa workbench workflow submit spec.yaml --resume-run r1"


def rendered(name: str, wave: int = 0) -> RenderedJob:
    return RenderedJob(name, wave, "parallel", ({"name": name, "execution": "parallel"},), (), "")


def record(state: LaunchState = LaunchState.SUBMITTED, sequence: int = 1) -> TransactionRecord:
    fresh = begin(logical_launch_id="npa-launch-x", job_name="j", context="c", now=0.0)
    return dataclasses.replace(fresh, state=state, launch_sequence=sequence, job_id=sequence)


JOBS = [rendered("r1-00-fan-b1"), rendered("r1-00-fan-b2"), rendered("r1-01-join", 1)]


def ledger(*taken: RenderedJob) -> accounting.Ledger:
    book = accounting.Ledger(supervised=True)
    book.plan(JOBS)
    for job in taken:
        book.take(job, [record()], None)
    return book


def test_ledger_take_retried_attempts_are_failed_then_the_last_succeeded() -> None:
    book = accounting.Ledger(supervised=True)
    book.take(JOBS[0], [record(), record(sequence=2)], None)
    (evidence,) = book.taken
    assert [a.result for a in evidence.attempts] == [AttemptResult.FAILED, AttemptResult.SUCCEEDED]


@pytest.mark.parametrize(
    ("error", "result"),
    [
        (None, AttemptResult.SUCCEEDED),
        (LaunchFailedError("ended FAILED", remedy="r"), AttemptResult.FAILED),
        (UncertainOutcomeError("unreadable", remedy="r"), AttemptResult.UNKNOWN),
        (InterruptedRunError("interrupted", remedy="r"), AttemptResult.UNKNOWN),
    ],
    ids=["succeeded", "failed", "uncertain", "interrupted"],
)
def test_ledger_take_watched_attempt_ends_as_the_error_says(
    error: LaunchFailedError | None, result: AttemptResult
) -> None:
    book = accounting.Ledger(supervised=True)
    book.take(JOBS[0], [record()], error)
    assert book.taken[0].attempts[-1].result is result


def test_ledger_take_without_a_launch_records_nothing() -> None:
    book = accounting.Ledger(supervised=True)
    book.take(JOBS[0], [], UncertainOutcomeError("journal mismatch", remedy="r"))
    assert book.taken == []


def test_conclude_every_planned_job_succeeded_keeps_no_error() -> None:
    decided, error = accounting.conclude(ledger(*JOBS), None, command=COMMAND, run_id="r1")
    assert (decided.status, error) == (RunStatus.SUCCEEDED, None)


def test_conclude_skipped_batch_requires_recovery_naming_it() -> None:
    decided, error = accounting.conclude(
        ledger(JOBS[0], JOBS[1]), None, command=COMMAND, run_id="r1"
    )
    assert decided.status is RunStatus.RECOVERY_REQUIRED
    assert isinstance(error, UncertainOutcomeError)
    assert "planned job r1-01-join was never launched" in error.message
    assert error.remedy == f"rerun: {COMMAND}"


def test_conclude_join_after_a_skipped_batch_is_out_of_order_even_on_failure() -> None:
    failed = LaunchFailedError("wave 01 ended FAILED", remedy="inspect")
    book = ledger(JOBS[0])
    book.take(JOBS[2], [record()], failed)
    decided, error = accounting.conclude(book, failed, command=COMMAND, run_id="r1")
    assert (decided.status, decided.reason) == (RunStatus.RECOVERY_REQUIRED, Reason.OUT_OF_ORDER)
    assert isinstance(error, UncertainOutcomeError) and error.exit_code == 2
    assert error.message.startswith("the run's outcome is not proven: wave 01 ended FAILED; and")


def test_conclude_proven_failure_keeps_the_supervisor_error() -> None:
    failed = LaunchFailedError("wave 01 ended FAILED", remedy="inspect")
    book = ledger(JOBS[0])
    book.take(JOBS[1], [record()], failed)
    decided, error = accounting.conclude(book, failed, command=COMMAND, run_id="r1")
    assert (decided.status, error) == (RunStatus.FAILED, failed)


def test_conclude_first_launch_sent_nothing_rolls_back() -> None:
    failed = LaunchFailedError("nothing was launched", remedy="fix")
    book = accounting.Ledger(supervised=True)
    book.plan(JOBS)
    book.take(JOBS[0], [record(LaunchState.TERMINAL_FAILURE, 0)], failed)
    decided, _ = accounting.conclude(book, failed, command=COMMAND, run_id="r1")
    assert decided.status is RunStatus.ROLLED_BACK


@pytest.mark.parametrize(
    ("error", "cancelled"),
    [
        (RunCancelledError("run r1 was cancelled", remedy="status"), False),
        (LaunchFailedError("ended CANCELLED", remedy="inspect"), True),
    ],
    ids=["cancel-stopped-the-launch", "cancel-requested"],
)
def test_conclude_operator_cancel_is_cancelled(error: LaunchFailedError, cancelled: bool) -> None:
    decided, kept = accounting.conclude(
        ledger(JOBS[0]), error, command=COMMAND, run_id="r1", cancelled=cancelled
    )
    assert (decided.status, kept) == (RunStatus.CANCELLED, error)


def test_prefix_moved_replan_renaming_a_done_job_is_refused() -> None:
    moved = accounting.prefix_moved({0: "r1-00-fan-b1", 1: "r1-00-other"}, JOBS, COMMAND)
    assert isinstance(moved, UncertainOutcomeError)
    assert "job 01 was r1-00-other, now r1-00-fan-b2" in moved.message
    assert accounting.prefix_moved({0: "r1-00-fan-b1"}, JOBS, COMMAND) is None
    assert accounting.prefix_moved({3: "r1-02-x"}, JOBS, COMMAND) is not None


def test_slot_conflict_journal_slot_of_another_job_is_refused(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "home") as journal:
        journal.create_run(
            RunRow(
                run_id="r1",
                stack=None,
                workflow="wf",
                mode="runtime",
                spec_path="s.yaml",
                fingerprint="fp",
                resume_argv=["npa"],
                status=RunStatus.LAUNCHING,
                lifecycle_state="mutating",
                created_at=1.0,
                updated_at=1.0,
            )
        )
        journal.upsert_wave(  # journaled before batches had slots of their own
            WaveRow(
                run_id="r1",
                wave_index=1,
                key="001|serial|r1-01-join",
                name="r1-01-join",
                kind="serial",
                states=["join"],
                status="succeeded",
                updated_at=1.0,
            )
        )
        refused = accounting.slot_conflict(journal, "r1", 1, JOBS[1], COMMAND)
        assert isinstance(refused, UncertainOutcomeError)
        assert "is r1-01-join, but the plan's is r1-00-fan-b2" in refused.message
        assert accounting.slot_conflict(journal, "r1", 1, rendered("r1-01-join"), COMMAND) is None
        assert accounting.slot_conflict(journal, "r1", 0, JOBS[0], COMMAND) is None
