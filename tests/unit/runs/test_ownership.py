"""A job found by name is adopted only when it carries this launch's identity (issue 24).

``runs.ownership.judge`` over every mix of stamps, and the launch transaction's answer
to a ``foreign`` or ``unproven`` lookup at each point it looks up: before anything was
sent (START), after an accepted launch and after an uncertain one.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import ownership, transaction
from npa_infra.runs.models import (
    Evidence,
    Existence,
    LaunchOutcome,
    LaunchState,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    TransactionRecord,
)
from npa_infra.runs.ownership import Ownership

OURS = "npa-launch-ours"
OTHER = "npa-launch-other"
T0 = 1000.0
RESUME = "npa workbench workflow submit wf.yaml --resume-run r1"


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        ((OURS,), Ownership.OURS),
        ((OURS, OURS, OURS), Ownership.OURS),
        ((OTHER,), Ownership.FOREIGN),
        ((OURS, OTHER), Ownership.FOREIGN),
        ((None, OTHER), Ownership.FOREIGN),
        ((None,), Ownership.UNPROVEN),
        ((OURS, None), Ownership.UNPROVEN),
        ((), Ownership.UNPROVEN),
    ],
    ids=[
        "one-ours",
        "every-task-ours",
        "another",
        "ours-and-another",
        "none-and-another",
        "no-stamp",
        "ours-and-none",
        "no-rows",
    ],
)
def test_judge_stamps_cross_ownership(stamps: tuple[str | None, ...], expected: Ownership) -> None:
    verdict = ownership.judge(OURS, stamps)
    assert verdict.ownership is expected
    assert bool(verdict.reason) is (expected is not Ownership.OURS)


@given(st.lists(st.sampled_from([OURS, OTHER, None, "", "npa-launch-x"]), max_size=6))
def test_judge_ours_only_when_every_row_carries_this_launch(stamps: list[str | None]) -> None:
    verdict = ownership.judge(OURS, stamps)
    assert (verdict.ownership is Ownership.OURS) is (bool(stamps) and set(stamps) == {OURS})
    if any(s not in (OURS, None) for s in stamps):
        assert verdict.ownership is Ownership.FOREIGN


def _fresh() -> TransactionRecord:
    return transaction.begin(logical_launch_id=OURS, job_name="rel-col", context="k", now=T0)


def _launched(outcome: LaunchOutcome) -> TransactionRecord:
    ready = transaction.on_readiness(
        transaction.on_reconciled(_fresh(), Reconciliation(ReconciliationState.ABSENT), now=T0),
        Evidence.READY,
        now=T0,
    )
    intent = transaction.on_launch_intent(ready, now=T0)
    return transaction.on_launched(intent, outcome, now=T0 + 1)


NOT_OURS = [
    Reconciliation(ReconciliationState.FOREIGN, job_ids=(1,), error="another launch's"),
    Reconciliation(ReconciliationState.UNPROVEN, job_ids=(1,), error="no identity"),
]
POINTS = {
    "start": (_fresh, RecoveryDecision.BLOCK_INDETERMINATE),
    "accepted": (
        lambda: _launched(LaunchOutcome(True, request_id="req-1")),
        RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS,
    ),
    "uncertain": (
        lambda: _launched(LaunchOutcome(False, error="timed out", timed_out=True)),
        RecoveryDecision.BLOCK_INDETERMINATE,
    ),
}


@pytest.mark.parametrize("obs", NOT_OURS, ids=["foreign", "unproven"])
@pytest.mark.parametrize("point", list(POINTS), ids=list(POINTS))
def test_transaction_job_not_ours_is_never_adopted_and_blocks(
    obs: Reconciliation, point: str
) -> None:
    build, decision = POINTS[point]
    record = build()
    if record.poll_delay > 0:  # an accepted launch settles a tick first
        record = transaction.on_slept(record, now=T0 + 2)

    done = transaction.on_reconciled(record, obs, now=T0 + 3)

    assert done.done
    assert done.job_id is None
    assert (done.state, done.recovery_decision) == (LaunchState.INDETERMINATE, decision)
    assert done.existence is Existence.INDETERMINATE
    assert "job 1 named rel-col is not this launch's" in done.reconciliation_error
    assert obs.error in done.reconciliation_error
    remedy = transaction.remedy_for(done, RESUME)
    assert "another run id" in remedy and "--resume-run" not in remedy


def test_transaction_found_job_of_this_launch_is_adopted_at_start() -> None:
    found = Reconciliation(ReconciliationState.FOUND, job_ids=(4,), status="RUNNING")
    done = transaction.on_reconciled(_fresh(), found, now=T0)
    assert (done.state, done.recovery_decision, done.job_id) == (
        LaunchState.ADOPTED,
        RecoveryDecision.ADOPT_EXISTING,
        4,
    )
