"""The API readiness gate before every Kubernetes launch (kubernetes.md §1.2).

``decide`` is pure: it takes the gate's frozen state and one ``/readyz``
sample and returns a ``Decision`` (the verdict, why, and the next state). The
rule, identical to the reference implementation's:

- a sample succeeds on HTTP 200 with a body starting ``ok``;
- **ready** = 3 consecutive successes spanning at least 10 s, measured from
  the first success of the streak to the latest;
- transient samples (transport errors, 429, 5xx) reset the streak;
- terminal samples (no kubeconfig, no such context, 401, 403, a certificate
  error, an exec-plugin failure) and ambiguous ones (anything else) end the
  wait at once;
- after the 120 s deadline the verdict is ``transient_unavailable``.

``wait_ready`` is the loop around it: one sample every 5 s (10 s timeout),
with the clock and ``sleep`` injected so tests move time instead of waiting.
It returns ``ReadinessEvidence``, the ``npa.skypilot.kubernetes-readiness.v1``
record of every sample (time since the start, HTTP status, classification),
which ``to_json`` shapes for ``--json`` output and the launch journal
(runtime-reference.md §1). Ctrl-C raises ``ReadinessInterrupted`` carrying the
evidence so far.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.errors import InvariantError, KubeError
from npa_infra.kube import failures
from npa_infra.kube.base import KubeCluster
from npa_infra.kube.models import KubeErrorKind, ReadyzSample

__all__ = [
    "DEFAULT_POLICY",
    "SCHEMA",
    "Decision",
    "ReadinessEvidence",
    "ReadinessGate",
    "ReadinessInterrupted",
    "ReadinessPolicy",
    "ReadinessProgress",
    "Reason",
    "SampleClass",
    "SampleRecord",
    "Verdict",
    "classify_sample",
    "decide",
    "take",
    "wait_ready",
]

SCHEMA = "npa.skypilot.kubernetes-readiness.v1"
_DETAIL_CAP = 1000  # runtime-reference.md §1: evidence text is capped


class Verdict(StrEnum):
    """The gate's answer; every value but ``waiting`` ends the wait."""

    READY = "ready"
    TRANSIENT_UNAVAILABLE = "transient_unavailable"
    TERMINAL = "terminal"
    AMBIGUOUS = "ambiguous"
    WAITING = "waiting"


class SampleClass(StrEnum):
    """What one sample means to the gate."""

    OK = "ok"
    TRANSIENT = "transient"
    TERMINAL = "terminal"
    AMBIGUOUS = "ambiguous"


class Reason(StrEnum):
    """Why the gate answered as it did."""

    STREAK_COMPLETE = "streak_complete"
    COUNTING = "counting"
    STREAK_RESET = "streak_reset"
    TERMINAL_SAMPLE = "terminal_sample"
    AMBIGUOUS_SAMPLE = "ambiguous_sample"
    DEADLINE = "deadline"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class ReadinessPolicy:
    """The numbers of kubernetes.md §1.2; seconds throughout."""

    successes: int = 3
    window: float = 10.0
    interval: float = 5.0
    deadline: float = 120.0
    sample_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.successes < 1 or self.interval <= 0 or self.window < 0 or self.deadline < 0:
            raise ValueError(f"invalid readiness policy: {self}")
        if self.sample_timeout <= 0:
            raise ValueError(f"invalid readiness policy: {self}")

    def to_json(self) -> dict[str, object]:
        return {
            "successes": self.successes,
            "window_s": self.window,
            "interval_s": self.interval,
            "deadline_s": self.deadline,
            "sample_timeout_s": self.sample_timeout,
        }


DEFAULT_POLICY = ReadinessPolicy()


@dataclass(frozen=True, slots=True)
class ReadinessGate:
    """The gate's state: when it started, the current success streak, the verdict so far."""

    started_at: float
    policy: ReadinessPolicy = DEFAULT_POLICY
    streak: int = 0
    streak_started_at: float | None = None
    samples: int = 0
    verdict: Verdict = Verdict.WAITING

    @classmethod
    def start(cls, at: float, policy: ReadinessPolicy = DEFAULT_POLICY) -> ReadinessGate:
        return cls(started_at=at, policy=policy)


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one sample, why, and the gate's next state."""

    verdict: Verdict
    reason: Reason
    classification: SampleClass
    state: ReadinessGate

    @property
    def final(self) -> bool:
        return self.verdict is not Verdict.WAITING


