"""The run outcome over every planned job: success only when each was launched exactly
once and ended validated; a skipped job or unknown evidence never succeeds."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given

from npa_infra.runs import outcome
from npa_infra.runs.lifecycle import RunStatus, lifecycle_state
from npa_infra.runs.models import LaunchState
from npa_infra.runs.outcome import Attempt, AttemptResult, JobEvidence, Reason, Stop, decide
from npa_infra.runs.transaction import begin
from tests.strategies import run_outcome_evidence

R = AttemptResult
PLAN = ["b1", "b2", "b3", "join"]


def job(name: str, *results: AttemptResult) -> JobEvidence:
    return JobEvidence(name, tuple(Attempt(r, i + 1) for i, r in enumerate(results)))


def ok(*names: str) -> list[JobEvidence]:
    return [job(n, R.SUCCEEDED) for n in names]


@pytest.mark.parametrize(
    ("taken", "stop", "status", "reason", "named"),
    [
        (ok(*PLAN), Stop.COMPLETED, RunStatus.SUCCEEDED, Reason.ALL_SUCCEEDED, None),
        (
            [job("b1", R.FAILED, R.SUCCEEDED), *ok("b2", "b3", "join")],
            Stop.COMPLETED,
            RunStatus.SUCCEEDED,
            Reason.ALL_SUCCEEDED,
            None,
        ),
        # issue 15 item 8: b2 and b3 skipped, the join launched
        (
            ok("b1", "join"),
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.OUT_OF_ORDER,
            "join",
        ),
        (
            ok("b1", "b2", "b3"),
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.NEVER_LAUNCHED,
            "join",
        ),
        ([], Stop.COMPLETED, RunStatus.RECOVERY_REQUIRED, Reason.NEVER_LAUNCHED, "b1"),
        (
            ok("b1", "b1", "b2"),
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.REPEATED_LAUNCH,
            "b1",
        ),
        (
            [job("b1", R.SUCCEEDED, R.SUCCEEDED)],
            Stop.FAILED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.REPEATED_LAUNCH,
            "b1",
        ),
        (
            [job("b1", R.UNKNOWN, R.SUCCEEDED)],
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.REPEATED_LAUNCH,
            "b1",
        ),
        (ok("b1", "x"), Stop.COMPLETED, RunStatus.RECOVERY_REQUIRED, Reason.UNPLANNED_LAUNCH, "x"),
        (ok("b2"), Stop.FAILED, RunStatus.RECOVERY_REQUIRED, Reason.OUT_OF_ORDER, "b2"),
        (
            [job("b1", R.FAILED), *ok("b2")],
            Stop.FAILED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.OUT_OF_ORDER,
            "b2",
        ),
        (
            [*ok("b1"), job("b2", R.UNKNOWN)],
            Stop.FAILED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.UNKNOWN_EVIDENCE,
            "b2",
        ),
        (
            [*ok("b1"), job("b2", R.UNKNOWN)],
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.UNKNOWN_EVIDENCE,
            "b2",
        ),
        (ok("b1"), Stop.UNCERTAIN, RunStatus.RECOVERY_REQUIRED, Reason.STOPPED_UNCERTAIN, None),
        (ok("b1"), Stop.CANCELLED, RunStatus.CANCELLED, Reason.CANCELLED, None),
        (
            [*ok("b1"), job("b2", R.FAILED)],
            Stop.FAILED,
            RunStatus.FAILED,
            Reason.STOPPED_FAILED,
            None,
        ),
        (
            [job("b1", R.NOT_SENT)],
            Stop.FAILED,
            RunStatus.ROLLED_BACK,
            Reason.NOTHING_LAUNCHED,
            None,
        ),
        ([job("b1", R.FAILED)], Stop.FAILED, RunStatus.FAILED, Reason.STOPPED_FAILED, None),
        ([], Stop.FAILED, RunStatus.FAILED, Reason.STOPPED_FAILED, None),
        (
            [*ok("b1", "b2", "b3"), job("join", R.FAILED)],
            Stop.COMPLETED,
            RunStatus.FAILED,
            Reason.JOB_FAILED,
            "join",
        ),
        (
            [*ok("b1", "b2", "b3"), job("join", R.SUBMITTED)],
            Stop.COMPLETED,
            RunStatus.RECOVERY_REQUIRED,
            Reason.NOT_FINISHED,
            "join",
        ),
    ],
    ids=[
        "all-succeeded",
        "retried-then-succeeded",
        "batches-skipped",
        "join-never-launched",
        "nothing-taken",
        "taken-twice",
        "two-successes",
        "unknown-attempt-replaced",
        "unplanned-job",
        "first-batch-skipped",
        "taken-after-a-failure",
        "unknown-then-failed",
        "unknown-at-the-end",
        "interrupted",
        "cancelled",
        "proven-failure",
        "nothing-sent",
        "verified-absent-launch",
        "failed-before-any-launch",
        "join-failed",
        "join-not-watched",
    ],
)
def test_decide_supervised_evidence_gives_its_status(
    taken: list[JobEvidence], stop: Stop, status: RunStatus, reason: Reason, named: str | None
) -> None:
    got = decide(PLAN, taken, stop, supervised=True)
    assert (got.status, got.reason, got.job) == (status, reason, named)


def test_decide_skipped_batch_message_names_the_job() -> None:
    got = decide(PLAN, ok("b1", "b2", "b3"), Stop.COMPLETED, supervised=True)
    assert got.describe() == "planned job join was never launched"


@pytest.mark.parametrize(
    ("taken", "status"),
    [
        ([job("run", R.SUBMITTED)], RunStatus.SUBMITTED),
        ([], RunStatus.RECOVERY_REQUIRED),
        ([job("run", R.UNKNOWN)], RunStatus.RECOVERY_REQUIRED),
    ],
    ids=["submitted", "never-launched", "unknown"],
)
def test_decide_one_shot_ends_at_submission(taken: list[JobEvidence], status: RunStatus) -> None:
    assert decide(["run"], taken, Stop.COMPLETED, supervised=False).status is status


def test_decide_empty_plan_is_never_a_success() -> None:
    got = decide([], [], Stop.COMPLETED, supervised=True)
    assert (got.status, got.reason) == (RunStatus.RECOVERY_REQUIRED, Reason.NOTHING_PLANNED)


@pytest.mark.parametrize(
    ("state", "sequence", "result"),
    [
        (LaunchState.SUBMITTED, 1, None),
        (LaunchState.ADOPTED, 1, None),
        (LaunchState.INTERRUPTED, 0, R.UNKNOWN),
        (LaunchState.TERMINAL_FAILURE, 0, R.NOT_SENT),
        (LaunchState.TRANSIENT_API_FAILURE, 0, R.NOT_SENT),
        (LaunchState.TERMINAL_FAILURE, 1, R.UNKNOWN),  # sent, then read absent: not proof
        (LaunchState.INDETERMINATE, 1, R.UNKNOWN),
        (LaunchState.TRANSIENT_API_FAILURE, 2, R.UNKNOWN),
    ],
    ids=lambda v: str(v),
)
def test_launch_result_transaction_end_maps_to_attempt(
    state: LaunchState, sequence: int, result: AttemptResult | None
) -> None:
    record = begin(logical_launch_id="npa-launch-x", job_name="j", context="c", now=0.0)
    record = dataclasses.replace(record, state=state, launch_sequence=sequence)
    assert outcome.launch_result(record) is result


@pytest.mark.parametrize(
    ("status", "lifecycle"),
    [
        (RunStatus.SUCCEEDED, "committed"),
        (RunStatus.SUBMITTED, "committed"),
        (RunStatus.FAILED, "committed"),
        (RunStatus.CANCELLED, "committed"),
        (RunStatus.RECOVERY_REQUIRED, "recovery-required"),
        (RunStatus.ROLLED_BACK, "rolled-back"),
    ],
    ids=lambda v: str(v),
)
def test_lifecycle_state_finished_status_maps_to_journal_lifecycle(
    status: RunStatus, lifecycle: str
) -> None:
    assert lifecycle_state(status) == lifecycle


def test_run_status_values_are_the_journal_strings() -> None:
    assert RunStatus.RECOVERY_REQUIRED == "RECOVERY_REQUIRED"
    assert {s.value for s in RunStatus} == {s.name for s in RunStatus}


@given(run_outcome_evidence())
@example((["a"], [job("a", R.SUCCEEDED)], Stop.COMPLETED, True))
@example((["a", "b"], [job("a", R.SUCCEEDED)], Stop.COMPLETED, True))
@example((["a", "b"], [job("a", R.SUCCEEDED), job("b", R.UNKNOWN)], Stop.FAILED, True))
def test_decide_any_evidence_never_succeeds_without_every_job_once(
    case: tuple[list[str], list[JobEvidence], Stop, bool],
) -> None:
    planned, taken, stop, supervised = case
    got = decide(planned, taken, stop, supervised=supervised)
    names = [j.name for j in taken]
    if got.status in (RunStatus.SUCCEEDED, RunStatus.SUBMITTED):
        # every planned job taken exactly once, in order, one attempt ended as required,
        # and every attempt it replaced proven ended
        assert names == planned
        ended = {R.SUCCEEDED} if supervised else {R.SUCCEEDED, R.SUBMITTED}
        for evidence in taken:
            assert evidence.attempts and evidence.attempts[-1].result in ended
            assert all(a.result in (R.FAILED, R.NOT_SENT) for a in evidence.attempts[:-1])
        assert got.status is (RunStatus.SUCCEEDED if supervised else RunStatus.SUBMITTED)
    if any(name not in names for name in planned):
        assert got.status not in (RunStatus.SUCCEEDED, RunStatus.SUBMITTED)
    if any(a.result is R.UNKNOWN for j in taken for a in j.attempts) or stop is Stop.UNCERTAIN:
        assert got.status not in (RunStatus.SUCCEEDED, RunStatus.SUBMITTED, RunStatus.FAILED)
        assert got.status not in (RunStatus.ROLLED_BACK,)
