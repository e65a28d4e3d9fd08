"""The launch-transaction driver: performs what ``runs.transaction`` decides.

The pure machine says what to do next; this module does it against SkyPilot
(exact-name queue reads, the asynchronous launch, request status) and the
Kubernetes readiness gate, feeds each observation back, and makes the record
durable in the journal: before every launch request (intent, with the new
launch sequence) and after it (the request id), and at every exit.

Ids come only from exact-name reconciliation, never from launch output
(runtime-reference.md §1). Ctrl-C ends the transaction with a durable
``interrupted`` record, which the caller reports as exit 130.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.runs import classifier, transaction
from npa_infra.runs.models import (
    Category,
    Evidence,
    LaunchOutcome,
    Reconciliation,
    ReconciliationState,
    RequestCheck,
    RequestState,
    TransactionRecord,
)
from npa_infra.skypilot.models import QueueVerdict

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.skypilot.base import SkyPilot

__all__ = ["AttemptKey", "Clock", "LaunchDriver", "check_request", "reconcile"]

_LAUNCH_REQUEST = "sky.jobs.launch"


@dataclass(frozen=True, slots=True)
class Clock:
    """Time, sleep and jitter, injected so tests move time instead of waiting."""

    now: Callable[[], float]
    sleep: Callable[[float], None]
    jitter: Callable[[], float]


@dataclass(frozen=True, slots=True)
class AttemptKey:
    run_id: str
    wave_index: int
    attempt: int


def reconcile(sky: SkyPilot, name: str, now: float) -> Reconciliation:
    """Exact-name lookup: found (one id), absent, ambiguous (several), or unavailable."""
    queue = sky.queue()
    if queue.verdict is QueueVerdict.VERIFIED_EMPTY:
        return Reconciliation(ReconciliationState.ABSENT, at=now)
    if queue.verdict is QueueVerdict.UNAVAILABLE:
        text = queue.detail or queue.error_kind.value
        return Reconciliation(
            ReconciliationState.UNAVAILABLE,
            error=classifier.redact(text),
            category=classifier.classify(text, classifier.ClassifierPhase.RECONCILIATION),
            at=now,
        )
    ids = queue.job_ids(name)
    if not ids:
        return Reconciliation(ReconciliationState.ABSENT, at=now)
    if len(ids) > 1:
        return Reconciliation(
            ReconciliationState.AMBIGUOUS,
            job_ids=ids,
            error=f"{len(ids)} managed jobs are named {name}: {', '.join(map(str, ids))}",
            at=now,
        )
    status = queue.status_of(ids[0])
    return Reconciliation(
        ReconciliationState.FOUND, job_ids=ids, status=status.value if status else None, at=now
    )


def check_request(sky: SkyPilot, request_id: str | None) -> RequestCheck:
    """The launch request's state; without an id, whether ANY launch request is in flight."""
    if request_id is None:
        answer = sky.api_status()
        if not answer.readable:
            return RequestCheck(RequestState.UNKNOWN, classifier.redact(answer.detail))
        active = [
            r
            for r in answer.requests
            if r.name == _LAUNCH_REQUEST and r.status in ("PENDING", "RUNNING")
        ]
        return RequestCheck(RequestState.RUNNING if active else RequestState.NONE_ACTIVE)
    answer = sky.api_status([request_id])
    rows = [r for r in answer.requests if r.request_id == request_id]
    if not answer.readable or len(rows) != 1:
        return RequestCheck(RequestState.UNKNOWN, classifier.redact(answer.detail))
    try:
        state = RequestState(rows[0].status)
    except ValueError:
        return RequestCheck(RequestState.UNKNOWN, f"unknown request status {rows[0].status!r}")
    if state is not RequestState.FAILED:
        return RequestCheck(state)
    logs = sky.api_logs(request_id)
    text = logs.stderr + "\n" + logs.stdout
    return RequestCheck(
        state,
        classifier.redact(text.strip()),
        classifier.classify(text, classifier.ClassifierPhase.LAUNCH),
    )


def _launch_outcome(
    sky: SkyPilot, task: Path, record: TransactionRecord, **kw: object
) -> LaunchOutcome:
    result = sky.launch(task, name=record.job_name, **kw)  # type: ignore[arg-type]  # infra/secrets
    if result.accepted:
        return LaunchOutcome(True, request_id=result.request_id)
    text = f"{result.command.stderr}\n{result.command.stdout}".strip() or result.detail
    return LaunchOutcome(
        False,
        error=classifier.redact(text),
        category=classifier.classify(text, classifier.ClassifierPhase.LAUNCH),
        timed_out=result.command.timed_out,
    )


