"""The pure liveness rule: heartbeats, one stale warning per stall, resumption."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs.liveness import Liveness, Observation, Signal, observe

BEAT, STALE = 60.0, 300.0


def _run(ticks: list[tuple[float, str | None, tuple[str, ...]]]) -> list[tuple[float, Signal]]:
    state = Liveness()
    seen: list[tuple[float, Signal]] = []
    for now, status, fingerprint in ticks:
        state, signals = observe(
            state, Observation(now, status, fingerprint), heartbeat_seconds=BEAT, stale_after=STALE
        )
        seen += [(now, s) for s in signals]
    return seen


def _same(
    status: str, until: float, every: float = 30.0
) -> list[tuple[float, str, tuple[str, ...]]]:
    return [(t * every, status, (status,)) for t in range(int(until // every) + 1)]


def test_observe_first_tick_beats_then_every_heartbeat_seconds() -> None:
    seen = _run([(t * 30.0, "RUNNING", (f"RUNNING {t}",)) for t in range(5)])
    assert seen == [(0.0, Signal.HEARTBEAT), (60.0, Signal.HEARTBEAT), (120.0, Signal.HEARTBEAT)]


def test_observe_unchanged_pending_warns_once_at_the_threshold() -> None:
    seen = _run(_same("PENDING", 900.0))
    stale = [t for t, s in seen if s is Signal.STALE_PROGRESS]
    assert stale == [300.0]


def test_observe_progress_resumes_then_stalls_again_warns_twice() -> None:
    ticks = _same("PENDING", 330.0) + [
        (360.0 + t * 30.0, "RUNNING", ("RUNNING",)) for t in range(12)
    ]
    seen = [(t, s) for t, s in _run(ticks) if s is not Signal.HEARTBEAT]
    assert seen == [
        (300.0, Signal.STALE_PROGRESS),
        (360.0, Signal.PROGRESS_RESUMED),
        (660.0, Signal.STALE_PROGRESS),
    ]


@pytest.mark.parametrize(
    "status",
    ["SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"],
    ids=["succeeded", "failed", "cancelling", "cancelled"],
)
def test_observe_inactive_status_never_warns(status: str) -> None:
    assert all(s is Signal.HEARTBEAT for _, s in _run(_same(status, 900.0)))


def test_observe_unreadable_ticks_neither_progress_nor_stall_but_still_beat() -> None:
    ticks = [(0.0, "PENDING", ("PENDING",))] + [(t * 30.0, None, ()) for t in range(1, 12)]
    seen = _run(ticks)
    assert Signal.STALE_PROGRESS not in [s for _, s in seen]
    assert [t for t, s in seen if s is Signal.HEARTBEAT] == [0.0, 60.0, 120.0, 180.0, 240.0, 300.0]
    # the first readable tick after the outage judges the whole stall
    state = Liveness(fingerprint=("PENDING",), since=0.0, last_heartbeat=300.0)
    _, signals = observe(
        state,
        Observation(330.0, "PENDING", ("PENDING",)),
        heartbeat_seconds=BEAT,
        stale_after=STALE,
    )
    assert signals == (Signal.STALE_PROGRESS,)


def test_observe_zero_settings_turn_both_off() -> None:
    state = Liveness()
    for t in range(40):
        state, signals = observe(
            state, Observation(t * 30.0, "PENDING", ("x",)), heartbeat_seconds=0, stale_after=0
        )
        assert signals == ()


def test_observe_a_changed_blocker_is_progress() -> None:
    ticks = [(t * 30.0, "PENDING", ("PENDING", "IMAGE_PULL_FAILED")) for t in range(6)] + [
        (t * 30.0, "PENDING", ("PENDING", "CAPACITY_OR_QUOTA")) for t in range(6, 18)
    ]
    stale = [t for t, s in _run(ticks) if s is Signal.STALE_PROGRESS]
    assert stale == [180.0 + 300.0]


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=120.0),
            st.sampled_from([None, "PENDING", "RUNNING", "SUCCEEDED"]),
            st.sampled_from([(), ("a",), ("b",)]),
        ),
        max_size=60,
    )
)
def test_observe_never_warns_twice_without_progress_in_between(
    steps: list[tuple[float, str | None, tuple[str, ...]]],
) -> None:
    now, state = 0.0, Liveness()
    stale_open = False
    for gap, status, fingerprint in steps:
        now += gap
        state, signals = observe(
            state, Observation(now, status, fingerprint), heartbeat_seconds=BEAT, stale_after=STALE
        )
        for signal in signals:
            if signal is Signal.STALE_PROGRESS:
                assert not stale_open
                stale_open = True
            if signal is Signal.PROGRESS_RESUMED:
                assert stale_open
                stale_open = False
        assert state.stale == stale_open
