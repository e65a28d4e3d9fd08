"""The readiness window, kept while a wave runs, so the next launch needs one fresh sample.

kubernetes.md §1.2 asks for 3 consecutive ``/readyz`` successes spanning at
least 10 s, the last one immediately before the launch. Proving that from
zero before every wave cost 10-15 s per launch (issue 19). ``ReadinessKeeper``
samples in the background instead: the supervision loop sleeps between
its ticks through ``idle``, which takes every sample that falls due on the
injected clock (``kube.readywindow.decide`` says when); ``gate``, right
before a launch, takes one fresh sample and launches when the window is
proven, or keeps sampling (same pace, 120 s deadline) until it is or a
terminal or ambiguous sample ends the wait.

The window is never faked: the pure decision resets it on a failed sample,
breaks it across a gap longer than a sample can take, and calls the latest
success stale when it is older than one interval. Only the samples of the
current streak (and the gate's own) go into the launch's
``npa.skypilot.kubernetes-readiness.v1`` evidence; ``forget`` drops them all
(a retry re-proves readiness from zero, runtime-reference.md §1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_infra.errors import InvariantError
from npa_infra.kube import readiness, readywindow
from npa_infra.runs import classifier
from npa_infra.runs.models import Category, Evidence

if TYPE_CHECKING:
    from npa_infra.kube.base import KubeCluster
    from npa_infra.kube.models import ReadyzSample
    from npa_infra.workflow.target.services import Clock

__all__ = ["ReadinessKeeper"]

_KEEP = 32  # samples kept: far more than a streak needs
GateAnswer = tuple[Evidence, tuple[dict[str, object], ...], Category, str]


class ReadinessKeeper:
    """One context's readiness samples; see the module docstring. Constructing it does no I/O."""

    def __init__(
        self,
        cluster: KubeCluster,
        clock: Clock,
        *,
        policy: readiness.ReadinessPolicy = readiness.DEFAULT_POLICY,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self._cluster = cluster
        self._clock = clock
        self._policy = policy
        self._progress = progress
        self._taken: list[tuple[ReadyzSample, readiness.SampleClass]] = []
        self.requests = 0  # /readyz samples this keeper took

    def forget(self) -> None:
        """Drop every sample: the next gate proves the window from zero."""
        self._taken.clear()

    def window(self, now: float) -> readywindow.WindowDecision:
        """The pure verdict on the samples kept, at ``now``."""
        p = self._policy
        answers = [readywindow.Answer(s.at, k is readiness.SampleClass.OK) for s, k in self._taken]
        return readywindow.decide(
            answers,
            now=now,
            successes=p.successes,
            window=p.window,
            interval=p.interval,
            sample_timeout=p.sample_timeout,
        )

    def idle(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, taking each sample that falls due meanwhile.

        A failed sample here only resets the window; the gate judges the launch.
        """
        end = self._clock.now() + seconds
        while (now := self._clock.now()) < end:
            due = self.window(now).due
            if due <= now:
                self._sample()
                continue
            self._clock.sleep(min(due, end) - now)

    def gate(self, cluster: KubeCluster) -> GateAnswer:
        """Before a launch: one fresh sample, then more until the window is proven or ends.

        Raises:
            InvariantError: another cluster than this keeper's, or a clock that does not advance.
        """
        if cluster is not self._cluster:
            raise InvariantError("the readiness keeper samples another cluster")
        p = self._policy
        started = self._clock.now()
        first = len(self._taken)
        most = math.floor(p.deadline / p.interval) + 3
        for _ in range(most):
            sample, klass = self._sample()  # the final sample is taken immediately before
            now = sample.at
            decision = self.window(now)
            verdict = self._verdict(decision, klass, now - started)
            self._show(sample, klass, verdict, decision.streak, now - started)
            if verdict is not readiness.Verdict.WAITING:
                return self._answer(verdict, decision, first)
            wake = min(decision.due, started + p.deadline)
            delay = wake - self._clock.now()
            if delay > 0:
                self._clock.sleep(delay)
        raise InvariantError("readiness clock does not advance: check the injected clock")

    def _verdict(
        self, decision: readywindow.WindowDecision, klass: readiness.SampleClass, elapsed: float
    ) -> readiness.Verdict:
        # kubernetes.md §1.2: terminal and ambiguous samples return at once.
        if klass is readiness.SampleClass.TERMINAL:
            return readiness.Verdict.TERMINAL
        if klass is readiness.SampleClass.AMBIGUOUS:
            return readiness.Verdict.AMBIGUOUS
        if decision.proven:
            return readiness.Verdict.READY
        # kubernetes.md §1.2: after the deadline the result is transient_unavailable.
        if elapsed >= self._policy.deadline:
            return readiness.Verdict.TRANSIENT_UNAVAILABLE
        return readiness.Verdict.WAITING

    def _sample(self) -> tuple[ReadyzSample, readiness.SampleClass]:
        sample = readiness.take(self._cluster, self._policy.sample_timeout)
        sample = sample._replace(at=self._clock.now())  # stamped when its answer arrived
        klass = readiness.classify_sample(sample)
        self._taken.append((sample, klass))
        del self._taken[:-_KEEP]
        self.requests += 1
        return sample, klass

    def _show(
        self,
        sample: ReadyzSample,
        klass: readiness.SampleClass,
        verdict: readiness.Verdict,
        streak: int,
        elapsed: float,
    ) -> None:
        if self._progress is None:
            return
        record = _record(sample, klass, sample.at)
        line = readiness.ReadinessProgress(
            self._cluster.context,
            record,
            verdict,
            streak,
            self._policy.successes,
            elapsed,
            self._policy.deadline,
        )
        self._progress(line.text())

    def _answer(
        self, verdict: readiness.Verdict, decision: readywindow.WindowDecision, first: int
    ) -> GateAnswer:
        # the evidence: the streak's tail that proves the window (or the gate's own samples)
        proving = decision.streak
        if verdict is readiness.Verdict.READY and proving:
            ats = [sample.at for sample, _ in self._taken[len(self._taken) - proving :]]
            policy = self._policy
            proving = readywindow.proving_tail(
                ats, successes=policy.successes, window=policy.window
            )
        since = min(len(self._taken) - proving, first) if proving else first
        kept = self._taken[max(0, since) :]
        origin = kept[0][0].at
        reason = _REASONS[verdict]
        evidence = readiness.ReadinessEvidence(
            self._cluster.context,
            verdict,
            reason,
            kept[-1][0].at - origin,
            tuple(_record(s, k, s.at - origin) for s, k in kept),
            self._policy,
        )
        samples = (evidence.to_json(),)
        if verdict is readiness.Verdict.READY:
            return Evidence.READY, samples, Category.NONE, ""
        detail = evidence.samples[-1].detail or reason.value
        return (
            Evidence(verdict.value),
            samples,
            classifier.classify(detail, classifier.ClassifierPhase.READINESS),
            classifier.redact(f"{reason.value}: {detail}"),
        )


_REASONS = {
    readiness.Verdict.READY: readiness.Reason.STREAK_COMPLETE,
    readiness.Verdict.TERMINAL: readiness.Reason.TERMINAL_SAMPLE,
    readiness.Verdict.AMBIGUOUS: readiness.Reason.AMBIGUOUS_SAMPLE,
    readiness.Verdict.TRANSIENT_UNAVAILABLE: readiness.Reason.DEADLINE,
}


def _record(
    sample: ReadyzSample, klass: readiness.SampleClass, at: float
) -> readiness.SampleRecord:
    return readiness.SampleRecord(
        at=at,
        status=sample.status,
        classification=klass,
        kind=sample.kind,
        detail=" ".join(sample.detail.split())[:1000],  # runtime-reference.md §1: capped
    )
