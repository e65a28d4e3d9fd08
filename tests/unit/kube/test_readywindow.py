"""The pure readiness window (kube.readywindow): tables and properties."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from npa_infra.errors import InvariantError
from npa_infra.kube.readywindow import Answer, Reason, decide, proving_tail, streak
from tests.strategies import readiness_answers

OK, BAD = True, False


def _answers(*pairs: tuple[float, bool]) -> list[Answer]:
    return [Answer(at, ok) for at, ok in pairs]


@pytest.mark.parametrize(
    ("pairs", "now", "proven", "reason", "due"),
    [
        ((), 3.0, False, Reason.NO_SAMPLES, 3.0),
        (((0.0, OK),), 0.1, False, Reason.TOO_FEW, 5.0),
        # the third sample is paced so the streak spans the window between answers
        (((0.18, OK), (5.0, OK)), 5.1, False, Reason.TOO_FEW, 10.18),
        (((0.18, OK), (5.0, OK), (10.0, OK)), 10.0, False, Reason.TOO_SHORT, 15.0),
        (((0.0, OK), (5.0, OK), (10.0, OK)), 10.0, True, Reason.PROVEN, 15.0),
        (((0.0, OK), (5.0, OK), (10.0, OK)), 15.0, True, Reason.PROVEN, 15.0),
        # the latest success older than one interval is stale: one fresh sample now
        (((0.0, OK), (5.0, OK), (10.0, OK)), 15.001, False, Reason.STALE, 15.001),
        (((0.0, OK), (5.0, OK), (10.0, BAD)), 10.5, False, Reason.LAST_FAILED, 15.0),
        # a failure resets the window: the streak after it starts again
        (((0.0, OK), (5.0, BAD), (10.0, OK), (15.0, OK)), 15.0, False, Reason.TOO_FEW, 20.0),
        (
            ((0.0, OK), (5.0, BAD), (10.0, OK), (15.0, OK), (20.0, OK)),
            20.0,
            True,
            Reason.PROVEN,
            25.0,
        ),
        # a gap longer than one interval plus one sample timeout breaks the streak
        (((0.0, OK), (5.0, OK), (20.001, OK)), 20.1, False, Reason.TOO_FEW, 25.001),
        (((0.0, OK), (5.0, OK), (20.0, OK)), 20.0, True, Reason.PROVEN, 25.0),
        # a long streak stays proven with each fresh sample
        (tuple((5.0 * i, OK) for i in range(10)), 45.5, True, Reason.PROVEN, 50.0),
    ],
    ids=[
        "none",
        "one",
        "two-paced",
        "three-under-10s",
        "three-over-10s",
        "fresh-at-interval",
        "stale",
        "last-failed",
        "reset-then-two",
        "reset-then-three",
        "gap-breaks",
        "gap-at-limit",
        "long-streak",
    ],
)
def test_decide_table_verdict_reason_and_due(
    pairs: tuple[tuple[float, bool], ...], now: float, proven: bool, reason: Reason, due: float
) -> None:
    decision = decide(_answers(*pairs), now=now)
    assert (decision.proven, decision.reason) == (proven, reason)
    assert decision.due == pytest.approx(due)


def test_decide_answer_after_now_raises_invariant() -> None:
    with pytest.raises(InvariantError):
        decide(_answers((10.0, OK)), now=9.0)


def test_decide_answers_out_of_order_raise_invariant() -> None:
    with pytest.raises(InvariantError):
        decide(_answers((10.0, OK), (9.0, OK)), now=11.0)


def _proven_by_rule(answers: list[Answer], now: float) -> bool:
    """The rule restated: 3 consecutive successes ending at the latest answer, spanning
    >= 10 s between answers, no gap over 15 s among them, the latest within 5 s of now."""
    if not answers or not answers[-1].ok or now - answers[-1].at > 5.0:
        return False
    run = [answers[-1]]
    for answer in reversed(answers[:-1]):
        if not answer.ok or run[-1].at - answer.at > 15.0:
            break
        run.append(answer)
    return len(run) >= 3 and run[0].at - run[-1].at >= 10.0


@given(readiness_answers())
@example((_answers((0.18, OK), (5.0, OK), (10.0, OK)), 10.0))
@example((_answers((0.0, OK), (5.0, OK), (10.0, BAD), (10.0, OK)), 10.0))
def test_decide_proven_only_with_three_fresh_consecutive_successes_over_window(
    case: tuple[list[Answer], float],
) -> None:
    answers, now = case
    decision = decide(answers, now=now)
    assert decision.proven == _proven_by_rule(answers, now)
    if decision.proven:
        run = streak(answers, max_gap=15.0)
        assert len(run) >= 3 and run[-1].at - run[0].at >= 10.0
        assert all(a.ok for a in run) and run[-1] == answers[-1]


@given(readiness_answers())
def test_decide_due_never_before_last_answer_unless_sample_now(
    case: tuple[list[Answer], float],
) -> None:
    answers, now = case
    decision = decide(answers, now=now)
    if decision.reason in (Reason.NO_SAMPLES, Reason.STALE):
        assert decision.due == now
    else:
        assert answers and decision.due >= answers[-1].at + 5.0


@pytest.mark.parametrize(
    ("ats", "expected"),
    [
        ([], 0),
        ([0.0, 5.0, 10.0], 3),
        ([0.0, 5.0, 10.0, 15.0, 20.0], 3),
        ([0.0, 4.0, 8.0, 12.0], 4),  # three span 8 s: the fourth is needed
        ([0.0, 1.0], 2),  # nothing shorter proves it: all of them
    ],
)
def test_proving_tail_is_the_fewest_latest_answers_spanning_the_window(
    ats: list[float], expected: int
) -> None:
    assert proving_tail(ats, successes=3, window=10.0) == expected


@given(readiness_answers())
@example(([Answer(t, True) for t in (0.0, 4.0, 8.0, 12.0, 16.0, 20.0)], 20.0))
def test_proving_tail_of_a_proven_streak_still_proves_it(drawn: tuple[list[Answer], float]) -> None:
    answers, _ = drawn
    run = streak(answers, max_gap=15.0)
    decision = decide(run, now=run[-1].at if run else 0.0)
    if not decision.proven:
        return
    count = proving_tail([a.at for a in run])
    tail = run[len(run) - count :]
    assert 3 <= count <= len(run)
    assert decide(tail, now=tail[-1].at).proven
    if count > 3:  # one fewer would not span the window
        assert tail[-1].at - tail[1].at < 10.0
