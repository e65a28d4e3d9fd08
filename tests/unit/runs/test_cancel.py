"""What cancel concludes about a launch without a reconciled id (runs.cancel)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import transaction
from npa_infra.runs.cancel import LaunchVerdict, judge_unreconciled
from npa_infra.runs.children import ChildState
from npa_infra.runs.models import (
    Existence,
    Phase,
    ReconciliationState,
    RequestState,
    TransactionRecord,
)

RECORD = transaction.begin(logical_launch_id="npa-launch-x", job_name="run-1", context="c", now=1.0)
SETTLED_ABSENT = dataclasses.replace(
    RECORD, phase=Phase.DONE, existence=Existence.ABSENT, request_settled=True, launch_sequence=1
)
CRASHED = dataclasses.replace(RECORD, launch_sequence=1, outcome_pending=True)


@pytest.mark.parametrize(
    ("record", "name", "child", "answer", "verdict"),
    [
        (CRASHED, ReconciliationState.FOUND, ChildState.ALIVE, None, LaunchVerdict.CANCEL_FOUND),
        (CRASHED, ReconciliationState.UNAVAILABLE, ChildState.GONE, None, LaunchVerdict.UNKNOWN),
        (CRASHED, ReconciliationState.AMBIGUOUS, ChildState.GONE, None, LaunchVerdict.UNKNOWN),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.ALIVE,
            RequestState.NONE_ACTIVE,
            LaunchVerdict.IN_FLIGHT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.UNKNOWN,
            RequestState.NONE_ACTIVE,
            LaunchVerdict.IN_FLIGHT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.GONE,
            RequestState.RUNNING,
            LaunchVerdict.IN_FLIGHT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.GONE,
            RequestState.PENDING,
            LaunchVerdict.IN_FLIGHT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.GONE,
            RequestState.UNKNOWN,
            LaunchVerdict.IN_FLIGHT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.GONE,
            RequestState.SUCCEEDED,
            LaunchVerdict.IN_FLIGHT,
        ),
        (CRASHED, ReconciliationState.ABSENT, ChildState.GONE, None, LaunchVerdict.IN_FLIGHT),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.GONE,
            RequestState.FAILED,
            LaunchVerdict.ABSENT,
        ),
        (
            CRASHED,
            ReconciliationState.ABSENT,
            ChildState.NOT_RECORDED,
            RequestState.NONE_ACTIVE,
            LaunchVerdict.ABSENT,
        ),
        (
            SETTLED_ABSENT,
            ReconciliationState.ABSENT,
            ChildState.NOT_RECORDED,
            None,
            LaunchVerdict.ABSENT,
        ),
    ],
    ids=[
        "found",
        "unavailable",
        "ambiguous",
        "child-alive",
        "child-unknown",
        "request-running",
        "request-pending",
        "request-unknown",
        "request-succeeded-not-visible",
        "request-unread",
        "request-failed",
        "nothing-active",
        "settled-by-the-transaction",
    ],
)
def test_judge_unreconciled_launch_gives_verdict(
    record: TransactionRecord,
    name: ReconciliationState,
    child: ChildState,
    answer: RequestState | None,
    verdict: LaunchVerdict,
) -> None:
    assert judge_unreconciled(record, name, child, answer) is verdict


@given(
    name=st.sampled_from(ReconciliationState),
    child=st.sampled_from(ChildState),
    request=st.none() | st.sampled_from(RequestState),
)
def test_judge_reports_absent_only_when_nothing_can_still_act(
    name: ReconciliationState, child: ChildState, request: RequestState | None
) -> None:
    verdict = judge_unreconciled(CRASHED, name, child, request)
    if verdict is LaunchVerdict.ABSENT:
        assert name is ReconciliationState.ABSENT
        assert child in (ChildState.GONE, ChildState.NOT_RECORDED)
        assert request in (RequestState.FAILED, RequestState.CANCELLED, RequestState.NONE_ACTIVE)
