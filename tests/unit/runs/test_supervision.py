"""The pure watch decision: terminal statuses, unreadable queues, blocker grace periods,
and a job missing from queue answers (unknown until confirmed over the window and by name)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.errors import InvariantError
from npa_infra.runs import supervision
from npa_infra.runs.models import Reconciliation, ReconciliationState
from npa_infra.runs.supervision import (
    Answer,
    Lookup,
    Presence,
    Recheck,
    Tick,
    Verdict,
    WatchPolicy,
    WatchState,
    decide,
)
from tests.strategies import missing_sequences

# a permanent window widened by --permanent-blocker-grace-seconds 60
POLICY = WatchPolicy(permanent_grace=60.0, infrastructure_grace=600.0, max_wait=3600.0)
GRACE = 600.0


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
    _, got = decide(WatchState.begin(0.0), Tick.seen(1.0, status), POLICY)
    assert got is verdict


def test_decide_sixth_unreadable_tick_ends_the_watch() -> None:
    state = WatchState.begin(0.0)
    verdicts = []
    for t in range(6):
        state, verdict = decide(state, Tick.unreadable(float(t)), POLICY)
        verdicts.append(verdict)
    assert verdicts == [Verdict.WAIT] * 5 + [Verdict.UNREADABLE]


def test_decide_readable_tick_resets_the_unreadable_count() -> None:
    state = WatchState.begin(0.0)
    for t in range(5):
        state, _ = decide(state, Tick.unreadable(float(t)), POLICY)
    state, _ = decide(state, Tick.seen(5.0, "RUNNING"), POLICY)
    state, verdict = decide(state, Tick.unreadable(6.0), POLICY)
    assert verdict is Verdict.WAIT


def test_decide_permanent_blocker_widened_grace_acts_only_after_it() -> None:
    state = WatchState.begin(0.0)
    state, first = decide(state, Tick.seen(0.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    state, early = decide(state, Tick.seen(59.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    state, late = decide(state, Tick.seen(60.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), POLICY)
    assert (first, early, late) == (Verdict.WAIT, Verdict.WAIT, Verdict.PERMANENT_BLOCKER)


def test_decide_permanent_blocker_default_acts_at_first_confirming_read() -> None:
    state = WatchState.begin(0.0)
    state, first = decide(state, Tick.seen(0.0, "RUNNING"), WatchPolicy())
    _, verdict = decide(
        state, Tick.seen(5.0, "PENDING", "IMAGE_PULL_AUTH", "permanent"), WatchPolicy()
    )
    assert (first, verdict) == (Verdict.WAIT, Verdict.PERMANENT_BLOCKER)


def test_decide_brief_image_pull_hiccup_then_running_never_acts() -> None:
    state = WatchState.begin(0.0)
    state, _ = decide(state, Tick.seen(0.0, "PENDING", "IMAGE_PULL_FAILED", "permanent"), POLICY)
    state, _ = decide(state, Tick.seen(30.0, "RUNNING"), POLICY)
    state, verdict = decide(
        state, Tick.seen(90.0, "PENDING", "IMAGE_PULL_FAILED", "permanent"), POLICY
    )
    assert verdict is Verdict.WAIT  # the clock restarted when the blocker went away


def test_decide_transient_blocker_expires_after_infrastructure_grace() -> None:
    state = WatchState.begin(0.0)
    state, _ = decide(state, Tick.seen(0.0, "PENDING", "CAPACITY_OR_QUOTA", "transient"), POLICY)
    state, verdict = decide(
        state, Tick.seen(600.0, "PENDING", "CAPACITY_OR_QUOTA", "transient"), POLICY
    )
    assert verdict is Verdict.TRANSIENT_EXPIRED


def test_decide_past_max_wait_times_out() -> None:
    _, verdict = decide(WatchState.begin(0.0), Tick.seen(3600.0, "RUNNING"), POLICY)
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


def _tick(now: float, status: str | None, code: str | None, klass: str | None) -> Tick:
    return Tick.unreadable(now) if status is None else Tick.seen(now, status, code, klass)


@given(TICKS)
def test_decide_acts_only_on_evidence_held_for_its_grace(ticks: list) -> None:  # type: ignore[type-arg]
    state = WatchState.begin(0.0)
    now = 0.0
    seen: list[tuple[float, str | None, str | None]] = []
    for step, status, (code, klass) in ticks:
        now += step
        state, verdict = decide(state, _tick(now, status, code, klass), POLICY)
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


# -- a job missing from queue answers (runtime-reference.md §1, faults.md) --------------------

UNBOUNDED = WatchPolicy(infrastructure_grace=GRACE, max_wait=0.0)


def _obs(step: tuple[float, str]) -> Tick | Lookup:
    """``(now, "RUNNING" | "absent" | "unknown" | "lookup:found|absent|unknown")``."""
    now, kind = step
    if kind == "absent":
        return Tick.missing(now)
    if kind == "unknown":
        return Tick.unreadable(now)
    if kind.startswith("lookup:"):
        return Lookup(now, Answer(kind.removeprefix("lookup:")))
    return Tick.seen(now, kind)


def _verdicts(steps: list[tuple[float, str]], policy: WatchPolicy = UNBOUNDED) -> list[Verdict]:
    state = WatchState.begin(0.0)
    out = []
    for step in steps:
        state, verdict = decide(state, _obs(step), policy)
        out.append(verdict)
    return out


W, C, F = Verdict.WAIT, Verdict.CONFIRM_MISSING, Verdict.INFRASTRUCTURE_FAILED


@pytest.mark.parametrize(
    ("steps", "verdicts"),
    [
        ([(0.0, "absent"), (30.0, "RUNNING")], [W, W]),
        ([(0.0, "absent"), (599.0, "absent")], [W, W]),
        ([(0.0, "absent"), (600.0, "absent"), (601.0, "lookup:absent")], [W, C, F]),
        (
            [(0.0, "absent"), (600.0, "absent"), (601.0, "lookup:found"), (630.0, "absent")],
            [W, C, W, W],
        ),
        (
            [(0.0, "absent"), (600.0, "absent"), (601.0, "lookup:unknown"), (630.0, "absent")],
            [W, C, W, C],
        ),
        ([(0.0, "absent"), (300.0, "RUNNING"), (400.0, "absent"), (900.0, "absent")], [W] * 4),
        ([(0.0, "absent"), (300.0, "unknown"), (600.0, "absent")], [W, W, C]),
        ([(0.0, "absent"), (700.0, "RUNNING"), (701.0, "absent")], [W, W, W]),
    ],
    ids=[
        "one-missing-read-then-present",
        "missing-short-of-the-window",
        "missing-over-the-window-and-by-name",
        "lookup-found-restarts-the-window",
        "lookup-unknown-asks-again",
        "present-read-restarts-the-window",
        "unreadable-read-neither-shows-nor-clears",
        "reappears-after-the-window",
    ],
)
def test_decide_missing_job_acts_only_over_the_window_and_by_name(
    steps: list[tuple[float, str]], verdicts: list[Verdict]
) -> None:
    assert _verdicts(steps) == verdicts


def test_decide_missing_job_never_acts_on_one_read_even_with_no_window() -> None:
    policy = WatchPolicy(infrastructure_grace=0.0, max_wait=0.0)

    assert _verdicts([(0.0, "absent"), (5.0, "absent")], policy) == [W, C]


def test_decide_confirmed_missing_job_is_failed_controller_with_its_evidence() -> None:
    state = WatchState.begin(0.0)
    for step in [(0.0, "RUNNING"), (10.0, "absent"), (610.0, "absent")]:
        state, _ = decide(state, _obs(step), UNBOUNDED)
    state, verdict = decide(state, Lookup(611.0, Answer.ABSENT), UNBOUNDED)

    assert verdict is Verdict.INFRASTRUCTURE_FAILED
    assert (state.last_status, state.evidence) == ("FAILED_CONTROLLER", "job_missing_from_queue")
    assert (state.missing_since, state.missing_reads) == (10.0, 2)


def test_decide_missing_job_reappearing_resets_the_count() -> None:
    state = WatchState.begin(0.0)
    for step in [(0.0, "absent"), (5.0, "absent"), (10.0, "RUNNING")]:
        state, _ = decide(state, _obs(step), UNBOUNDED)

    assert (state.missing_since, state.missing_reads, state.last_status) == (None, 0, "RUNNING")


@pytest.mark.parametrize(
    ("state", "observation"),
    [
        (WatchState.begin(0.0), Lookup(1.0, Answer.ABSENT)),
        (WatchState(0.0, missing_since=0.0, missing_reads=2, confirming=True), Tick.missing(1.0)),
    ],
    ids=["lookup-nobody-asked-for", "tick-while-a-lookup-is-owed"],
)
def test_decide_out_of_order_observation_raises_invariant_error(
    state: WatchState, observation: Tick | Lookup
) -> None:
    with pytest.raises(InvariantError):
        decide(state, observation, UNBOUNDED)


def test_tick_status_without_presence_raises_invariant_error() -> None:
    with pytest.raises(InvariantError):
        Tick(0.0, Presence.PRESENT)
    with pytest.raises(InvariantError):
        Tick(0.0, Presence.ABSENT, "RUNNING")


@pytest.mark.parametrize(
    ("found", "answer"),
    [
        (None, Answer.UNKNOWN),
        (Reconciliation(ReconciliationState.ABSENT), Answer.ABSENT),
        (Reconciliation(ReconciliationState.FOUND, job_ids=(7,)), Answer.FOUND),
        (Reconciliation(ReconciliationState.FOUND, job_ids=(8,)), Answer.UNKNOWN),
        (Reconciliation(ReconciliationState.AMBIGUOUS, job_ids=(7, 8)), Answer.UNKNOWN),
        (Reconciliation(ReconciliationState.UNAVAILABLE), Answer.UNKNOWN),
    ],
    ids=["no-name", "absent", "found-ours", "found-another-id", "ambiguous", "unavailable"],
)
def test_lookup_of_reconciliation_answers_about_the_watched_id(
    found: Reconciliation | None, answer: Answer
) -> None:
    assert supervision.lookup_of(found, 7, 1.0) == Lookup(1.0, answer)


@pytest.mark.parametrize(
    ("presence", "status", "unreadable", "verdict"),
    [
        (Presence.PRESENT, "RUNNING", 0, Recheck.WATCH_AGAIN),
        (Presence.PRESENT, "PENDING", 0, Recheck.WATCH_AGAIN),
        (Presence.PRESENT, "CANCELLING", 0, Recheck.WATCH_AGAIN),
        (Presence.PRESENT, "FAILED_CONTROLLER", 0, Recheck.PROCEED),
        (Presence.PRESENT, "FAILED_NO_RESOURCE", 0, Recheck.PROCEED),
        (Presence.ABSENT, None, 0, Recheck.PROCEED),
        (Presence.UNKNOWN, None, 1, Recheck.READ_AGAIN),
        (Presence.UNKNOWN, None, 6, Recheck.UNREADABLE),
    ],
    ids=lambda v: str(v),
)
def test_recheck_latest_read_decides_whether_recovery_may_act(
    presence: Presence, status: str | None, unreadable: int, verdict: Recheck
) -> None:
    assert supervision.recheck(presence, status, unreadable) is verdict


@given(missing_sequences())
@example([(0.0, "absent", "absent"), (600.0, "absent", "absent")])
@example([(0.0, "RUNNING", "absent"), (600.0, "absent", "absent"), (0.0, "absent", "absent")])
def test_decide_missing_job_fails_only_after_the_window_and_an_absent_lookup(
    steps: list[tuple[float, str, str]],
) -> None:
    state = WatchState.begin(0.0)
    now = 0.0
    present_at: float | None = None  # the last read (or lookup) that showed the job
    missing: list[float] = []  # the missing reads since then
    for delta, kind, answer in steps:
        now += delta
        state, verdict = decide(state, _obs((now, kind)), UNBOUNDED)
        if kind not in ("absent", "unknown"):
            present_at, missing = now, []
        elif kind == "absent":
            missing.append(now)
        if verdict is Verdict.CONFIRM_MISSING:
            # never on one read, never inside the window
            assert len(missing) >= supervision.MIN_MISSING_READS
            assert now - missing[0] >= GRACE
            state, verdict = decide(state, Lookup(now, Answer(answer)), UNBOUNDED)
            if answer == "found":
                present_at, missing = now, []
            else:
                assert verdict is (F if answer == "absent" else W)
        # no failure while a read (or the lookup) showed the job within the window
        if verdict is F:
            assert answer == "absent"
            assert present_at is None or now - present_at > GRACE
            return
        if verdict is Verdict.UNREADABLE:  # six unreadable reads in a row: not an absence
            assert kind == "unknown"
            return
        assert verdict is W
