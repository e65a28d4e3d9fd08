"""The launch-transaction driver: performs what ``runs.transaction`` decides.

The pure machine says what to do next; this module does it against SkyPilot
(exact-name queue reads, the asynchronous launch, request status) and the
Kubernetes readiness gate, feeds each observation back, and makes the record
durable in the journal: before every launch request (intent, with the new
launch sequence) and after it (the request id), and at every exit.

Ids come only from exact-name reconciliation, never from launch output
(runtime-reference.md §1), and only from a job whose tasks carry this
transaction's logical launch id (``runs.ownership``, read with ``-v``): a job
that merely has the name is ``foreign`` or ``unproven``, never adopted. Ctrl-C ends the transaction with a durable
``interrupted`` record, which the caller reports as exit 130.

The launch child's output, and the log of a launch request that failed, go
line by line through ``launchlog``: shown live in text mode, kept in the
attempt's log file, and read by ``runs.skyoutput``, whose recognised failure
(the local SkyPilot install's own) is the failed launch's category. It only
names the cause: the outcome is still proven by exact-name reconciliation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import UncertainOutcomeError
from npa_infra.runs import classifier, ownership, skyoutput, transaction
from npa_infra.runs.children import ChildIdentity
from npa_infra.runs.models import (
    Category,
    Evidence,
    LaunchOutcome,
    Phase,
    Reconciliation,
    ReconciliationState,
    RequestCheck,
    RequestState,
    TransactionRecord,
)
from npa_infra.skypilot.models import QueueResult, QueueVerdict
from npa_infra.workflow.execution import launchlog
from npa_infra.workflow.target.services import Clock

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.sharedqueue import SharedQueue
    from npa_infra.workflow.execution.readykeeper import ReadinessKeeper

__all__ = ["AttemptKey", "LaunchDriver", "check_request", "reconcile", "reconciliation_of"]

_LAUNCH_REQUEST = "sky.jobs.launch"
_NOT_OURS = {
    ownership.Ownership.FOREIGN: ReconciliationState.FOREIGN,
    ownership.Ownership.UNPROVEN: ReconciliationState.UNPROVEN,
}
# How long a resume waits for an earlier submit's launch child: its own call timeout.
CHILD_WAIT = 1800.0


@dataclass(frozen=True, slots=True)
class AttemptKey:
    run_id: str
    wave_index: int
    attempt: int


def reconcile(sky: SkyPilot, name: str, now: float, launch_id: str | None = None) -> Reconciliation:
    """Exact-name lookup: found (one id), absent, ambiguous (several), or unavailable.

    With ``launch_id`` the one job must also be that launch's own (``runs.ownership``,
    read from ``-v``'s task metadata), else the lookup is ``foreign`` or ``unproven``.
    """
    queue = sky.queue(verbose=True) if launch_id else sky.queue()
    return reconciliation_of(queue, name, now, launch_id)


def reconciliation_of(
    queue: QueueResult, name: str, now: float, launch_id: str | None = None
) -> Reconciliation:
    """The exact-name lookup of ``name`` in one queue answer (see ``reconcile``)."""
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
    shown = status.value if status else None
    if launch_id:
        stamps = [r.launch_id for r in queue.records if r.job_id == ids[0]]
        verdict = ownership.judge(launch_id, stamps)
        if verdict.ownership is not ownership.Ownership.OURS:
            state = _NOT_OURS[verdict.ownership]
            return Reconciliation(state, job_ids=ids, status=shown, error=verdict.reason, at=now)
    return Reconciliation(ReconciliationState.FOUND, job_ids=ids, status=shown, at=now)


def check_request(
    sky: SkyPilot,
    request_id: str | None,
    *,
    token_vars: tuple[str, ...] = (),
    on_failed_log: Callable[[str], None] | None = None,
) -> RequestCheck:
    """The launch request's state; without an id, whether ANY launch request is in flight.

    A FAILED request's log is handed to ``on_failed_log`` (raw) and classified, a known
    failure of the SkyPilot install first (``runs.skyoutput``, with the exported
    ``token_vars``).
    """
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
    if on_failed_log is not None:
        on_failed_log(text.strip())
    return RequestCheck(state, classifier.redact(text.strip()), _category(text, token_vars))


def _category(text: str, token_vars: tuple[str, ...]) -> Category:
    """A known failure of the SkyPilot install (runs.skyoutput) first, then the classifier."""
    known = skyoutput.first(text, token_vars)
    if known is not None:
        return known.category
    return classifier.classify(text, classifier.ClassifierPhase.LAUNCH)


def _launch_outcome(
    sky: SkyPilot,
    task: Path,
    record: TransactionRecord,
    *,
    infra: str | None,
    secrets: Mapping[str, str],
    on_started: Callable[[ChildIdentity], None],
    log: launchlog.LaunchLog,
    token_vars: tuple[str, ...] = (),
) -> LaunchOutcome:
    result = sky.launch(
        task,
        name=record.job_name,
        infra=infra,
        secrets=secrets,
        on_started=on_started,
        on_line=log.line,
    )
    if result.accepted:
        return LaunchOutcome(True, request_id=result.request_id)
    text = f"{result.command.stderr}\n{result.command.stdout}".strip() or result.detail
    known = log.recognise(text)  # the streamed lines' first, else the whole output's
    if known is not None:
        text = f"{known.message} (remedy: {known.remedy})\n{text}"
    return LaunchOutcome(
        False,
        error=classifier.redact(text),
        category=known.category if known is not None else _category(text, token_vars),
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
        progress: Callable[[str], None] | None = None,
        child_wait: float = CHILD_WAIT,
        state_dir: Path | None = None,
        home: str = "",
        token_vars: tuple[str, ...] = (),
        shared_queue: SharedQueue | None = None,
        tick: float = 30.0,
        held_since: float | None = None,
    ) -> None:
        self._sky = sky
        self._journal = journal
        self._clock = clock
        self._cluster = cluster
        self._keeper: ReadinessKeeper | None = None
        if readiness is None and cluster is not None:
            from npa_infra.workflow.execution.readykeeper import ReadinessKeeper

            self._keeper = ReadinessKeeper(cluster, clock, progress=progress)
        self._readiness = readiness or (
            self._keeper.gate if self._keeper is not None else _wait_ready(clock, progress)
        )
        # issue 19: the queue reads shared with the supervisors of this controller, fresh
        # within one tick; ``held_since``: when this process acquired the run's lock
        self._shared = shared_queue
        self._tick = tick
        self._held_since = held_since
        self._fresh_since: float | None = None  # the earliest shared answer run() may take
        self._progress = progress
        self._child_wait = child_wait
        self._durable: dict[AttemptKey, TransactionRecord] = {}
        # the SkyPilot state directory whose in-flight record this driver keeps (journal.inflight)
        self._state_dir = state_dir
        self._home = home
        self._token_vars = token_vars  # the exported static Nebius token variables (names)
        self._secrets: tuple[str, ...] = ()  # the values a launch log must mask (run())
        self._logs: dict[AttemptKey, str] = {}
        self._known: dict[AttemptKey, skyoutput.KnownFailure] = {}

    @property
    def progress(self) -> Callable[[str], None] | None:
        return self._progress

    @property
    def held_since(self) -> float | None:
        """When this process acquired the run's lock (None: not known, read fresh)."""
        return self._held_since

    def idle(self, seconds: float) -> None:
        """Sleep between supervision ticks, keeping the readiness window of the next launch."""
        if self._keeper is None:
            self._clock.sleep(seconds)
            return
        self._keeper.idle(seconds)

    @property
    def home(self) -> str:
        return self._home

    @property
    def launch_logs(self) -> list[str]:
        """The log files this driver wrote launch output to, in launch order."""
        return list(dict.fromkeys(self._logs.values()))

    @property
    def known_failures(self) -> list[skyoutput.KnownFailure]:
        """The known failures recognised in this driver's launches, in launch order."""
        return list(self._known.values())

    def _log(self, key: AttemptKey) -> launchlog.LaunchLog:
        path = launchlog.log_path(self._home, key.run_id, key.wave_index, key.attempt)
        log = launchlog.LaunchLog(
            path, progress=self._progress, secrets=self._secrets, token_vars=self._token_vars
        )
        log.known = self._known.get(key)
        return log

    def _keep(self, key: AttemptKey, log: launchlog.LaunchLog) -> None:
        log.close()
        if log.written and log.path is not None:
            self._logs[key] = str(log.path)
        if log.known is not None and key not in self._known:
            self._known[key] = log.known
            self._journal.append_event(
                key.run_id,
                "known_failure",
                {"wave": key.wave_index, "attempt": key.attempt, **log.known.to_json()},
                now=self._clock.now(),
            )

    def _lookup(self, name: str, launch_id: str) -> Reconciliation:
        """The exact-name lookup: from a shared answer when one may serve, else fresh.
        The one job found must carry ``launch_id`` (runs.ownership) to be ``found``.

        A shared answer serves only when it was read after everything this transaction
        did or saw (the run's lock acquired; the previous step's effect) and less than
        one tick ago; an unavailable answer is never shared (skypilot.sharedqueue).
        """
        now = self._clock.now()
        if self._shared is None or self._fresh_since is None:
            return reconcile(self._sky, name, now, launch_id)
        return _shared_lookup(
            self._shared, name, launch_id, now=now, tick=self._tick, since=self._fresh_since
        )

    def settle_child(self, key: AttemptKey, record: TransactionRecord) -> TransactionRecord:
        """Before re-entering a record, make sure its launch child can no longer act.

        A child an earlier npa released (``record.launch_child``) may still be about to
        create the job: wait for it to exit, showing that we wait, or fail closed
        (``runs.children.decide``). The record that drops the child is durable.

        Raises:
            UncertainOutcomeError: the child may still act (another host, or it outlived
                the wait).
        """
        from npa_infra.runs import children as child_rules
        from npa_infra.skypilot import children

        child = record.launch_child
        if child is None:
            return record
        started = self._clock.now()
        state = children.observe(child)
        while True:
            waited = self._clock.now() - started
            decision = child_rules.decide(state, waited=waited, limit=self._child_wait)
            if decision.action is child_rules.ChildAction.PROCEED:
                break
            if decision.action is child_rules.ChildAction.BLOCK:
                raise UncertainOutcomeError(
                    f"{record.job_name}: {decision.reason} (pid {child.pid} on {child.host})",
                    remedy="wait until that process has exited (or stop it), then rerun the "
                    "identical command; npa never launches beside a launch that may still act",
                    details={"job_name": record.job_name, "pid": child.pid, "host": child.host},
                )
            if self._progress is not None:
                self._progress(
                    f"{record.job_name}: waiting for pid {child.pid}, the launch child of an "
                    f"earlier submit, to exit (at most {self._child_wait - waited:.0f} s more)"
                )
            state = children.wait_gone(child, self._child_wait - waited)
        record = transaction.on_child_gone(record, now=self._clock.now())
        self.checkpoint(key, record)
        return record

    def checkpoint(self, key: AttemptKey, record: TransactionRecord) -> None:
        """Make ``record`` durable, and keep the state directory's in-flight record with it."""
        self._journal.checkpoint(
            key.run_id, key.wave_index, key.attempt, record.to_json(), now=self._clock.now()
        )
        self._durable[key] = record
        if self._state_dir is None or record.launch_sequence == 0:
            return
        from npa_infra.journal import inflight

        path = inflight.inflight_path(self._state_dir, key.run_id)
        if transaction.settled(record):
            inflight.remove(path)
            return
        inflight.write(
            path,
            inflight.InflightLaunch(
                home=self._home,
                logical_launch_id=record.logical_launch_id,
                job_name=record.job_name,
                launch_sequence=record.launch_sequence,
                request_ids=record.request_ids,
                child=record.launch_child,
            ),
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
        reconcile_since: float | None = None,
    ) -> TransactionRecord:
        """Drive ``record`` to DONE; the final record is durable when this returns.

        ``before_post`` runs before each launch request is sent, once the intent
        (with the ``launch_sequence`` that request carries) is durable.
        ``reconcile_since``: the first lookup may take a shared queue answer read at
        or after this time (inside the run's lock) and within one tick; None reads fresh.
        """
        self._secrets = tuple(secrets.values())
        # only a transaction that never sent a request may start from a shared answer
        self._fresh_since = reconcile_since if record.launch_sequence == 0 else None
        try:
            while not record.done:
                slept = transaction.next_action(record).kind is transaction.ActionKind.SLEEP
                record = self._step(key, record, task_yaml, infra, secrets, before_post)
                if not slept:  # a sleep acts on nothing: answers read during it may serve
                    # every later lookup takes only answers read after this step's effect
                    self._fresh_since = self._clock.now()
        except KeyboardInterrupt:
            # an interrupt inside a step (e.g. during the POST) lands after that step's own
            # checkpoints: end from the latest durable record, never from an older one
            latest = self._durable.get(key, record)
            if latest.launch_sequence > record.launch_sequence and not latest.done:
                record = latest
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
            found = self._lookup(record.job_name, record.logical_launch_id)
            return transaction.on_reconciled(record, found, now=clock.now(), jitter=clock.jitter())
        if kind is transaction.ActionKind.READINESS:
            if self._cluster is None:
                return transaction.on_readiness(record, Evidence.READY, now=clock.now())
            if record.retries > 0 and self._keeper is not None:
                self._keeper.forget()  # runtime-reference.md §1: re-proven before every retry
            evidence, samples, category, error = self._readiness(self._cluster)
            return transaction.on_readiness(
                record, evidence, samples=samples, category=category, error=error, now=clock.now()
            )
        if kind is transaction.ActionKind.LAUNCH:
            record = transaction.on_launch_intent(record, now=clock.now())
            self.checkpoint(key, record)  # intent is durable before the request is sent
            if before_post is not None:
                before_post(record)
            intent = record

            def started(child: ChildIdentity) -> None:
                # the child is gated until this is durable (skypilot.runner)
                self.checkpoint(key, transaction.on_child_started(intent, child))

            log = self._log(key)
            log.note(f"launch {record.launch_sequence} of {record.job_name}")
            try:
                outcome = _launch_outcome(
                    self._sky,
                    task_yaml,
                    record,
                    infra=infra,
                    secrets=secrets,
                    on_started=started,
                    log=log,
                    token_vars=self._token_vars,
                )
            finally:
                self._keep(key, log)
            # issue 19: with shared reads, the id comes from the next tick's read (settle)
            settle = self._tick if self._shared is not None else 0.0
            record = transaction.on_launched(record, outcome, now=clock.now(), settle_delay=settle)
            self.checkpoint(key, record)  # the request id (or the error) is durable
            return record
        if kind is transaction.ActionKind.CHECK_REQUEST:
            log = self._log(key)

            def failed_log(text: str) -> None:
                log.note(f"launch request {action.request_id} failed; its log:")
                for line in text.splitlines():
                    log.line(line)

            try:
                check = check_request(
                    self._sky,
                    action.request_id,
                    token_vars=self._token_vars,
                    on_failed_log=failed_log,
                )
            finally:
                self._keep(key, log)
            return transaction.on_request(record, check, now=clock.now(), jitter=clock.jitter())
        if kind is transaction.ActionKind.SLEEP:
            if record.phase is Phase.RECONCILE_AFTER_LAUNCH:
                self.idle(action.delay)  # the settle: keep the next launch's window meanwhile
            else:
                clock.sleep(action.delay)
            return transaction.on_slept(record, now=clock.now())
        raise AssertionError(f"unexpected action {kind}")  # FINISH only when done


def _shared_lookup(
    shared: SharedQueue, name: str, launch_id: str, *, now: float, tick: float, since: float
) -> Reconciliation:
    # the answer (a verbose one) was read no earlier than ``since`` and less than a tick ago
    answer = shared.read(max_age=tick, not_before=since)
    return reconciliation_of(answer, name, now, launch_id)


def _wait_ready(
    clock: Clock, progress: Callable[[str], None] | None = None
) -> Callable[[KubeCluster], tuple[Evidence, tuple[dict[str, object], ...], Category, str]]:
    def gate(cluster: KubeCluster) -> tuple[Evidence, tuple[dict[str, object], ...], Category, str]:
        from npa_infra.kube import readiness

        # each sample's line names the context, the deadline and a failed sample's cause
        shown = None if progress is None else (lambda p: progress(p.text()))
        try:
            evidence = readiness.wait_ready(
                cluster, clock=clock.now, sleep=clock.sleep, on_sample=shown
            )
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
