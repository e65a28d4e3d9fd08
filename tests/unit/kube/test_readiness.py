"""The readiness gate and its wait loop (kubernetes.md §1.2), on a fake clock.

``decide`` is exercised directly (examples, properties over random sample
sequences, and a ``RuleBasedStateMachine`` against a plain model); the loop
``wait_ready`` runs against a scripted cluster whose samples move a fake
clock, so no test ever sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from npa_infra.errors import InvariantError
from npa_infra.kube import failures, readiness
from npa_infra.kube.models import KubeErrorKind, NodeInfo, ReadyzSample
from npa_infra.kube.readiness import (
    ReadinessGate,
    ReadinessInterrupted,
    ReadinessProgress,
    Reason,
    SampleClass,
    Verdict,
    decide,
    wait_ready,
)

TERMINAL_KINDS = [k for k in KubeErrorKind if k.terminal]
TRANSIENT_KINDS = [k for k in KubeErrorKind if k.transient]
AMBIGUOUS_KINDS = [KubeErrorKind.NOT_FOUND, KubeErrorKind.UNEXPECTED, KubeErrorKind.NONE]


# -- helpers -------------------------------------------------------------------
def ok(at: float) -> ReadyzSample:
    return ReadyzSample(at=at, ok=True, status=200, kind=KubeErrorKind.NONE)


def failed(at: float, kind: KubeErrorKind, status: int | None = None) -> ReadyzSample:
    return ReadyzSample(at=at, ok=False, status=status, kind=kind, detail=f"{kind} sample")


def run_gate(samples: Sequence[ReadyzSample], start: float = 0.0) -> list[readiness.Decision]:
    """Feed samples until the gate answers; the decisions made, in order."""
    gate = ReadinessGate.start(start)
    decisions = []
    for sample in samples:
        decision = decide(gate, sample)
        decisions.append(decision)
        gate = decision.state
        if decision.final:
            break
    return decisions


class FakeClock:
    """Monotonic seconds that move only when told; ``sleep`` records and advances."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.start = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds

    @property
    def elapsed(self) -> float:
        return self.now - self.start


@dataclass
class Step:
    """One scripted ``/readyz`` answer and how long it takes on the fake clock."""

    kind: KubeErrorKind = KubeErrorKind.NONE
    ok: bool = True
    status: int | None = 200
    takes: float = 0.0
    raises: bool = False  # answer with a raised KubeError instead of a sample
    detail: str = ""


@dataclass
class ScriptedCluster:
    clock: FakeClock
    script: list[Step]
    repeat_last: bool = True
    context: str = "ctx-a"
    timeouts: list[float] = field(default_factory=list)

    def readyz(self, *, timeout: float = 10.0) -> ReadyzSample:
        self.timeouts.append(timeout)
        step = (
            self.script.pop(0) if len(self.script) > 1 or not self.repeat_last else self.script[0]
        )
        self.clock.now += step.takes
        if step.raises:
            raise failures.kube_error(step.kind, f"{step.kind} raised", context=self.context)
        # ``at`` deliberately wrong: wait_ready must stamp samples with its own clock.
        return ReadyzSample(
            at=-1.0, ok=step.ok, status=step.status, kind=step.kind, detail=step.detail
        )

    def nodes(self) -> list[NodeInfo]:
        return []

    def namespace_exists(self, name: str) -> bool:
        return True

    def service_account_exists(self, namespace: str, name: str) -> bool:
        return True


def bad(
    kind: KubeErrorKind, status: int | None = None, takes: float = 0.0, detail: str = ""
) -> Step:
    return Step(kind=kind, ok=False, status=status, takes=takes, detail=detail)


def waited(
    script: list[Step],
    *,
    deadline: float = 120.0,
    on_sample: Callable[[ReadinessProgress], None] | None = None,
) -> tuple[readiness.ReadinessEvidence, FakeClock, ScriptedCluster]:
    clock = FakeClock()
    cluster = ScriptedCluster(clock, list(script))
    evidence = wait_ready(
        cluster, clock=clock, sleep=clock.sleep, on_sample=on_sample, deadline=deadline
    )
    return evidence, clock, cluster


