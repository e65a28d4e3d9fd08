"""The pure resume decision (runtime-reference.md §3 Resume): one test row per rule."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import resume
from npa_infra.runs.models import (
    Category,
    LaunchState,
    Phase,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    TransactionRecord,
)
from npa_infra.runs.resume import ResumeVerdict

D = RecoveryDecision
ABSENT = Reconciliation(ReconciliationState.ABSENT)
TRANSIENT = (
    Category.KUBERNETES_TRANSPORT,
    Category.KUBERNETES_RATE_LIMIT,
    Category.KUBERNETES_SERVER,
    Category.API_WARMUP,
)


def rec(
    *,
    sequence: int = 1,
    state: LaunchState = LaunchState.INDETERMINATE,
    decision: RecoveryDecision = D.NONE,
    category: Category = Category.NONE,
    last: Category = Category.NONE,
) -> TransactionRecord:
    """A journaled record: DONE, unless ``launching`` (left behind by a crash)."""
    base = TransactionRecord(
        logical_launch_id="npa-launch-abc",
        job_name="npa-r-w1-a1",
        context="kind",
        started_at=0.0,
        deadline=180.0,
    )
    crashed = state is LaunchState.LAUNCHING
    return replace(
        base,
        phase=Phase.RECONCILE_AFTER_LAUNCH if crashed else Phase.DONE,
        launch_sequence=sequence,
        state=state,
        recovery_decision=decision,
        category=category,
        last_category=last,
    )


def found(status: str | None, *ids: int) -> Reconciliation:
    return Reconciliation(ReconciliationState.FOUND, job_ids=ids or (7,), status=status)


# -- found ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "verdict", "reason"),
    [
        ("SUCCEEDED", ResumeVerdict.ADOPT, D.ADOPT_EXISTING),
        ("succeeded", ResumeVerdict.ADOPT, D.ADOPT_EXISTING),
        ("FAILED", ResumeVerdict.KEEP_FAILED, resume.FOUND_TERMINAL_FAILURE),
        ("FAILED_SETUP", ResumeVerdict.KEEP_FAILED, resume.FOUND_TERMINAL_FAILURE),
        ("FAILED_NO_RESOURCE", ResumeVerdict.KEEP_FAILED, resume.FOUND_TERMINAL_FAILURE),
        ("FAILED_CONTROLLER", ResumeVerdict.KEEP_FAILED, resume.FOUND_TERMINAL_FAILURE),
        ("CANCELLED", ResumeVerdict.KEEP_FAILED, resume.FOUND_TERMINAL_FAILURE),
        ("RUNNING", ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
        ("PENDING", ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
        ("STARTING", ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
        ("RECOVERING", ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
        ("CANCELLING", ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
        (None, ResumeVerdict.ATTACH, resume.FOUND_IN_PROGRESS),
    ],
    ids=[
        "succeeded",
        "succeeded-lowercase",
        "failed",
        "failed-setup",
        "failed-no-resource",
        "failed-controller",
        "cancelled",
        "running",
        "pending",
        "starting",
        "recovering",
        "cancelling-not-terminal",
        "status-unknown",
    ],
)
@pytest.mark.parametrize(
    "record",
    [None, rec(sequence=0), rec(decision=D.VERIFIED_ABSENT_NO_RETRY, category=Category.AUTH)],
    ids=["no-record", "never-launched", "terminal-record"],
)
def test_decide_resume_found_status_decides(
    status: str | None,
    verdict: ResumeVerdict,
    reason: str,
    record: TransactionRecord | None,
) -> None:
    decision = resume.decide_resume(record, found(status), authoritative_absence=False)
    assert (decision.verdict, decision.reason) == (verdict, reason)
    assert "7" in decision.message


@pytest.mark.parametrize(
    "lookup",
    [
        Reconciliation(ReconciliationState.UNAVAILABLE, error="belongs to another job"),
        Reconciliation(ReconciliationState.AMBIGUOUS, job_ids=(3, 4)),
        found("RUNNING", 3, 4),
        Reconciliation(ReconciliationState.FOUND),
    ],
    ids=["unavailable", "ambiguous", "found-two-ids", "found-no-id"],
)
@pytest.mark.parametrize("authoritative", [True, False], ids=["authoritative", "not-authoritative"])
def test_decide_resume_unreadable_lookup_blocks_indeterminate(
    lookup: Reconciliation, authoritative: bool
) -> None:
    decision = resume.decide_resume(
        rec(sequence=0), lookup, authoritative_absence=authoritative, retry_absent_in_flight=True
    )
    assert (decision.verdict, decision.reason) == (ResumeVerdict.BLOCK, D.BLOCK_INDETERMINATE)


@pytest.mark.parametrize(
    "record",
    [None, rec(sequence=0), rec(state=LaunchState.LAUNCHING)],
    ids=["no-record", "never-launched", "crashed"],
)
def test_decide_resume_absent_not_authoritative_blocks_indeterminate(
    record: TransactionRecord | None,
) -> None:
    decision = resume.decide_resume(
        record,
        ABSENT,
        authoritative_absence=False,
        retry_absent_in_flight=True,
        outputs_absent=True,
    )
    assert (decision.verdict, decision.reason) == (ResumeVerdict.BLOCK, D.BLOCK_INDETERMINATE)


# -- authoritative absence -------------------------------------------------------------------
AUTOMATIC = [
    ("no-record", None, resume.NEVER_LAUNCHED),
    ("never-launched", rec(sequence=0, decision=D.READINESS_BLOCKED), resume.NEVER_LAUNCHED),
    (
        "crashed-launching",
        rec(state=LaunchState.LAUNCHING, decision=D.RETRY_AFTER_VERIFIED_ABSENCE),
        resume.CRASHED_VERIFIED_ABSENT,
    ),
    (
        "crashed-after-terminal-error",
        rec(state=LaunchState.LAUNCHING, category=Category.AUTH, last=Category.AUTH),
        resume.CRASHED_VERIFIED_ABSENT,
    ),
    *[
        (
            f"{category}-{decision}",
            rec(decision=decision, category=category, last=category),
            D.RETRY_AFTER_VERIFIED_ABSENCE,
        )
        for category in (*TRANSIENT, Category.INTERRUPTED)
        for decision in (
            D.RECOVERY_DEADLINE_EXHAUSTED,
            D.INTERRUPTED_VERIFIED_ABSENT,
            D.BLOCK_INDETERMINATE,
        )
    ],
    (
        "first-category-transient-no-latest",
        rec(decision=D.BLOCK_INDETERMINATE, category=Category.KUBERNETES_SERVER),
        D.RETRY_AFTER_VERIFIED_ABSENCE,
    ),
    (
        "uncertain-success-latest-transient",
        rec(decision=D.BLOCK_AFTER_UNCERTAIN_SUCCESS, last=Category.KUBERNETES_RATE_LIMIT),
        D.RETRY_AFTER_VERIFIED_ABSENCE,
    ),
    (
        "uncertain-success-latest-interrupted",
        rec(decision=D.BLOCK_AFTER_UNCERTAIN_SUCCESS, last=Category.INTERRUPTED),
        D.RETRY_AFTER_VERIFIED_ABSENCE,
    ),
]


@pytest.mark.parametrize(
    ("record", "reason"),
    [(record, reason) for _, record, reason in AUTOMATIC],
    ids=[name for name, _, _ in AUTOMATIC],
)
def test_decide_resume_authoritative_absence_automatic_relaunch(
    record: TransactionRecord | None, reason: str
) -> None:
    decision = resume.decide_resume(record, ABSENT, authoritative_absence=True)
    assert (decision.verdict, decision.reason) == (ResumeVerdict.RELAUNCH, reason)


STICKY = [
    (
        "terminal-no-retry",
        rec(
            state=LaunchState.TERMINAL_FAILURE,
            decision=D.VERIFIED_ABSENT_NO_RETRY,
            category=Category.RBAC,
            last=Category.RBAC,
        ),
    ),
    (
        "unknown-no-retry",
        rec(
            state=LaunchState.TERMINAL_FAILURE,
            decision=D.VERIFIED_ABSENT_NO_RETRY,
            category=Category.UNKNOWN,
            last=Category.UNKNOWN,
        ),
    ),
    (
        "unknown-block-indeterminate",
        rec(decision=D.BLOCK_INDETERMINATE, category=Category.UNKNOWN, last=Category.UNKNOWN),
    ),
    (
        "latest-terminal-beats-first-transient",
        rec(
            decision=D.BLOCK_INDETERMINATE,
            category=Category.KUBERNETES_TRANSPORT,
            last=Category.CAPACITY,
        ),
    ),
    (
        "uncertain-success-no-latest-failure",
        rec(decision=D.BLOCK_AFTER_UNCERTAIN_SUCCESS, category=Category.KUBERNETES_TRANSPORT),
    ),
    (
        "uncertain-success-latest-unknown",
        rec(decision=D.BLOCK_AFTER_UNCERTAIN_SUCCESS, last=Category.UNKNOWN),
    ),
    (
        "submitted-then-vanished",
        rec(state=LaunchState.SUBMITTED, decision=D.SUBMITTED_AND_RECONCILED),
    ),
    (
        "readiness-blocked-after-launch",
        rec(
            state=LaunchState.TRANSIENT_API_FAILURE,
            decision=D.READINESS_BLOCKED,
            category=Category.KUBERNETES_SERVER,
            last=Category.KUBERNETES_SERVER,
        ),
    ),
    (
        "legacy-no-decision",
        rec(state=LaunchState.INTERRUPTED, category=Category.KUBERNETES_TRANSPORT),
    ),
    (
        "sticky-stays-sticky",
        rec(
            decision=D.RESUME_BLOCK_TERMINAL_OR_LEGACY_ABSENCE,
            category=Category.KUBERNETES_TRANSPORT,
            last=Category.KUBERNETES_TRANSPORT,
        ),
    ),
    (
        "output-block-stays",
        rec(decision=D.RESUME_BLOCK_OUTPUT_PRESENT, category=Category.API_WARMUP),
    ),
]


@pytest.mark.parametrize("record", [r for _, r in STICKY], ids=[name for name, _ in STICKY])
def test_decide_resume_authoritative_absence_otherwise_sticky_block(
    record: TransactionRecord,
) -> None:
    decision = resume.decide_resume(record, ABSENT, authoritative_absence=True)
    assert (decision.verdict, decision.reason) == (
        ResumeVerdict.BLOCK,
        D.RESUME_BLOCK_TERMINAL_OR_LEGACY_ABSENCE,
    )
    assert "--retry-absent-in-flight" in decision.message


@pytest.mark.parametrize(
    ("outputs_absent", "verdict", "reason"),
    [
        (True, ResumeVerdict.RELAUNCH, D.OPERATOR_AUTHORIZED_RELAUNCH),
        (False, ResumeVerdict.BLOCK, D.RESUME_BLOCK_OUTPUT_PRESENT),
        (None, ResumeVerdict.BLOCK, D.RESUME_BLOCK_OUTPUT_INDETERMINATE),
    ],
    ids=["outputs-absent", "outputs-present", "outputs-indeterminate"],
)
@pytest.mark.parametrize("record", [r for _, r in STICKY], ids=[name for name, _ in STICKY])
def test_decide_resume_retry_absent_in_flight_needs_outputs_absent(
    record: TransactionRecord,
    outputs_absent: bool | None,
    verdict: ResumeVerdict,
    reason: RecoveryDecision,
) -> None:
    decision = resume.decide_resume(
        record,
        ABSENT,
        authoritative_absence=True,
        retry_absent_in_flight=True,
        outputs_absent=outputs_absent,
    )
    assert (decision.verdict, decision.reason) == (verdict, reason)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (rec(sequence=0), resume.NEVER_LAUNCHED),
        (
            rec(decision=D.INTERRUPTED_VERIFIED_ABSENT, category=Category.INTERRUPTED),
            D.RETRY_AFTER_VERIFIED_ABSENCE,
        ),
    ],
    ids=["never-launched", "automatic"],
)
def test_decide_resume_retry_flag_automatic_rule_first(
    record: TransactionRecord, reason: str
) -> None:
    decision = resume.decide_resume(
        record,
        ABSENT,
        authoritative_absence=True,
        retry_absent_in_flight=True,
        outputs_absent=False,
    )
    assert (decision.verdict, decision.reason) == (ResumeVerdict.RELAUNCH, reason)


@given(
    record=st.one_of(
        st.none(),
        st.builds(
            rec,
            sequence=st.integers(min_value=0, max_value=3),
            state=st.sampled_from(LaunchState),
            decision=st.sampled_from(RecoveryDecision),
            category=st.sampled_from(Category),
            last=st.sampled_from(Category),
        ),
    ),
    lookup=st.builds(
        Reconciliation,
        state=st.sampled_from(ReconciliationState),
        job_ids=st.lists(st.integers(min_value=1, max_value=9), max_size=2).map(tuple),
        status=st.one_of(
            st.none(), st.sampled_from(("SUCCEEDED", "FAILED_SETUP", "RUNNING", "CANCELLING"))
        ),
    ),
    authoritative=st.booleans(),
    retry=st.booleans(),
    outputs_absent=st.one_of(st.none(), st.booleans()),
)
def test_decide_resume_any_input_total_and_never_done(
    record: TransactionRecord | None,
    lookup: Reconciliation,
    authoritative: bool,
    retry: bool,
    outputs_absent: bool | None,
) -> None:
    decision = resume.decide_resume(
        record,
        lookup,
        authoritative_absence=authoritative,
        retry_absent_in_flight=retry,
        outputs_absent=outputs_absent,
    )
    assert decision.verdict is not ResumeVerdict.DONE
    assert decision.message
    if decision.verdict is ResumeVerdict.RELAUNCH:  # only ever after proven absence
        assert lookup.state is ReconciliationState.ABSENT and authoritative


@pytest.mark.parametrize(
    ("status", "terminal"),
    [
        ("SUCCEEDED", True),
        ("CANCELLED", True),
        ("FAILED", True),
        ("FAILED_PRECHECKS", True),
        ("failed_driver", True),
        ("CANCELLING", False),
        ("RUNNING", False),
        ("", False),
        (None, False),
    ],
    ids=[
        "succeeded",
        "cancelled",
        "failed",
        "failed-prechecks",
        "lowercase",
        "cancelling",
        "running",
        "empty",
        "none",
    ],
)
def test_is_terminal_status_expected(status: str | None, terminal: bool) -> None:
    assert resume.is_terminal_status(status) is terminal
