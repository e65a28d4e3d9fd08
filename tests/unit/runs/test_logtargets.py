"""``runs.logtargets``: which attempts ``workflow logs`` reads, and what an answer proves."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import logtargets
from npa_infra.runs.logtargets import AttemptRef, ReadState, Verdict
from tests.strategies import attempt_refs

# wave 0 relaunched once (attempt 2 adopted job 3), wave 1 never reconciled its id
RUN = (
    AttemptRef(0, 1, "r-00", 1),
    AttemptRef(1, 1, "r-01", None),
    AttemptRef(0, 2, "r-00-a2", 3),
)


@pytest.mark.parametrize(
    ("wave", "attempt", "verdict", "picked"),
    [
        (None, None, Verdict.SELECTED, [(0, 2), (1, 1)]),
        (0, None, Verdict.SELECTED, [(0, 2)]),
        (0, 1, Verdict.SELECTED, [(0, 1)]),
        (None, 1, Verdict.SELECTED, [(0, 1), (1, 1)]),
        (None, 2, Verdict.SELECTED, [(0, 2)]),
        (1, 1, Verdict.SELECTED, [(1, 1)]),
        (7, None, Verdict.NO_SUCH_WAVE, []),
        (1, 2, Verdict.NO_SUCH_ATTEMPT, []),
        (None, 9, Verdict.NO_SUCH_ATTEMPT, []),
    ],
    ids=[
        "default-latest-each",
        "wave",
        "wave-attempt",
        "attempt-every-wave",
        "attempt-only-where-it-exists",
        "unadopted-still-selected",
        "unknown-wave",
        "unknown-attempt-of-wave",
        "unknown-attempt",
    ],
)
def test_select_table_picks_exact_attempts(
    wave: int | None, attempt: int | None, verdict: Verdict, picked: list[tuple[int, int]]
) -> None:
    chosen = logtargets.select(RUN, wave=wave, attempt=attempt)
    assert chosen.verdict is verdict
    assert [(t.wave, t.attempt) for t in chosen.targets] == picked
    assert chosen.selected == (verdict is Verdict.SELECTED)
    if not chosen.selected:
        assert chosen.detail


def test_select_no_attempts_is_nothing_launched() -> None:
    chosen = logtargets.select((), wave=0, attempt=1)
    assert (chosen.verdict, chosen.targets) == (Verdict.NOTHING_LAUNCHED, ())


def test_select_unadopted_attempt_keeps_no_job_id_never_a_name() -> None:
    [target] = logtargets.select(RUN, wave=1).targets
    assert (target.job_id, target.job_name) == (None, "r-01")


@given(attempt_refs(), st.none() | st.integers(-1, 5), st.none() | st.integers(0, 4))
def test_select_property_total_exact_and_ordered(
    refs: list[AttemptRef], wave: int | None, attempt: int | None
) -> None:
    chosen = logtargets.select(refs, wave=wave, attempt=attempt)
    # total: always a verdict, targets only when selected
    assert chosen.selected == bool(chosen.targets)
    keys = [(t.wave, t.attempt) for t in chosen.targets]
    assert keys == sorted(set(keys))  # by wave then attempt, no duplicate
    for target in chosen.targets:
        assert target in refs  # the journal's own attempt, id and all: nothing invented
        assert wave is None or target.wave == wave
        assert attempt is None or target.attempt == attempt
    if chosen.selected and attempt is None:  # the latest attempt of each selected wave
        waves = {r.wave for r in refs if wave is None or r.wave == wave}
        latest = {w: max(r.attempt for r in refs if r.wave == w) for w in waves}
        assert dict(keys) == latest
    if not refs:
        assert chosen.verdict is Verdict.NOTHING_LAUNCHED


@pytest.mark.parametrize(
    ("code", "follow", "timed_out", "state"),
    [
        (0, False, False, ReadState.READ),
        (1, False, False, ReadState.UNREADABLE),
        (100, False, False, ReadState.UNREADABLE),
        (0, False, True, ReadState.UNREADABLE),
        (0, True, False, ReadState.READ),
        (100, True, False, ReadState.READ),
        (101, True, False, ReadState.READ),
        (103, True, False, ReadState.READ),
        (102, True, False, ReadState.UNREADABLE),
        (1, True, False, ReadState.UNREADABLE),
        (None, True, False, ReadState.UNREADABLE),
    ],
    ids=[
        "no-follow-ok",
        "no-follow-error",
        "no-follow-odd-code",
        "timed-out",
        "follow-succeeded",
        "follow-failed-job",
        "follow-not-finished",
        "follow-cancelled-job",
        "follow-not-found",
        "follow-error",
        "no-code",
    ],
)
def test_read_state_table_follows_0_12_exit_codes(
    code: int | None, follow: bool, timed_out: bool, state: ReadState
) -> None:
    assert logtargets.read_state(code, follow=follow, timed_out=timed_out) is state
