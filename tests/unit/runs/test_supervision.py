"""The pure watch decision: terminal statuses, unreadable queues, blocker grace periods."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs.supervision import Tick, Verdict, WatchPolicy, WatchState, decide

POLICY = WatchPolicy(permanent_grace=60.0, infrastructure_grace=600.0, max_wait=3600.0)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ("SUCCEEDED", Verdict.SUCCEEDED),
        ("FAILED", Verdict.PAYLOAD_FAILED),
        ("FAILED_SETUP", Verdict.PAYLOAD_FAILED),
        ("FAILED_NO_RESOURCE", Verdict.INFRASTRUCTURE_FAILED),
        ("FAILED_CONTROLLER", Verdict.INFRASTRUCTURE_FAILED),
        ("CANCELLED", Verdict.FAILED),
        ("FAILED_PRECHECKS", Verdict.FAILED),
        ("RUNNING", Verdict.WAIT),
        ("CANCELLING", Verdict.WAIT),
    ],
    ids=lambda v: str(v),
)
def test_decide_terminal_status_maps_to_its_budget(status: str, verdict: Verdict) -> None:
    _, got = decide(WatchState.begin(0.0), Tick(1.0, status), POLICY)
    assert got is verdict


def test_decide_sixth_unreadable_tick_ends_the_watch() -> None:
    state = WatchState.begin(0.0)
    verdicts = []
    for t in range(6):
        state, verdict = decide(state, Tick(float(t), None), POLICY)
        verdicts.append(verdict)
    assert verdicts == [Verdict.WAIT] * 5 + [Verdict.UNREADABLE]


def test_decide_readable_tick_resets_the_unreadable_count() -> None:
    state = WatchState.begin(0.0)
    for t in range(5):
        state, _ = decide(state, Tick(float(t), None), POLICY)
    state, _ = decide(state, Tick(5.0, "RUNNING"), POLICY)
    state, verdict = decide(state, Tick(6.0, None), POLICY)
    assert verdict is Verdict.WAIT


def test_decide_permanent_blocker_acts_only_after_grace() -> None:
    state = WatchState.begin(0.0)
    state, first = decide(state, Tick(0.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    state, early = decide(state, Tick(59.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    state, late = decide(state, Tick(60.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    assert (first, early, late) == (Verdict.WAIT, Verdict.WAIT, Verdict.PERMANENT_BLOCKER)


def test_decide_brief_image_pull_hiccup_then_running_never_acts() -> None:
    state = WatchState.begin(0.0)
    state, _ = decide(state, Tick(0.0, "PENDING", "IMAGE_PULL_FAILED", "permanent"), POLICY)
    state, _ = decide(state, Tick(30.0, "RUNNING"), POLICY)
    state, verdict = decide(state, Tick(90.0, "PENDING", "IMAGE_PULL_FAILED", "permanent"), POLICY)
    assert verdict is Verdict.WAIT  # the clock restarted when the blocker went away


def test_decide_transient_blocker_expires_after_infrastructure_grace() -> None:
    state = WatchState.begin(0.0)
    state, _ = decide(state, Tick(0.0, "PENDING", "CAPACITY_OR_QUOTA", "transient"), POLICY)
    state, verdict = decide(state, Tick(600.0, "PENDING", "CAPACITY_OR_QUOTA", "transient"), POLICY)
    assert verdict is Verdict.TRANSIENT_EXPIRED


def test_decide_past_max_wait_times_out() -> None:
    _, verdict = decide(WatchState.begin(0.0), Tick(3600.0, "RUNNING"), POLICY)
    assert verdict is Verdict.TIMEOUT


CODES = st.sampled_from(
    [
        (None, None),
        ("IMAGE_PULL_AUTH", "permanent"),
        ("IMAGE_NOT_FOUND", "permanent"),
        ("CAPACITY_OR_QUOTA", "transient"),
        ("NODE_NOT_READY", "transient"),
        ("PENDING_UNKNOWN", "unknown"),
        ("CONTAINER_CRASH", "payload"),
    ]
)
TICKS = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=120.0),
        st.sampled_from([None, "PENDING", "STARTING", "RUNNING"]),
        CODES,
    ),
    max_size=40,
)


@given(TICKS)
def test_decide_acts_only_on_evidence_held_for_its_grace(ticks: list) -> None:  # type: ignore[type-arg]
    state = WatchState.begin(0.0)
    now = 0.0
    seen: list[tuple[float, str | None, str | None]] = []
    for step, status, (code, klass) in ticks:
        now += step
        state, verdict = decide(state, Tick(now, status, code, klass), POLICY)
        if status is not None:  # an unreadable tick neither shows nor clears a blocker
            seen.append((now, code if status in ("PENDING", "STARTING") else None, klass))
        if verdict in (Verdict.PERMANENT_BLOCKER, Verdict.TRANSIENT_EXPIRED):
            grace = (
                POLICY.permanent_grace
                if verdict is Verdict.PERMANENT_BLOCKER
                else POLICY.infrastructure_grace
            )
            # the same code was observed continuously for at least the grace period
            run = [t for t, c, _ in reversed(seen)]
            codes = [c for _, c, _ in reversed(seen)]
            held_since = now
            for t, c in zip(run, codes, strict=True):
                if c != code:
                    break
                held_since = t
            assert now - held_since >= grace
            assert klass == ("permanent" if verdict is Verdict.PERMANENT_BLOCKER else "transient")
            break
        assert verdict in (Verdict.WAIT, Verdict.UNREADABLE, Verdict.TIMEOUT)
        if verdict is not Verdict.WAIT:
            break