# -- classify_sample -----------------------------------------------------------
@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (ok(0), SampleClass.OK),
        *[(failed(0, k), SampleClass.TERMINAL) for k in TERMINAL_KINDS],
        *[(failed(0, k), SampleClass.TRANSIENT) for k in TRANSIENT_KINDS],
        *[(failed(0, k), SampleClass.AMBIGUOUS) for k in AMBIGUOUS_KINDS],
    ],
    ids=lambda v: v.kind.value if isinstance(v, ReadyzSample) else str(v),
)
def test_classify_sample_each_kind_expected_class(
    sample: ReadyzSample, expected: SampleClass
) -> None:
    assert readiness.classify_sample(sample) is expected


# -- decide: examples ----------------------------------------------------------
def test_decide_three_successes_spanning_ten_seconds_ready() -> None:
    decisions = run_gate([ok(0), ok(5), ok(10)])

    assert [d.verdict for d in decisions] == [Verdict.WAITING, Verdict.WAITING, Verdict.READY]
    assert decisions[-1].reason is Reason.STREAK_COMPLETE
    assert decisions[-1].state.streak == 3


def test_decide_three_successes_under_ten_seconds_waiting() -> None:
    decisions = run_gate([ok(0), ok(4), ok(9.99)])

    assert decisions[-1].verdict is Verdict.WAITING
    assert decisions[-1].reason is Reason.COUNTING


def test_decide_fourth_success_reaching_window_ready() -> None:
    decisions = run_gate([ok(0), ok(3), ok(6), ok(10)])

    assert [d.verdict for d in decisions][-2:] == [Verdict.WAITING, Verdict.READY]


def test_decide_two_successes_spanning_long_time_waiting() -> None:
    decisions = run_gate([ok(0), ok(60)])

    assert decisions[-1].verdict is Verdict.WAITING


@pytest.mark.parametrize("kind", TRANSIENT_KINDS, ids=lambda k: k.value)
def test_decide_transient_sample_resets_streak(kind: KubeErrorKind) -> None:
    decisions = run_gate([ok(0), ok(5), failed(10, kind), ok(15), ok(20), ok(25)])

    assert decisions[2].reason is Reason.STREAK_RESET
    assert decisions[2].state.streak == 0
    assert [d.verdict for d in decisions[3:]] == [Verdict.WAITING, Verdict.WAITING, Verdict.READY]


@pytest.mark.parametrize("kind", TERMINAL_KINDS, ids=lambda k: k.value)
def test_decide_terminal_sample_terminal_at_once(kind: KubeErrorKind) -> None:
    decisions = run_gate([ok(0), ok(5), failed(6, kind), ok(10)])

    assert len(decisions) == 3
    assert decisions[-1].verdict is Verdict.TERMINAL
    assert decisions[-1].reason is Reason.TERMINAL_SAMPLE


@pytest.mark.parametrize(
    "sample",
    [
        ReadyzSample(at=1, ok=False, status=200, kind=KubeErrorKind.UNEXPECTED, detail="no"),
        failed(1, KubeErrorKind.NOT_FOUND, 404),
        failed(1, KubeErrorKind.UNEXPECTED, 302),
    ],
    ids=["200-without-ok", "404", "302"],
)
def test_decide_ambiguous_sample_ambiguous_at_once(sample: ReadyzSample) -> None:
    decisions = run_gate([ok(0), sample])

    assert decisions[-1].verdict is Verdict.AMBIGUOUS
    assert decisions[-1].reason is Reason.AMBIGUOUS_SAMPLE