def classify_sample(sample: ReadyzSample) -> SampleClass:
    """Success, transient, terminal or ambiguous (kubernetes.md §1.2)."""
    if sample.ok:
        return SampleClass.OK
    if sample.kind.terminal:
        return SampleClass.TERMINAL
    if sample.kind.transient:
        return SampleClass.TRANSIENT
    return SampleClass.AMBIGUOUS  # any other unexpected answer, including 200 without "ok"


def decide(gate: ReadinessGate, sample: ReadyzSample) -> Decision:
    """The gate's answer to ``sample`` (taken at ``sample.at`` on the gate's clock).

    Raises:
        InvariantError: the gate has already answered.
    """
    if gate.verdict is not Verdict.WAITING:
        raise InvariantError(f"readiness gate already answered {gate.verdict}")
    policy = gate.policy
    klass = classify_sample(sample)
    counted = dataclasses.replace(gate, samples=gate.samples + 1)
    # kubernetes.md §1.2: terminal samples return at once.
    if klass is SampleClass.TERMINAL:
        return _final(counted, Verdict.TERMINAL, Reason.TERMINAL_SAMPLE, klass)
    # kubernetes.md §1.2: ambiguous samples return at once.
    if klass is SampleClass.AMBIGUOUS:
        return _final(counted, Verdict.AMBIGUOUS, Reason.AMBIGUOUS_SAMPLE, klass)
    if klass is SampleClass.OK:
        first = gate.streak_started_at if gate.streak_started_at is not None else sample.at
        nxt = dataclasses.replace(counted, streak=gate.streak + 1, streak_started_at=first)
        # kubernetes.md §1.2: 3 consecutive successes spanning >= 10 s, first to third.
        if nxt.streak >= policy.successes and sample.at - first >= policy.window:
            return _final(nxt, Verdict.READY, Reason.STREAK_COMPLETE, klass)
        reason = Reason.COUNTING
    else:
        # kubernetes.md §1.2: transport errors, 429 and 5xx reset the streak.
        nxt = dataclasses.replace(counted, streak=0, streak_started_at=None)
        reason = Reason.STREAK_RESET
    # kubernetes.md §1.2: after the deadline the result is transient_unavailable.
    if sample.at - gate.started_at >= policy.deadline:
        return _final(nxt, Verdict.TRANSIENT_UNAVAILABLE, Reason.DEADLINE, klass)
    return Decision(Verdict.WAITING, reason, klass, nxt)


def _final(gate: ReadinessGate, verdict: Verdict, reason: Reason, klass: SampleClass) -> Decision:
    return Decision(verdict, reason, klass, dataclasses.replace(gate, verdict=verdict))


# -- evidence ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SampleRecord:
    """One sample as the evidence keeps it; ``at`` is seconds since the wait started."""

    at: float
    status: int | None
    classification: SampleClass
    kind: KubeErrorKind
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "at_s": round(self.at, 3),
            "status": self.status,
            "classification": self.classification.value,
            "kind": self.kind.value,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class ReadinessEvidence:
    """The ``npa.skypilot.kubernetes-readiness.v1`` record of one wait."""

    context: str
    state: Verdict
    reason: Reason
    elapsed: float
    samples: tuple[SampleRecord, ...]
    policy: ReadinessPolicy = DEFAULT_POLICY

    @property
    def ready(self) -> bool:
        return self.state is Verdict.READY

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "context": self.context,
            "state": self.state.value,
            "reason": self.reason.value,
            "elapsed_s": round(self.elapsed, 3),
            "policy": self.policy.to_json(),
            "samples": [s.to_json() for s in self.samples],
        }