class LaunchDriver:
    """Runs one transaction to its end. Constructing it does no I/O."""

    def __init__(
        self,
        sky: SkyPilot,
        journal: Journal,
        clock: Clock,
        *,
        cluster: KubeCluster | None,
        readiness: Callable[
            [KubeCluster], tuple[Evidence, tuple[dict[str, object], ...], Category, str]
        ]
        | None = None,
    ) -> None:
        self._sky = sky
        self._journal = journal
        self._clock = clock
        self._cluster = cluster
        self._readiness = readiness or _wait_ready(clock)

    def checkpoint(self, key: AttemptKey, record: TransactionRecord) -> None:
        self._journal.checkpoint(
            key.run_id, key.wave_index, key.attempt, record.to_json(), now=self._clock.now()
        )

    def run(
        self,
        key: AttemptKey,
        record: TransactionRecord,
        *,
        task_yaml: Path,
        infra: str | None,
        secrets: Mapping[str, str],
        resume_command: str,
        before_post: Callable[[TransactionRecord], None] | None = None,
    ) -> TransactionRecord:
        """Drive ``record`` to DONE; the final record is durable when this returns.

        ``before_post`` runs before each launch request is sent, once the intent
        (with the ``launch_sequence`` that request carries) is durable.
        """
        try:
            while not record.done:
                record = self._step(key, record, task_yaml, infra, secrets, before_post)
        except KeyboardInterrupt:
            # the interrupted record is durable before the command reports exit 130
            record = transaction.on_interrupted(record, now=self._clock.now())
        return self._finish(key, record, resume_command)

    def _finish(
        self, key: AttemptKey, record: TransactionRecord, command: str
    ) -> TransactionRecord:
        record = dataclasses.replace(
            record, operator_remedy=transaction.remedy_for(record, command)
        )
        self.checkpoint(key, record)
        return record

    def _step(
        self,
        key: AttemptKey,
        record: TransactionRecord,
        task_yaml: Path,
        infra: str | None,
        secrets: Mapping[str, str],
        before_post: Callable[[TransactionRecord], None] | None = None,
    ) -> TransactionRecord:
        action = transaction.next_action(record)
        kind = action.kind
        clock = self._clock
        if kind is transaction.ActionKind.RECONCILE:
            found = reconcile(self._sky, record.job_name, clock.now())
            return transaction.on_reconciled(record, found, now=clock.now(), jitter=clock.jitter())
        if kind is transaction.ActionKind.READINESS:
            if self._cluster is None:
                return transaction.on_readiness(record, Evidence.READY, now=clock.now())
            evidence, samples, category, error = self._readiness(self._cluster)
            return transaction.on_readiness(
                record, evidence, samples=samples, category=category, error=error, now=clock.now()
            )
        if kind is transaction.ActionKind.LAUNCH:
            record = transaction.on_launch_intent(record, now=clock.now())
            self.checkpoint(key, record)  # intent is durable before the request is sent
            if before_post is not None:
                before_post(record)
            outcome = _launch_outcome(self._sky, task_yaml, record, infra=infra, secrets=secrets)
            record = transaction.on_launched(record, outcome, now=clock.now())
            self.checkpoint(key, record)  # the request id (or the error) is durable
            return record
        if kind is transaction.ActionKind.CHECK_REQUEST:
            check = check_request(self._sky, action.request_id)
            return transaction.on_request(record, check, now=clock.now(), jitter=clock.jitter())
        if kind is transaction.ActionKind.SLEEP:
            clock.sleep(action.delay)
            return transaction.on_slept(record, now=clock.now())
        raise AssertionError(f"unexpected action {kind}")  # FINISH only when done


def _wait_ready(
    clock: Clock,
) -> Callable[[KubeCluster], tuple[Evidence, tuple[dict[str, object], ...], Category, str]]:
    def gate(cluster: KubeCluster) -> tuple[Evidence, tuple[dict[str, object], ...], Category, str]:
        from npa_infra.kube import readiness

        try:
            evidence = readiness.wait_ready(cluster, clock=clock.now, sleep=clock.sleep)
        except readiness.ReadinessInterrupted as exc:
            raise KeyboardInterrupt from exc
        samples = (evidence.to_json(),)
        if evidence.ready:
            return Evidence.READY, samples, Category.NONE, ""
        detail = evidence.samples[-1].detail if evidence.samples else evidence.reason.value
        verdict = Evidence(evidence.state.value)
        return (
            verdict,
            samples,
            classifier.classify(detail, classifier.ClassifierPhase.READINESS),
            classifier.redact(f"{evidence.reason.value}: {detail}"),
        )

    return gate