def test_decide_deadline_reached_transient_unavailable() -> None:
    samples = [failed(t, KubeErrorKind.SERVER, 500) for t in range(0, 125, 5)]

    decisions = run_gate(samples)

    assert decisions[-1].verdict is Verdict.TRANSIENT_UNAVAILABLE
    assert decisions[-1].reason is Reason.DEADLINE
    assert len(decisions) == 25  # 0, 5, …, 120


def test_decide_streak_completing_at_deadline_ready() -> None:
    decisions = run_gate([ok(110), ok(115), ok(120)], start=0.0)

    assert decisions[-1].verdict is Verdict.READY


def test_decide_answered_gate_raises_invariant() -> None:
    answered = run_gate([failed(0, KubeErrorKind.AUTH, 401)])[-1].state

    with pytest.raises(InvariantError):
        decide(answered, ok(5))


def test_policy_nonpositive_interval_raises_value_error() -> None:
    with pytest.raises(ValueError):
        readiness.ReadinessPolicy(interval=0)


# -- decide: properties --------------------------------------------------------
_KINDS = st.sampled_from(
    [KubeErrorKind.NONE] * 4 + TERMINAL_KINDS + TRANSIENT_KINDS * 2 + AMBIGUOUS_KINDS[:2]
)


@st.composite
def sample_sequences(draw: st.DrawFn) -> list[ReadyzSample]:
    """Monotonic sample times (gaps 0-15 s) with mostly successes and transients."""
    count = draw(st.integers(min_value=1, max_value=40))
    at = draw(st.floats(min_value=0, max_value=5, allow_nan=False))
    samples = []
    for _ in range(count):
        kind = draw(_KINDS)
        samples.append(ok(at) if kind is KubeErrorKind.NONE else failed(at, kind))
        at += draw(st.floats(min_value=0, max_value=15, allow_nan=False))
    return samples


def _trailing_successes(samples: Sequence[ReadyzSample]) -> list[ReadyzSample]:
    run: list[ReadyzSample] = []
    for sample in reversed(samples):
        if not sample.ok:
            break
        run.append(sample)
    return list(reversed(run))


@given(sample_sequences())
@example([ok(0), ok(5), ok(9.999)])
@example([ok(0), failed(5, KubeErrorKind.SERVER), ok(10), ok(15)])
def test_decide_random_sequences_ready_only_after_three_spanning_ten(
    samples: list[ReadyzSample],
) -> None:
    decisions = run_gate(samples)
    seen = samples[: len(decisions)]

    if decisions[-1].verdict is Verdict.READY:
        streak = _trailing_successes(seen)
        assert len(streak) >= 3
        assert streak[-1].at - streak[0].at >= 10.0
    for index, decision in enumerate(decisions[:-1]):
        assert decision.verdict is Verdict.WAITING, index


@given(sample_sequences())
def test_decide_random_sequences_terminal_or_ambiguous_ends_at_once(
    samples: list[ReadyzSample],
) -> None:
    decisions = run_gate(samples)
    first_stop = next(
        (
            i
            for i, s in enumerate(samples)
            if readiness.classify_sample(s) in (SampleClass.TERMINAL, SampleClass.AMBIGUOUS)
        ),
        None,
    )

    if first_stop is not None and len(decisions) > first_stop:
        assert len(decisions) == first_stop + 1
        expected = (
            Verdict.TERMINAL
            if readiness.classify_sample(samples[first_stop]) is SampleClass.TERMINAL
            else Verdict.AMBIGUOUS
        )
        assert decisions[-1].verdict is expected


@given(sample_sequences())
def test_decide_random_sequences_deadline_never_waits_past(samples: list[ReadyzSample]) -> None:
    decisions = run_gate(samples, start=0.0)

    for sample, decision in zip(samples, decisions, strict=False):
        if sample.at >= 120.0:
            assert decision.final
        if decision.verdict is Verdict.TRANSIENT_UNAVAILABLE:
            assert sample.at >= 120.0