@dataclass(frozen=True, slots=True)
class ReadinessProgress:
    """What the progress hook sees after each sample."""

    context: str
    sample: SampleRecord
    verdict: Verdict
    streak: int
    required: int
    elapsed: float
    deadline: float = DEFAULT_POLICY.deadline

    def text(self) -> str:
        """One line naming what is awaited, the deadline, and why the last sample failed.

        ``waiting for /readyz of context ctx: 0/3 ok, 5.0 s of 120 s: connection
        refused by https://10.0.0.1:6443`` (the CLI prints it on stderr; issue 17).
        """
        counts = f"{self.streak}/{self.required} ok, {self.elapsed:.1f} s of {self.deadline:g} s"
        why = f": {self.sample.detail}" if self.sample.detail else ""
        if self.verdict is Verdict.WAITING:
            return f"waiting for /readyz of context {self.context}: {counts}{why}"
        return f"/readyz of context {self.context} {self.verdict.value}: {counts}{why}"


class ReadinessInterrupted(KeyboardInterrupt):
    """Ctrl-C during the wait; ``evidence`` holds every sample taken so far."""

    def __init__(self, evidence: ReadinessEvidence) -> None:
        super().__init__("interrupted while waiting for /readyz")
        self.evidence = evidence


# -- the loop ------------------------------------------------------------------
def wait_ready(
    cluster: KubeCluster,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    on_sample: Callable[[ReadinessProgress], None] | None = None,
    interval: float = DEFAULT_POLICY.interval,
    deadline: float = DEFAULT_POLICY.deadline,
    sample_timeout: float = DEFAULT_POLICY.sample_timeout,
) -> ReadinessEvidence:
    """Sample ``/readyz`` until the gate answers; never sleeps past the deadline.

    Samples start every ``interval`` seconds; each is stamped with ``clock()``
    when its answer arrives. A ``KubeError`` raised by ``cluster.readyz`` is a
    sample of its kind.

    Raises:
        ReadinessInterrupted: on Ctrl-C, with the evidence so far.
        InvariantError: the injected clock does not advance.
    """
    policy = dataclasses.replace(
        DEFAULT_POLICY, interval=interval, deadline=deadline, sample_timeout=sample_timeout
    )
    started = clock()
    gate = ReadinessGate.start(started, policy)
    records: list[SampleRecord] = []
    # Sample starts are >= interval apart, except one clamped to the deadline.
    most = math.floor(policy.deadline / policy.interval) + 3  # +1 of slack for float rounding

    def evidence(verdict: Verdict, reason: Reason) -> ReadinessEvidence:
        return ReadinessEvidence(
            cluster.context, verdict, reason, clock() - started, tuple(records), policy
        )

    try:
        while True:
            if len(records) >= most:
                raise InvariantError("readiness clock does not advance: check the injected clock")
            began = clock()
            sample = _take(cluster, policy.sample_timeout)._replace(at=clock())
            decision = decide(gate, sample)
            gate = decision.state
            record = SampleRecord(
                at=sample.at - started,
                status=sample.status,
                classification=decision.classification,
                kind=sample.kind,
                detail=" ".join(sample.detail.split())[:_DETAIL_CAP],
            )
            records.append(record)
            if on_sample is not None:
                on_sample(
                    ReadinessProgress(
                        cluster.context,
                        record,
                        decision.verdict,
                        gate.streak,
                        policy.successes,
                        sample.at - started,
                        policy.deadline,
                    )
                )
            if decision.final:
                return evidence(decision.verdict, decision.reason)
            wake = min(began + policy.interval, started + policy.deadline)
            delay = wake - clock()
            if delay > 0:
                sleep(delay)
    except KeyboardInterrupt as exc:
        raise ReadinessInterrupted(evidence(Verdict.WAITING, Reason.INTERRUPTED)) from exc


def take(cluster: KubeCluster, timeout: float) -> ReadyzSample:
    """One ``/readyz`` sample (``at`` is left 0: the caller stamps its answer's time).

    A ``KubeError`` raised by ``cluster.readyz`` is a sample of its kind.
    """
    return _take(cluster, timeout)


def _take(cluster: KubeCluster, timeout: float) -> ReadyzSample:
    try:
        return cluster.readyz(timeout=timeout)
    except KubeError as exc:
        status = exc.details.get("status")
        return ReadyzSample(
            at=0.0,
            ok=False,
            status=status if isinstance(status, int) else None,
            kind=failures.kind_of(exc),
            detail=exc.message,
        )
