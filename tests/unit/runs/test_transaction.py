"""Every transition of the pure launch-transaction machine (runtime-reference.md §1).

Records are built by driving the public API from ``begin``, so every fixture
is a state the machine can really reach.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from npa_infra.errors import InvariantError
from npa_infra.runs import backoff, transaction
from npa_infra.runs.models import (
    Category,
    Evidence,
    Existence,
    LaunchOutcome,
    LaunchState,
    Phase,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    RequestCheck,
    RequestState,
    TransactionRecord,
)
from npa_infra.runs.transaction import Action, ActionKind

T0 = 1000.0
NAME = "npa-run-w1-a1"
RESUME = "npa workbench workflow submit wf.yaml --project p --resume-run r1"

ABSENT = Reconciliation(ReconciliationState.ABSENT)
UNAVAILABLE = Reconciliation(
    ReconciliationState.UNAVAILABLE,
    error="dial tcp: i/o timeout",
    category=Category.KUBERNETES_TRANSPORT,
)
AMBIGUOUS = Reconciliation(ReconciliationState.AMBIGUOUS, job_ids=(3, 4), error="two ids")
ACCEPTED = LaunchOutcome(accepted=True, request_id="req-1")
TRANSIENT_ERROR = LaunchOutcome(
    accepted=False, error="connection refused", category=Category.KUBERNETES_TRANSPORT
)
TERMINAL_ERROR = LaunchOutcome(accepted=False, error="Forbidden (403)", category=Category.RBAC)


def found(job_id: int = 7, status: str | None = "RUNNING") -> Reconciliation:
    return Reconciliation(ReconciliationState.FOUND, job_ids=(job_id,), status=status)


# -- builders ------------------------------------------------------------------------------
def fresh(now: float = T0) -> TransactionRecord:
    return transaction.begin(
        logical_launch_id="npa-launch-abc", job_name=NAME, context="kind", now=now
    )


def at_readiness() -> TransactionRecord:
    return transaction.on_reconciled(fresh(), ABSENT, now=T0)


def at_launch() -> TransactionRecord:
    return transaction.on_readiness(at_readiness(), Evidence.READY, now=T0)


def intent() -> TransactionRecord:
    return transaction.on_launch_intent(at_launch(), now=T0)


def launched(outcome: LaunchOutcome = ACCEPTED) -> TransactionRecord:
    return transaction.on_launched(intent(), outcome, now=T0 + 1)


def at_request_check(outcome: LaunchOutcome = ACCEPTED) -> TransactionRecord:
    return transaction.on_reconciled(launched(outcome), ABSENT, now=T0 + 2)


def settled(check: RequestCheck, outcome: LaunchOutcome = ACCEPTED) -> TransactionRecord:
    return transaction.on_request(at_request_check(outcome), check, now=T0 + 3)


def at_backoff() -> TransactionRecord:
    record = settled(RequestCheck(RequestState.NONE_ACTIVE), TRANSIENT_ERROR)
    return transaction.on_reconciled(record, ABSENT, now=T0 + 4, jitter=0.5)


def after_backoff() -> TransactionRecord:
    return transaction.on_slept(at_backoff(), now=T0 + 6)


# -- begin / next_action ----------------------------------------------------------------------
def test_begin_fresh_record_starts_pending_with_deadline() -> None:
    record = fresh()
    assert (record.phase, record.state, record.launch_sequence) == (
        Phase.START,
        LaunchState.PENDING,
        0,
    )
    assert record.deadline == T0 + backoff.RECOVERY_DEADLINE
    assert record.started_at == T0
    assert not record.done


def test_begin_custom_deadline_applied() -> None:
    assert (
        transaction.begin(
            logical_launch_id="x", job_name="n", context=None, now=5.0, deadline_seconds=10
        ).deadline
        == 15.0
    )


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (fresh(), Action(ActionKind.RECONCILE)),
        (replace(fresh(), phase=Phase.INITIAL_RECONCILE), Action(ActionKind.RECONCILE)),
        (at_readiness(), Action(ActionKind.READINESS)),
        (at_launch(), Action(ActionKind.LAUNCH)),
        (launched(), Action(ActionKind.RECONCILE)),
        (at_request_check(), Action(ActionKind.CHECK_REQUEST, request_id="req-1")),
        (at_request_check(TRANSIENT_ERROR), Action(ActionKind.CHECK_REQUEST, request_id=None)),
        (
            transaction.on_request(
                at_request_check(), RequestCheck(RequestState.RUNNING), now=T0 + 3
            ),
            Action(ActionKind.SLEEP, delay=backoff.REQUEST_POLL),
        ),
        (at_backoff(), Action(ActionKind.SLEEP, delay=backoff.delay(1, 0.5))),
        (transaction.on_reconciled(fresh(), found(), now=T0), Action(ActionKind.FINISH)),
    ],
    ids=[
        "start-reconcile",
        "initial-reconcile",
        "readiness",
        "launch",
        "after-launch-reconcile",
        "check-accepted-request-by-id",
        "check-any-request-without-id",
        "request-in-flight-sleeps",
        "backoff-sleeps",
        "done-finishes",
    ],
)
def test_next_action_each_phase_expected_action(
    record: TransactionRecord, expected: Action
) -> None:
    assert transaction.next_action(record) == expected


# -- on_reconciled: initial -----------------------------------------------------------------
@pytest.mark.parametrize("status", ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", None], ids=str)
@pytest.mark.parametrize("phase", [Phase.START, Phase.INITIAL_RECONCILE], ids=str)
def test_on_reconciled_initial_found_adopted_whatever_status(
    status: str | None, phase: Phase
) -> None:
    record = transaction.on_reconciled(replace(fresh(), phase=phase), found(9, status), now=T0 + 1)
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.ADOPTED,
        RecoveryDecision.ADOPT_EXISTING,
        Existence.FOUND,
    )
    assert record.job_id == 9
    assert record.finished_at == T0 + 1
    assert record.launch_sequence == 0


def test_on_reconciled_initial_absent_goes_to_readiness() -> None:
    record = at_readiness()
    assert (record.phase, record.state, record.existence) == (
        Phase.READINESS,
        LaunchState.PENDING,
        Existence.ABSENT,
    )
    assert record.reconciliations == (ABSENT,)


@pytest.mark.parametrize(
    ("obs", "category"),
    [
        (UNAVAILABLE, Category.KUBERNETES_TRANSPORT),
        (AMBIGUOUS, Category.UNKNOWN),
        (Reconciliation(ReconciliationState.FOUND, job_ids=(3, 4)), Category.UNKNOWN),
        (Reconciliation(ReconciliationState.FOUND, job_ids=()), Category.UNKNOWN),
    ],
    ids=["unavailable", "ambiguous", "found-two-ids", "found-no-id"],
)
def test_on_reconciled_initial_not_absent_blocks_indeterminate(
    obs: Reconciliation, category: Category
) -> None:
    record = transaction.on_reconciled(fresh(), obs, now=T0 + 1)
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.INDETERMINATE,
        RecoveryDecision.BLOCK_INDETERMINATE,
        Existence.INDETERMINATE,
    )
    assert record.category is category
    assert record.reconciliation_error
    assert record.job_id is None
    assert record.reconciliations == (obs,)


# -- on_readiness ---------------------------------------------------------------------------
def test_on_readiness_ready_goes_to_launch_with_samples() -> None:
    sample = {"schema": "npa.skypilot.kubernetes-readiness.v1", "ok": True}
    record = transaction.on_readiness(at_readiness(), Evidence.READY, samples=(sample,), now=T0)
    assert record.phase is Phase.LAUNCH
    assert record.readiness == (sample,)


def test_on_readiness_ready_first_attempt_after_deadline_still_launches() -> None:
    record = transaction.on_readiness(at_readiness(), Evidence.READY, now=T0 + 500)
    assert record.phase is Phase.LAUNCH


@pytest.mark.parametrize("late", [0.0, 50.0], ids=["at-deadline", "past-deadline"])
def test_on_readiness_ready_after_retry_past_deadline_exhausted(late: float) -> None:
    record = after_backoff()
    record = transaction.on_readiness(record, Evidence.READY, now=record.deadline + late)
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.TRANSIENT_API_FAILURE,
        RecoveryDecision.RECOVERY_DEADLINE_EXHAUSTED,
        Existence.ABSENT,
    )
    assert record.category is Category.KUBERNETES_TRANSPORT


@pytest.mark.parametrize(
    ("evidence", "state", "category"),
    [
        (Evidence.TERMINAL, LaunchState.TERMINAL_FAILURE, Category.AUTH),
        (
            Evidence.TRANSIENT_UNAVAILABLE,
            LaunchState.TRANSIENT_API_FAILURE,
            Category.KUBERNETES_SERVER,
        ),
        (Evidence.AMBIGUOUS, LaunchState.INDETERMINATE, Category.NONE),
    ],
    ids=["terminal", "transient", "ambiguous"],
)
def test_on_readiness_not_ready_blocked_absent(
    evidence: Evidence, state: LaunchState, category: Category
) -> None:
    record = transaction.on_readiness(
        at_readiness(), evidence, category=category, error="boom", now=T0 + 9
    )
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        state,
        RecoveryDecision.READINESS_BLOCKED,
        Existence.ABSENT,
    )
    assert record.category is (Category.UNKNOWN if category is Category.NONE else category)
    assert record.primary_error == "boom"
    assert record.finished_at == T0 + 9


def test_on_readiness_not_ready_after_retry_keeps_first_failure() -> None:
    record = transaction.on_readiness(
        after_backoff(), Evidence.TERMINAL, category=Category.AUTH, error="401", now=T0 + 7
    )
    assert record.category is Category.KUBERNETES_TRANSPORT
    assert record.primary_error == "connection refused"
    assert record.last_category is Category.AUTH


# -- on_launch_intent / on_launched ------------------------------------------------------
def test_on_launch_intent_first_sequence_one_launching() -> None:
    record = intent()
    assert (record.launch_sequence, record.state, record.phase) == (
        1,
        LaunchState.LAUNCHING,
        Phase.LAUNCH,
    )
    assert (record.accepted, record.request_settled, record.outcome_pending) == (False, False, True)
    assert record.existence is Existence.INDETERMINATE


def test_on_launch_intent_retry_increments_and_clears_latest_failure() -> None:
    record = transaction.on_readiness(after_backoff(), Evidence.READY, now=T0 + 7)
    record = transaction.on_launch_intent(record, now=T0 + 7)
    assert record.launch_sequence == 2
    assert record.last_category is Category.NONE
    assert record.category is Category.KUBERNETES_TRANSPORT


def test_on_launched_accepted_records_request_id() -> None:
    record = launched()
    assert (record.phase, record.accepted, record.request_ids) == (
        Phase.RECONCILE_AFTER_LAUNCH,
        True,
        ("req-1",),
    )
    assert record.category is Category.NONE
    assert not record.outcome_pending


@pytest.mark.parametrize(
    ("outcome", "category", "error"),
    [
        (TRANSIENT_ERROR, Category.KUBERNETES_TRANSPORT, "connection refused"),
        (TERMINAL_ERROR, Category.RBAC, "Forbidden (403)"),
        (
            LaunchOutcome(accepted=False, error="Could not connect to SkyPilot API server"),
            Category.API_WARMUP,
            "Could not connect to SkyPilot API server",
        ),
        (LaunchOutcome(accepted=False, error="weird"), Category.UNKNOWN, "weird"),
        (LaunchOutcome(accepted=False, timed_out=True), Category.UNKNOWN, "launch timed out"),
        (
            LaunchOutcome(accepted=False, timed_out=True, error="status code 503"),
            Category.KUBERNETES_SERVER,
            "status code 503",
        ),
        (LaunchOutcome(accepted=False), Category.UNKNOWN, "launch failed without output"),
    ],
    ids=[
        "transient",
        "terminal",
        "classified-warmup",
        "unclassified",
        "timeout",
        "timeout-classified",
        "silent",
    ],
)
def test_on_launched_error_records_first_failure(
    outcome: LaunchOutcome, category: Category, error: str
) -> None:
    record = launched(outcome)
    assert (record.phase, record.accepted) == (Phase.RECONCILE_AFTER_LAUNCH, False)
    assert (record.category, record.last_category, record.primary_error) == (
        category,
        category,
        error,
    )


def test_on_launched_accepted_with_settle_delay_sleeps_before_the_lookup() -> None:
    # issue 19: a supervised launch takes its id from the next shared tick's read
    record = transaction.on_launched(intent(), ACCEPTED, now=T0 + 1, settle_delay=5.0)
    assert transaction.next_action(record) == Action(ActionKind.SLEEP, delay=5.0)
    with pytest.raises(InvariantError):  # no lookup before the settle is slept
        transaction.on_reconciled(record, ABSENT, now=T0 + 2)
    slept = transaction.on_slept(record, now=T0 + 6)
    assert (slept.phase, slept.poll_delay, slept.request_settled) == (
        Phase.RECONCILE_AFTER_LAUNCH,
        0.0,
        False,
    )
    assert transaction.next_action(slept) == Action(ActionKind.RECONCILE)
    done = transaction.on_reconciled(slept, found(), now=T0 + 7)
    assert done.recovery_decision is RecoveryDecision.SUBMITTED_AND_RECONCILED


def test_on_launched_failed_ignores_settle_delay() -> None:
    record = transaction.on_launched(intent(), TRANSIENT_ERROR, now=T0 + 1, settle_delay=5.0)
    assert transaction.next_action(record) == Action(ActionKind.RECONCILE)


def test_interrupt_while_settling_blocks_indeterminate() -> None:
    # the request was accepted and may be live: nothing proves absence
    record = transaction.on_launched(intent(), ACCEPTED, now=T0 + 1, settle_delay=5.0)
    stopped = transaction.on_interrupted(record, now=T0 + 2)
    assert stopped.recovery_decision is RecoveryDecision.BLOCK_INDETERMINATE
    again = transaction.reenter(record, now=T0 + 3)
    assert (again.phase, again.poll_delay) == (Phase.RECONCILE_AFTER_LAUNCH, 0.0)


def test_on_launched_accepted_without_request_id_raises() -> None:
    with pytest.raises(InvariantError):
        transaction.on_launched(intent(), LaunchOutcome(accepted=True), now=T0)


# -- on_reconciled: after launch -------------------------------------------------------------
@pytest.mark.parametrize(
    ("outcome", "state", "decision"),
    [
        (ACCEPTED, LaunchState.SUBMITTED, RecoveryDecision.SUBMITTED_AND_RECONCILED),
        (TRANSIENT_ERROR, LaunchState.ADOPTED, RecoveryDecision.ADOPT_AFTER_UNCERTAIN_LAUNCH),
        (TERMINAL_ERROR, LaunchState.ADOPTED, RecoveryDecision.ADOPT_AFTER_UNCERTAIN_LAUNCH),
    ],
    ids=["accepted-submitted", "transient-error-adopted", "terminal-error-adopted"],
)
def test_on_reconciled_after_launch_found_done_with_queue_id(
    outcome: LaunchOutcome, state: LaunchState, decision: RecoveryDecision
) -> None:
    record = transaction.on_reconciled(launched(outcome), found(42), now=T0 + 5)
    assert (
        record.phase,
        record.state,
        record.recovery_decision,
        record.existence,
        record.job_id,
    ) == (
        Phase.DONE,
        state,
        decision,
        Existence.FOUND,
        42,
    )


@pytest.mark.parametrize("obs", [UNAVAILABLE, AMBIGUOUS], ids=["unavailable", "ambiguous"])
@pytest.mark.parametrize(
    ("outcome", "decision"),
    [
        (ACCEPTED, RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS),
        (TRANSIENT_ERROR, RecoveryDecision.BLOCK_INDETERMINATE),
    ],
    ids=["accepted", "errored"],
)
def test_on_reconciled_after_launch_unreadable_blocks(
    obs: Reconciliation, outcome: LaunchOutcome, decision: RecoveryDecision
) -> None:
    record = transaction.on_reconciled(launched(outcome), obs, now=T0 + 5)
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.INDETERMINATE,
        decision,
        Existence.INDETERMINATE,
    )
    assert record.reconciliation_error == obs.error
    assert record.job_id is None


@pytest.mark.parametrize(
    "outcome",
    [ACCEPTED, TRANSIENT_ERROR, TERMINAL_ERROR],
    ids=["accepted", "transient", "terminal"],
)
def test_on_reconciled_after_launch_absent_unsettled_checks_request(outcome: LaunchOutcome) -> None:
    record = at_request_check(outcome)
    assert (record.phase, record.request_settled) == (Phase.REQUEST_CHECK, False)
    assert not record.done


@pytest.mark.parametrize(
    ("outcome", "check", "state", "decision", "existence"),
    [
        (
            ACCEPTED,
            RequestCheck(RequestState.SUCCEEDED),
            LaunchState.INDETERMINATE,
            RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS,
            Existence.INDETERMINATE,
        ),
        (
            ACCEPTED,
            RequestCheck(RequestState.NONE_ACTIVE),
            LaunchState.INDETERMINATE,
            RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS,
            Existence.INDETERMINATE,
        ),
        (
            ACCEPTED,
            RequestCheck(RequestState.FAILED, error="x", category=Category.KUBERNETES_SERVER),
            LaunchState.LAUNCHING,
            RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
            Existence.ABSENT,
        ),
        (
            ACCEPTED,
            RequestCheck(RequestState.FAILED, error="quota exceeded"),
            LaunchState.TERMINAL_FAILURE,
            RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
            Existence.ABSENT,
        ),
        (
            ACCEPTED,
            RequestCheck(RequestState.FAILED, error="boom"),
            LaunchState.TERMINAL_FAILURE,
            RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
            Existence.ABSENT,
        ),
        (
            ACCEPTED,
            RequestCheck(RequestState.CANCELLED),
            LaunchState.TERMINAL_FAILURE,
            RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
            Existence.ABSENT,
        ),
        (
            TRANSIENT_ERROR,
            RequestCheck(RequestState.NONE_ACTIVE),
            LaunchState.LAUNCHING,
            RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
            Existence.ABSENT,
        ),
        (
            TRANSIENT_ERROR,
            RequestCheck(RequestState.SUCCEEDED),
            LaunchState.LAUNCHING,
            RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
            Existence.ABSENT,
        ),
        (
            TERMINAL_ERROR,
            RequestCheck(RequestState.NONE_ACTIVE),
            LaunchState.TERMINAL_FAILURE,
            RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
            Existence.ABSENT,
        ),
        (
            LaunchOutcome(accepted=False, timed_out=True),
            RequestCheck(RequestState.NONE_ACTIVE),
            LaunchState.TERMINAL_FAILURE,
            RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
            Existence.ABSENT,
        ),
    ],
    ids=[
        "accepted-succeeded-contradiction",
        "accepted-none-active-contradiction",
        "accepted-failed-transient-backoff",
        "accepted-failed-capacity-no-retry",
        "accepted-failed-unknown-no-retry",
        "accepted-cancelled-no-retry",
        "transient-error-backoff",
        "transient-error-other-request-backoff",
        "terminal-error-no-retry",
        "timeout-unknown-no-retry",
    ],
)
def test_on_reconciled_authoritative_absence_decides(
    outcome: LaunchOutcome,
    check: RequestCheck,
    state: LaunchState,
    decision: RecoveryDecision,
    existence: Existence,
) -> None:
    record = transaction.on_reconciled(settled(check, outcome), ABSENT, now=T0 + 4, jitter=0.5)
    assert (record.state, record.recovery_decision, record.existence) == (
        state,
        decision,
        existence,
    )
    assert record.job_id is None
    if decision is RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE:
        assert (record.phase, record.backoff_delay) == (Phase.BACKOFF, backoff.delay(1, 0.5))
    else:
        assert record.phase is Phase.DONE
        assert record.category is not Category.NONE


@pytest.mark.parametrize("jitter", [0.0, 1.0], ids=["low", "high"])
def test_on_reconciled_backoff_delay_uses_jitter(jitter: float) -> None:
    record = settled(RequestCheck(RequestState.NONE_ACTIVE), TRANSIENT_ERROR)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 4, jitter=jitter)
    assert record.backoff_delay == backoff.delay(1, jitter)


def test_on_reconciled_transient_absence_past_deadline_exhausted() -> None:
    record = settled(RequestCheck(RequestState.NONE_ACTIVE), TRANSIENT_ERROR)
    record = transaction.on_reconciled(record, ABSENT, now=record.deadline - 1.0, jitter=0.5)
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.TRANSIENT_API_FAILURE,
        RecoveryDecision.RECOVERY_DEADLINE_EXHAUSTED,
        Existence.ABSENT,
    )


# -- on_request ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "state",
    [RequestState.SUCCEEDED, RequestState.FAILED, RequestState.CANCELLED, RequestState.NONE_ACTIVE],
    ids=str,
)
def test_on_request_settled_reconciles_authoritatively(state: RequestState) -> None:
    record = settled(RequestCheck(state))
    assert (record.phase, record.request_settled, record.last_request_state) == (
        Phase.RECONCILE_AFTER_LAUNCH,
        True,
        state,
    )


def test_on_request_failed_records_classified_latest_failure() -> None:
    record = settled(RequestCheck(RequestState.FAILED, error="503 Service Unavailable"))
    assert (record.category, record.last_category) == (
        Category.KUBERNETES_SERVER,
        Category.KUBERNETES_SERVER,
    )
    assert record.primary_error == "503 Service Unavailable"


def test_on_request_failed_after_launch_error_keeps_first_failure() -> None:
    check = RequestCheck(RequestState.FAILED, error="quota", category=Category.CAPACITY)
    record = settled(check, TRANSIENT_ERROR)
    assert (record.category, record.last_category) == (
        Category.KUBERNETES_TRANSPORT,
        Category.CAPACITY,
    )


@pytest.mark.parametrize(
    "state", [RequestState.PENDING, RequestState.RUNNING, RequestState.UNKNOWN], ids=str
)
def test_on_request_unsettled_polls_then_reconciles_unsettled(state: RequestState) -> None:
    record = transaction.on_request(at_request_check(), RequestCheck(state), now=T0 + 3)
    assert (record.phase, record.poll_delay, record.request_settled) == (
        Phase.REQUEST_CHECK,
        backoff.REQUEST_POLL,
        False,
    )
    record = transaction.on_slept(record, now=T0 + 5)
    assert (record.phase, record.poll_delay, record.request_settled) == (
        Phase.RECONCILE_AFTER_LAUNCH,
        0.0,
        False,
    )
    assert transaction.next_action(record) == Action(ActionKind.RECONCILE)


@pytest.mark.parametrize(
    ("outcome", "decision"),
    [
        (ACCEPTED, RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS),
        (TRANSIENT_ERROR, RecoveryDecision.BLOCK_INDETERMINATE),
    ],
    ids=["accepted", "errored"],
)
@pytest.mark.parametrize("state", [RequestState.RUNNING, RequestState.UNKNOWN], ids=str)
def test_on_request_unsettled_at_deadline_blocks(
    outcome: LaunchOutcome, decision: RecoveryDecision, state: RequestState
) -> None:
    record = at_request_check(outcome)
    record = transaction.on_request(
        record, RequestCheck(state, error="read failed"), now=record.deadline - 1.0
    )
    assert (record.phase, record.state, record.recovery_decision, record.existence) == (
        Phase.DONE,
        LaunchState.INDETERMINATE,
        decision,
        Existence.INDETERMINATE,
    )
    assert record.notes[-1].endswith("read failed")


# -- on_slept ----------------------------------------------------------------------------------
def test_on_slept_backoff_retries_through_readiness() -> None:
    record = after_backoff()
    assert (record.phase, record.retries, record.accepted, record.request_settled) == (
        Phase.READINESS,
        1,
        False,
        False,
    )
    assert record.state is LaunchState.LAUNCHING
    assert record.launch_sequence == 1


def test_full_recovery_second_launch_submitted_keeps_first_failure() -> None:
    record = transaction.on_readiness(after_backoff(), Evidence.READY, now=T0 + 7)
    record = transaction.on_launch_intent(record, now=T0 + 7)
    record = transaction.on_launched(
        record, LaunchOutcome(accepted=True, request_id="req-2"), now=T0 + 8
    )
    record = transaction.on_reconciled(record, found(11), now=T0 + 9)
    assert (record.state, record.recovery_decision, record.job_id) == (
        LaunchState.SUBMITTED,
        RecoveryDecision.SUBMITTED_AND_RECONCILED,
        11,
    )
    assert (record.category, record.primary_error) == (
        Category.KUBERNETES_TRANSPORT,
        "connection refused",
    )
    assert (record.launch_sequence, record.retries, record.request_ids) == (2, 1, ("req-2",))


def test_full_accepted_request_in_flight_then_found_submitted() -> None:
    record = transaction.on_request(
        at_request_check(), RequestCheck(RequestState.RUNNING), now=T0 + 3
    )
    record = transaction.on_slept(record, now=T0 + 5)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 6)
    record = transaction.on_request(record, RequestCheck(RequestState.SUCCEEDED), now=T0 + 7)
    record = transaction.on_reconciled(record, found(5, "PENDING"), now=T0 + 8)
    assert (record.state, record.job_id, record.category) == (
        LaunchState.SUBMITTED,
        5,
        Category.NONE,
    )
    assert len(record.reconciliations) == 4


# -- illegal transitions ---------------------------------------------------------------------
def _done() -> TransactionRecord:
    return transaction.on_reconciled(fresh(), found(), now=T0)


def _polling() -> TransactionRecord:
    return transaction.on_request(at_request_check(), RequestCheck(RequestState.RUNNING), now=T0)


ILLEGAL = [
    (
        "on_reconciled-in-readiness",
        lambda: transaction.on_reconciled(at_readiness(), ABSENT, now=T0),
    ),
    ("on_reconciled-in-launch", lambda: transaction.on_reconciled(at_launch(), ABSENT, now=T0)),
    (
        "on_reconciled-in-request-check",
        lambda: transaction.on_reconciled(at_request_check(), ABSENT, now=T0),
    ),
    ("on_reconciled-in-backoff", lambda: transaction.on_reconciled(at_backoff(), ABSENT, now=T0)),
    ("on_reconciled-when-done", lambda: transaction.on_reconciled(_done(), ABSENT, now=T0)),
    ("on_readiness-in-start", lambda: transaction.on_readiness(fresh(), Evidence.READY, now=T0)),
    (
        "on_readiness-in-launch",
        lambda: transaction.on_readiness(at_launch(), Evidence.READY, now=T0),
    ),
    ("on_launch_intent-in-readiness", lambda: transaction.on_launch_intent(at_readiness(), now=T0)),
    ("on_launch_intent-twice", lambda: transaction.on_launch_intent(intent(), now=T0)),
    ("on_launch_intent-when-done", lambda: transaction.on_launch_intent(_done(), now=T0)),
    ("on_launched-without-intent", lambda: transaction.on_launched(at_launch(), ACCEPTED, now=T0)),
    ("on_launched-twice", lambda: transaction.on_launched(launched(), ACCEPTED, now=T0)),
    (
        "on_request-in-start",
        lambda: transaction.on_request(fresh(), RequestCheck(RequestState.SUCCEEDED), now=T0),
    ),
    (
        "on_request-while-polling",
        lambda: transaction.on_request(_polling(), RequestCheck(RequestState.SUCCEEDED), now=T0),
    ),
    ("on_slept-in-start", lambda: transaction.on_slept(fresh(), now=T0)),
    ("on_slept-in-request-check", lambda: transaction.on_slept(at_request_check(), now=T0)),
    ("on_slept-when-done", lambda: transaction.on_slept(_done(), now=T0)),
    ("on_interrupted-when-done", lambda: transaction.on_interrupted(_done(), now=T0)),
]


@pytest.mark.parametrize("call", [call for _, call in ILLEGAL], ids=[name for name, _ in ILLEGAL])
def test_transition_illegal_phase_raises_invariant_error(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvariantError):
        call()


def test_transition_returns_new_record_input_unchanged() -> None:
    before = at_readiness()
    snapshot = before.to_json()
    after = transaction.on_readiness(before, Evidence.READY, now=T0)
    assert after is not before
    assert before.to_json() == snapshot


# -- on_interrupted -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "decision", "existence", "category"),
    [
        (fresh, RecoveryDecision.NONE, Existence.INDETERMINATE, Category.INTERRUPTED),
        (at_readiness, RecoveryDecision.NONE, Existence.ABSENT, Category.INTERRUPTED),
        (at_launch, RecoveryDecision.NONE, Existence.ABSENT, Category.INTERRUPTED),
        (
            intent,
            RecoveryDecision.BLOCK_INDETERMINATE,
            Existence.INDETERMINATE,
            Category.INTERRUPTED,
        ),
        (
            launched,
            RecoveryDecision.BLOCK_INDETERMINATE,
            Existence.INDETERMINATE,
            Category.INTERRUPTED,
        ),
        (
            at_request_check,
            RecoveryDecision.BLOCK_INDETERMINATE,
            Existence.INDETERMINATE,
            Category.INTERRUPTED,
        ),
        (
            at_backoff,
            RecoveryDecision.INTERRUPTED_VERIFIED_ABSENT,
            Existence.ABSENT,
            Category.KUBERNETES_TRANSPORT,
        ),
        (
            after_backoff,
            RecoveryDecision.INTERRUPTED_VERIFIED_ABSENT,
            Existence.ABSENT,
            Category.KUBERNETES_TRANSPORT,
        ),
    ],
    ids=[
        "start",
        "readiness",
        "launch-before-intent",
        "after-intent",
        "after-accept",
        "request-check",
        "backoff",
        "readiness-after-backoff",
    ],
)
def test_on_interrupted_phase_decides_existence(
    build: object, decision: RecoveryDecision, existence: Existence, category: Category
) -> None:
    assert callable(build)
    record = transaction.on_interrupted(build(), now=T0 + 30)
    assert (
        record.phase,
        record.state,
        record.recovery_decision,
        record.existence,
        record.category,
    ) == (
        Phase.DONE,
        LaunchState.INTERRUPTED,
        decision,
        existence,
        category,
    )
    assert record.finished_at == T0 + 30


def test_on_interrupted_after_terminal_error_keeps_latest_failure() -> None:
    record = transaction.on_interrupted(launched(TERMINAL_ERROR), now=T0)
    assert (record.category, record.last_category) == (Category.RBAC, Category.RBAC)


# -- reenter --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "record",
    [_done(), transaction.on_reconciled(launched(), found(), now=T0)],
    ids=["adopted", "submitted"],
)
def test_reenter_found_record_unchanged(record: TransactionRecord) -> None:
    assert transaction.reenter(record, now=T0 + 999) is record


@pytest.mark.parametrize(
    "record",
    [
        transaction.on_readiness(at_readiness(), Evidence.TRANSIENT_UNAVAILABLE, now=T0),
        transaction.on_interrupted(at_launch(), now=T0),
        transaction.on_reconciled(fresh(), UNAVAILABLE, now=T0),
        at_readiness(),
    ],
    ids=[
        "readiness-blocked",
        "interrupted-before-launch",
        "initial-unavailable",
        "crash-in-readiness",
    ],
)
def test_reenter_never_launched_fresh_start(record: TransactionRecord) -> None:
    again = transaction.reenter(record, now=T0 + 500)
    assert (again.phase, again.state, again.recovery_decision, again.finished_at) == (
        Phase.START,
        LaunchState.PENDING,
        RecoveryDecision.NONE,
        None,
    )
    assert again.deadline == T0 + 500 + backoff.RECOVERY_DEADLINE
    assert transaction.next_action(again) == Action(ActionKind.RECONCILE)


@pytest.mark.parametrize(
    ("record", "accepted", "last_category"),
    [
        (intent(), False, Category.INTERRUPTED),
        (launched(), True, Category.INTERRUPTED),
        (launched(TERMINAL_ERROR), False, Category.RBAC),
        (launched(TRANSIENT_ERROR), False, Category.KUBERNETES_TRANSPORT),
        (at_backoff(), False, Category.KUBERNETES_TRANSPORT),
        (transaction.on_reconciled(launched(), UNAVAILABLE, now=T0), True, Category.NONE),
        (transaction.on_interrupted(launched(), now=T0), True, Category.INTERRUPTED),
        (transaction.on_interrupted(at_backoff(), now=T0), False, Category.KUBERNETES_TRANSPORT),
        (
            transaction.on_reconciled(
                settled(RequestCheck(RequestState.NONE_ACTIVE), TERMINAL_ERROR), ABSENT, now=T0
            ),
            False,
            Category.RBAC,
        ),
    ],
    ids=[
        "crash-after-intent",
        "crash-after-accept",
        "crash-after-terminal-error",
        "crash-after-transient-error",
        "crash-in-backoff",
        "indeterminate-accepted",
        "interrupted-in-flight",
        "interrupted-verified-absent",
        "terminal-failure",
    ],
)
def test_reenter_launched_record_reconciles_unsettled(
    record: TransactionRecord, accepted: bool, last_category: Category
) -> None:
    again = transaction.reenter(replace(record, retries=2), now=T0 + 500)
    assert (again.phase, again.state, again.request_settled, again.outcome_pending) == (
        Phase.RECONCILE_AFTER_LAUNCH,
        LaunchState.LAUNCHING,
        False,
        False,
    )
    assert (again.accepted, again.last_category, again.retries) == (accepted, last_category, 2)
    assert again.launch_sequence == record.launch_sequence
    assert (again.deadline, again.finished_at, again.existence) == (
        T0 + 500 + backoff.RECOVERY_DEADLINE,
        None,
        Existence.INDETERMINATE,
    )


def test_reenter_crash_allows_exactly_one_relaunch() -> None:
    record = transaction.reenter(intent(), now=T0 + 100)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 100)
    assert transaction.next_action(record) == Action(ActionKind.CHECK_REQUEST, request_id=None)
    record = transaction.on_request(record, RequestCheck(RequestState.NONE_ACTIVE), now=T0 + 101)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 102)
    assert (record.phase, record.recovery_decision) == (
        Phase.BACKOFF,
        RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
    )
    record = transaction.on_slept(record, now=T0 + 104)
    record = transaction.on_readiness(record, Evidence.READY, now=T0 + 104)
    record = transaction.on_launch_intent(record, now=T0 + 104)
    record = transaction.on_launched(
        record, LaunchOutcome(accepted=False, error="mystery"), now=T0 + 105
    )
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 106)
    record = transaction.on_request(record, RequestCheck(RequestState.NONE_ACTIVE), now=T0 + 107)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 108)
    assert (record.state, record.recovery_decision) == (
        LaunchState.TERMINAL_FAILURE,
        RecoveryDecision.VERIFIED_ABSENT_NO_RETRY,
    )
    assert record.launch_sequence == 2


def test_reenter_crash_after_accept_checks_request_by_id() -> None:
    record = transaction.reenter(launched(), now=T0 + 100)
    record = transaction.on_reconciled(record, ABSENT, now=T0 + 100)
    assert transaction.next_action(record) == Action(ActionKind.CHECK_REQUEST, request_id="req-1")


# -- remedy_for -----------------------------------------------------------------------------------
RESUME_REMEDY = f"rerun the identical command with --resume-run: {RESUME}; never pick a new run id and never cancel by name"


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (transaction.on_reconciled(launched(), UNAVAILABLE, now=T0), RESUME_REMEDY),
        (
            transaction.on_readiness(at_readiness(), Evidence.TRANSIENT_UNAVAILABLE, now=T0),
            RESUME_REMEDY,
        ),
        (transaction.on_interrupted(at_backoff(), now=T0), RESUME_REMEDY),
        (_done(), ""),
        (transaction.on_reconciled(launched(), found(), now=T0), ""),
        (fresh(), ""),
    ],
    ids=["indeterminate", "transient", "interrupted", "adopted", "submitted", "unfinished"],
)
def test_remedy_for_state_expected_text(record: TransactionRecord, expected: str) -> None:
    assert transaction.remedy_for(record, RESUME) == expected


@pytest.mark.parametrize(
    "category",
    [
        Category.AUTH,
        Category.RBAC,
        Category.CONTEXT,
        Category.IDENTITY,
        Category.CERTIFICATE,
        Category.CONFIG,
        Category.CAPACITY,
        Category.WORKLOAD,
        Category.SCHEMA,
        Category.UNKNOWN,
    ],
    ids=str,
)
def test_remedy_for_terminal_failure_names_category(category: Category) -> None:
    record = transaction.on_readiness(at_readiness(), Evidence.TERMINAL, category=category, now=T0)
    remedy = transaction.remedy_for(record, RESUME)
    assert remedy.startswith(f"{category.value} failure: ")
    assert remedy.endswith(f"then rerun: {RESUME}")