# -- decide: state machine -----------------------------------------------------
class GateMachine(RuleBasedStateMachine):
    """The gate against a plain model: a list of the current streak's success times."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = ReadinessGate.start(0.0)
        self.now = 0.0
        self.streak_times: list[float] = []
        self.last: readiness.Decision | None = None

    @initialize(start=st.floats(min_value=0, max_value=100, allow_nan=False))
    def begin(self, start: float) -> None:
        self.gate = ReadinessGate.start(start)
        self.now = start

    def _feed(self, sample: ReadyzSample) -> readiness.Decision:
        decision = decide(self.gate, sample)
        self.gate = decision.state
        self.last = decision
        return decision

    @precondition(lambda self: self.gate.verdict == Verdict.WAITING)
    @rule(gap=st.floats(min_value=0, max_value=12, allow_nan=False))
    def success(self, gap: float) -> None:
        self.now += gap
        decision = self._feed(ok(self.now))
        self.streak_times.append(self.now)
        complete = len(self.streak_times) >= 3 and self.now - self.streak_times[0] >= 10.0
        if complete:
            assert decision.verdict is Verdict.READY
        else:
            assert decision.verdict in (Verdict.WAITING, Verdict.TRANSIENT_UNAVAILABLE)

    @precondition(lambda self: self.gate.verdict == Verdict.WAITING)
    @rule(
        gap=st.floats(min_value=0, max_value=12, allow_nan=False),
        kind=st.sampled_from(TRANSIENT_KINDS),
    )
    def transient(self, gap: float, kind: KubeErrorKind) -> None:
        self.now += gap
        decision = self._feed(failed(self.now, kind))
        self.streak_times = []
        assert decision.verdict in (Verdict.WAITING, Verdict.TRANSIENT_UNAVAILABLE)
        assert decision.state.streak == 0

    @precondition(lambda self: self.gate.verdict == Verdict.WAITING)
    @rule(kind=st.sampled_from(TERMINAL_KINDS))
    def terminal(self, kind: KubeErrorKind) -> None:
        assert self._feed(failed(self.now, kind)).verdict is Verdict.TERMINAL

    @precondition(lambda self: self.gate.verdict == Verdict.WAITING)
    @rule(kind=st.sampled_from(AMBIGUOUS_KINDS))
    def ambiguous(self, kind: KubeErrorKind) -> None:
        assert self._feed(failed(self.now, kind)).verdict is Verdict.AMBIGUOUS

    @precondition(lambda self: self.gate.verdict != Verdict.WAITING)
    @rule()
    def answered_gate_refuses(self) -> None:
        with pytest.raises(InvariantError):
            decide(self.gate, ok(self.now))

    @invariant()
    def streak_matches_model(self) -> None:
        assert self.gate.streak == len(self.streak_times)

    @invariant()
    def waiting_only_before_deadline(self) -> None:
        if self.gate.verdict is Verdict.WAITING and self.gate.samples:
            assert self.now - self.gate.started_at < self.gate.policy.deadline


# pytest collects the TestCase by its class-style name; the dev/ci profile applies.
TestReadinessGateRandomRulesHoldInvariants = GateMachine.TestCase


# -- wait_ready ----------------------------------------------------------------
def test_wait_ready_steady_server_ready_after_ten_seconds() -> None:
    evidence, clock, cluster = waited([Step()])

    assert evidence.state is Verdict.READY
    assert [s.at for s in evidence.samples] == [0.0, 5.0, 10.0]
    assert clock.sleeps == [5.0, 5.0]
    assert cluster.timeouts == [10.0, 10.0, 10.0]


def test_wait_ready_always_500_transient_unavailable_at_deadline() -> None:
    evidence, clock, _ = waited([bad(KubeErrorKind.SERVER, 500)])

    assert evidence.state is Verdict.TRANSIENT_UNAVAILABLE
    assert evidence.reason is Reason.DEADLINE
    assert len(evidence.samples) == 25
    assert clock.elapsed == 120.0
    assert {s.classification for s in evidence.samples} == {SampleClass.TRANSIENT}


@pytest.mark.parametrize("kind", TERMINAL_KINDS, ids=lambda k: k.value)
def test_wait_ready_terminal_first_sample_returns_without_sleeping(kind: KubeErrorKind) -> None:
    evidence, clock, _ = waited([bad(kind)])

    assert evidence.state is Verdict.TERMINAL
    assert len(evidence.samples) == 1
    assert clock.sleeps == []


def test_wait_ready_raised_kube_error_recorded_as_sample() -> None:
    step = Step(kind=KubeErrorKind.UNKNOWN_CONTEXT, ok=False, raises=True)

    evidence, _, _ = waited([step])

    assert evidence.state is Verdict.TERMINAL
    assert evidence.samples[0].kind is KubeErrorKind.UNKNOWN_CONTEXT
    assert "raised" in evidence.samples[0].detail


def test_wait_ready_flapping_server_resets_then_ready() -> None:
    script = [Step(), Step(), bad(KubeErrorKind.TRANSPORT), Step(), Step(), Step()]

    evidence, _, _ = waited(script)

    assert evidence.state is Verdict.READY
    assert [s.classification.value for s in evidence.samples] == [
        "ok",
        "ok",
        "transient",
        "ok",
        "ok",
        "ok",
    ]
    assert evidence.samples[-1].at - evidence.samples[3].at == 10.0


def test_wait_ready_slow_samples_keep_five_second_cadence() -> None:
    evidence, clock, _ = waited([Step(takes=3.0)])

    assert clock.sleeps == [2.0, 2.0]
    assert [s.at for s in evidence.samples] == [3.0, 8.0, 13.0]


def test_wait_ready_samples_slower_than_interval_never_sleep() -> None:
    evidence, clock, _ = waited([bad(KubeErrorKind.TRANSPORT, takes=10.0)])

    assert clock.sleeps == []
    assert evidence.state is Verdict.TRANSIENT_UNAVAILABLE
    assert evidence.samples[-1].at == 120.0


def test_wait_ready_deadline_not_multiple_of_interval_clamps_last_sleep() -> None:
    evidence, clock, _ = waited([bad(KubeErrorKind.SERVER, 503)], deadline=12.0)

    assert clock.sleeps == [5.0, 5.0, 2.0]
    assert evidence.state is Verdict.TRANSIENT_UNAVAILABLE
    assert clock.elapsed == 12.0


def test_wait_ready_progress_hook_reports_streak_and_time() -> None:
    seen: list[ReadinessProgress] = []

    waited([Step(takes=2.5)], on_sample=seen.append)

    assert [p.text() for p in seen] == [
        "waiting for /readyz of context ctx-a: 1/3 ok, 2.5 s of 120 s",
        "waiting for /readyz of context ctx-a: 2/3 ok, 7.5 s of 120 s",
        "/readyz of context ctx-a ready: 3/3 ok, 12.5 s of 120 s",
    ]


def test_wait_ready_progress_failed_sample_names_cause_and_deadline_every_line() -> None:
    seen: list[ReadinessProgress] = []
    refused = "connection refused by https://10.0.0.1:6443"

    waited(
        [bad(KubeErrorKind.TRANSPORT, None, detail=refused)], deadline=12.0, on_sample=seen.append
    )

    texts = [p.text() for p in seen]
    assert texts[0] == f"waiting for /readyz of context ctx-a: 0/3 ok, 0.0 s of 12 s: {refused}"
    assert all("of 12 s" in t and t.endswith(refused) for t in texts)
    assert texts[-1].startswith("/readyz of context ctx-a transient_unavailable: 0/3 ok, 12.0 s")


def test_wait_ready_interrupt_raises_typed_interrupt_with_evidence() -> None:
    clock = FakeClock()
    cluster = ScriptedCluster(clock, [Step()])

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(ReadinessInterrupted) as caught:
        wait_ready(cluster, clock=clock, sleep=interrupt)

    assert isinstance(caught.value, KeyboardInterrupt)
    assert caught.value.evidence.reason is Reason.INTERRUPTED
    assert len(caught.value.evidence.samples) == 1


def test_wait_ready_stuck_clock_raises_invariant() -> None:
    clock = FakeClock()
    cluster = ScriptedCluster(clock, [bad(KubeErrorKind.SERVER, 500)])

    with pytest.raises(InvariantError):
        wait_ready(cluster, clock=clock, sleep=lambda s: None)


def test_evidence_to_json_schema_and_samples() -> None:
    evidence, _, _ = waited([bad(KubeErrorKind.SERVER, 500), Step()])

    document = json.loads(json.dumps(evidence.to_json()))

    assert document["schema"] == "npa.skypilot.kubernetes-readiness.v1"
    assert document["context"] == "ctx-a"
    assert document["state"] == "ready"
    assert document["policy"] == {
        "successes": 3,
        "window_s": 10.0,
        "interval_s": 5.0,
        "deadline_s": 120.0,
        "sample_timeout_s": 10.0,
    }
    assert document["samples"][0] == {
        "at_s": 0.0,
        "status": 500,
        "classification": "transient",
        "kind": "server",
        "detail": "",
    }
    assert set(document) == {
        "schema",
        "context",
        "state",
        "reason",
        "elapsed_s",
        "policy",
        "samples",
    }


# -- wait_ready: properties ----------------------------------------------------
_STEP_KINDS = st.sampled_from(
    [KubeErrorKind.NONE] * 5 + TRANSIENT_KINDS * 2 + TERMINAL_KINDS + [KubeErrorKind.UNEXPECTED]
)


@st.composite
def scripts(draw: st.DrawFn) -> list[Step]:
    steps = []
    for _ in range(draw(st.integers(min_value=1, max_value=40))):
        kind = draw(_STEP_KINDS)
        takes = draw(st.sampled_from([0.0, 0.5, 2.5, 4.9, 5.0, 7.0, 10.0]))
        steps.append(Step(kind=kind, ok=kind is KubeErrorKind.NONE, takes=takes))
    return steps


@given(scripts())
def test_wait_ready_random_scripts_respect_rule_and_deadline(script: list[Step]) -> None:
    longest = max(step.takes for step in script)
    clock = FakeClock()
    cluster = ScriptedCluster(clock, list(script))

    evidence = wait_ready(cluster, clock=clock, sleep=clock.sleep)

    samples = evidence.samples
    assert evidence.state is not Verdict.WAITING
    assert clock.elapsed <= 120.0 + longest + 1e-9
    assert all(0 <= s <= 5.0 + 1e-9 for s in clock.sleeps)
    for earlier in samples[:-1]:
        assert earlier.classification in (SampleClass.OK, SampleClass.TRANSIENT)
    if evidence.state is Verdict.READY:
        run = []
        for record in reversed(samples):
            if record.classification is not SampleClass.OK:
                break
            run.append(record)
        assert len(run) >= 3
        assert run[0].at - run[-1].at >= 10.0
    if evidence.state in (Verdict.TERMINAL, Verdict.AMBIGUOUS):
        assert samples[-1].classification.value == evidence.state.value
    if evidence.state is Verdict.TRANSIENT_UNAVAILABLE:
        assert samples[-1].at >= 120.0


@given(st.integers(min_value=0, max_value=23))  # the terminal sample lands at <= 115 s
def test_wait_ready_terminal_after_transients_stops_at_that_sample(transients: int) -> None:
    script = [bad(KubeErrorKind.RATE_LIMIT, 429)] * transients + [bad(KubeErrorKind.FORBIDDEN, 403)]

    evidence, clock, _ = waited(script)

    assert evidence.state is Verdict.TERMINAL
    assert len(evidence.samples) == transients + 1
    assert len(clock.sleeps) == transients
