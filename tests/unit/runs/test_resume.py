"""The pure decision for an attempt npa set out to cancel (runs.resume): one row per rule,
and properties over every intent × observation (faults.md invariants 3 and 4)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.runs import resume
from npa_infra.runs.resume import Action, CancelIntent, CancelReason, JobObservation, Rule
from npa_infra.runs.supervision import Verdict
from tests.strategies import JOB_STATUSES, cancel_intents, job_observations

BUDGET = "infrastructure_recoveries_left"
LIVE = ("PENDING", "SUBMITTED", "STARTING", "RUNNING", "RECOVERING", "WINDING_DOWN")
ENDED = (
    "CANCELLED",
    "FAILED",
    "FAILED_SETUP",
    "FAILED_PRECHECKS",
    "FAILED_NO_RESOURCE",
    "FAILED_CONTROLLER",
)


def intent(
    reason: CancelReason = CancelReason.TRANSIENT_RECOVERY, *, spent: bool = False
) -> CancelIntent:
    return CancelIntent(
        job_id=7,
        wave=0,
        attempt=1,
        reason=reason,
        code="INSUFFICIENT_CPU" if reason.relaunches else "IMAGE_PULL_AUTH",
        budget=BUDGET if reason.relaunches else None,
        spent=spent,
    )


@pytest.mark.parametrize(
    ("given_intent", "observation", "sent", "action", "rule"),
    [
        (intent(), JobObservation.unknown(), False, Action.BLOCK_UNKNOWN, Rule.UNKNOWN_WITH_INTENT),
        (None, JobObservation.unknown(), False, Action.SUPERVISE, Rule.UNKNOWN_WITHOUT_INTENT),
        (
            intent(),
            JobObservation(resume.Presence.PRESENT, None),
            False,
            Action.BLOCK_UNKNOWN,
            Rule.UNKNOWN_WITH_INTENT,
        ),
        (
            None,
            JobObservation.present("CANCELLED"),
            False,
            Action.CANCELLED_BY_OPERATOR,
            Rule.FOREIGN_CANCEL,
        ),
        (
            None,
            JobObservation.present("CANCELLING"),
            False,
            Action.CANCELLED_BY_OPERATOR,
            Rule.FOREIGN_CANCEL,
        ),
        (None, JobObservation.present("PENDING"), False, Action.SUPERVISE, Rule.NO_INTENT),
        (None, JobObservation.absent(), False, Action.SUPERVISE, Rule.NO_INTENT),
        (
            intent(),
            JobObservation.present("SUCCEEDED"),
            False,
            Action.SUPERVISE,
            Rule.SUCCEEDED_ON_ITS_OWN,
        ),
        (
            intent(),
            JobObservation.present("PENDING"),
            False,
            Action.SEND_CANCEL,
            Rule.CANCEL_NOT_SENT,
        ),
        (
            intent(CancelReason.INFRASTRUCTURE_RECOVERY),
            JobObservation.present("FAILED_NO_RESOURCE"),
            False,
            Action.SEND_CANCEL,
            Rule.CANCEL_NOT_SENT,
        ),
        (
            intent(),
            JobObservation.present("PENDING"),
            True,
            Action.WAIT_FOR_CANCEL,
            Rule.CANCEL_IN_PROGRESS,
        ),
        (
            intent(),
            JobObservation.present("CANCELLING"),
            False,
            Action.WAIT_FOR_CANCEL,
            Rule.CANCEL_IN_PROGRESS,
        ),
        (
            intent(),
            JobObservation.present("CANCELLED"),
            False,
            Action.CONTINUE_RECOVERY,
            Rule.CANCEL_PROVEN,
        ),
        (intent(), JobObservation.absent(), False, Action.CONTINUE_RECOVERY, Rule.CANCEL_PROVEN),
        (
            intent(CancelReason.PERMANENT_BLOCKER),
            JobObservation.present("CANCELLED"),
            False,
            Action.FAIL_WITH_CODE,
            Rule.CANCEL_PROVEN,
        ),
        (
            intent(CancelReason.BUDGET_EXHAUSTED),
            JobObservation.present("FAILED_NO_RESOURCE"),
            True,
            Action.FAIL_WITH_CODE,
            Rule.CANCEL_PROVEN,
        ),
    ],
    ids=[
        "intent-unknown-blocks",
        "no-intent-unknown-supervises",
        "intent-present-without-status-blocks",
        "no-intent-cancelled-is-an-operator",
        "no-intent-cancelling-is-an-operator",
        "no-intent-live-supervises",
        "no-intent-absent-supervises",
        "intent-succeeded-stands",
        "intent-live-unsent-sends",
        "intent-ended-unsent-sends-by-exact-id",
        "intent-live-sent-waits",
        "intent-cancelling-waits",
        "intent-cancelled-continues-recovery",
        "intent-absent-continues-recovery",
        "permanent-cancelled-fails-with-code",
        "exhausted-ended-fails-with-code",
    ],
)
def test_decide_each_rule_gives_its_action(
    given_intent: CancelIntent | None,
    observation: JobObservation,
    sent: bool,
    action: Action,
    rule: Rule,
) -> None:
    decision = resume.decide(given_intent, observation, sent=sent)
    assert (decision.action, decision.rule) == (action, rule)


def test_decide_unspent_recovery_spends_its_budget_once() -> None:
    first = resume.decide(intent(), JobObservation.present("CANCELLED"))
    again = resume.decide(intent(spent=True), JobObservation.present("CANCELLED"))
    assert first.spend == BUDGET
    assert again.action is Action.CONTINUE_RECOVERY and again.spend is None


def test_decide_permanent_stop_fails_with_the_recorded_code_and_spends_nothing() -> None:
    decision = resume.decide(intent(CancelReason.PERMANENT_BLOCKER), JobObservation.absent())
    assert decision.code == "IMAGE_PULL_AUTH" and decision.spend is None


@pytest.mark.parametrize(
    ("verdict", "left", "reason"),
    [
        (Verdict.PERMANENT_BLOCKER, 1, CancelReason.PERMANENT_BLOCKER),
        (Verdict.PERMANENT_BLOCKER, 0, CancelReason.PERMANENT_BLOCKER),
        (Verdict.TRANSIENT_EXPIRED, 1, CancelReason.TRANSIENT_RECOVERY),
        (Verdict.TRANSIENT_EXPIRED, 0, CancelReason.BUDGET_EXHAUSTED),
        (Verdict.INFRASTRUCTURE_FAILED, 2, CancelReason.INFRASTRUCTURE_RECOVERY),
        (Verdict.INFRASTRUCTURE_FAILED, 0, None),
        (Verdict.PAYLOAD_FAILED, 1, None),
        (Verdict.FAILED, 1, None),
        (Verdict.TIMEOUT, 1, None),
        (Verdict.UNREADABLE, 1, None),
    ],
    ids=[
        "permanent",
        "permanent-without-budget",
        "transient",
        "transient-exhausted-still-cancels",
        "infrastructure",
        "infrastructure-exhausted-cancels-nothing",
        "payload",
        "cancelled",
        "timeout-leaves-it-running",
        "unreadable-leaves-it-running",
    ],
)
def test_reason_for_each_verdict_names_its_cancel(
    verdict: Verdict, left: int, reason: CancelReason | None
) -> None:
    assert resume.reason_for(verdict, left) is reason


def test_cancel_intent_journal_round_trip_is_exact() -> None:
    written = intent(CancelReason.PERMANENT_BLOCKER).model_copy(
        update={"blocker": {"code": "IMAGE_PULL_AUTH", "message": "401"}}
    )
    assert CancelIntent.from_json(written.to_json()) == written
    assert CancelIntent.from_json(None) is None


_DEFINITE = (Action.CONTINUE_RECOVERY, Action.FAIL_WITH_CODE, Action.CANCELLED_BY_OPERATOR)


@given(cancel_intents(), job_observations(), st.booleans())
@example(intent(), JobObservation.unknown(), True)
def test_decide_unknown_never_relaunches_fails_or_spends(
    given_intent: CancelIntent | None, observation: JobObservation, sent: bool
) -> None:
    decision = resume.decide(given_intent, observation, sent=sent)
    unknown = observation.presence is resume.Presence.UNKNOWN or (
        observation.presence is resume.Presence.PRESENT and observation.status is None
    )
    if unknown:
        assert decision.action in (Action.BLOCK_UNKNOWN, Action.SUPERVISE)
        assert decision.spend is None and decision.code is None
    if decision.spend is not None:  # only a proven recovery spends, and only once
        assert decision.action is Action.CONTINUE_RECOVERY
        assert given_intent is not None and not given_intent.spent


@given(cancel_intents(), job_observations(), st.booleans())
def test_decide_our_own_recovery_cancel_never_fails_the_run(
    given_intent: CancelIntent | None, observation: JobObservation, sent: bool
) -> None:
    decision = resume.decide(given_intent, observation, sent=sent)
    if given_intent is not None:  # faults.md invariant 3: npa's own cancel is never "someone's"
        assert decision.action is not Action.CANCELLED_BY_OPERATOR
        if given_intent.reason.relaunches:
            assert decision.action is not Action.FAIL_WITH_CODE
    else:
        assert decision.action not in (Action.SEND_CANCEL, *_DEFINITE[:2])
    if sent:  # a cancel this process sent is never sent again
        assert decision.action is not Action.SEND_CANCEL


@given(st.sampled_from(JOB_STATUSES))
def test_decide_recovery_cancel_seen_ended_continues_never_sends_twice(status: str) -> None:
    decision = resume.decide(intent(), JobObservation.present(status), sent=True)
    if status in ENDED:
        assert decision.action is Action.CONTINUE_RECOVERY
    elif status in LIVE or status == "CANCELLING":
        assert decision.action is Action.WAIT_FOR_CANCEL
    else:
        assert decision.action is Action.SUPERVISE and status == "SUCCEEDED"
