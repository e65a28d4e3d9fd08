"""Running the waves of a live submit, and supervising them in runtime mode.

One-shot: the run is one serial pipeline; it is done when its launch
transaction ends (submitted and reconciled, or adopted). Runtime: each wave
is launched, then polled (one ``sky jobs queue --all -v`` per tick for the
run) until its job is terminal; a failed wave fails the run; decision
artifacts route the next waves (``routing``). The outcome of every step is
journaled before the next one starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from npa_infra.errors import (
    InterruptedRunError,
    LaunchFailedError,
    NpaError,
    RunCancelledError,
    UncertainOutcomeError,
)
from npa_infra.runs import lifecycle, resume, supervision
from npa_infra.runs.models import TransactionRecord
from npa_infra.skypilot.models import JobStatus
from npa_infra.workflow import (
    accounting,
    cancels,
    completion,
    recheck,
    recovery,
    resumption,
    routing,
    watch,
)

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.kube.sharedpods import SharedPods
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.sharedqueue import SharedQueue
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.launcher import Clock, LaunchDriver
    from npa_infra.workflow.live import LiveRequest, LiveResult

__all__ = ["Launch", "PollPolicy", "run_waves", "watch_policy"]

RETRY_PAUSE = 30.0  # runtime-reference.md §3: N+1 attempts, 30 s apart
_PAYLOAD_FAILURES = (JobStatus.FAILED, JobStatus.FAILED_SETUP)


class Launch(Protocol):
    """Launch (or re-enter) a wave; ``new_attempt`` starts the next immutable attempt."""

    def __call__(
        self,
        job: RenderedJob,
        wave_index: int,
        new_attempt: bool = False,
        exports: Mapping[str, Mapping[str, str]] | None = None,
    ) -> TransactionRecord: ...


_MAX_STATUS_ERRORS = 5  # the 6th consecutive unreadable poll fails the wave (§2)


@dataclass(frozen=True, slots=True)
class PollPolicy:
    interval: float = 30.0
    max_wait: float = 3600.0  # 0 = unbounded


def run_waves(
    request: LiveRequest,
    *,
    journal: Journal,
    driver: LaunchDriver,
    sky: SkyPilot,
    clock: Clock,
    store: Callable[[], ObjectStore],
    launch: Launch,
    cluster: KubeCluster | None = None,
    progress: Callable[[str], None] | None = None,
    shared_queue: SharedQueue | None = None,
    shared_pods: SharedPods | None = None,
) -> LiveResult:
    """Launch every wave in order; one-shot stops after the launch, runtime waits for each.

    ``shared_queue``/``shared_pods``: each supervision tick's queue read and pod and
    node lists, shared with every other run supervised on the same controller
    (``skypilot.sharedqueue``, ``kube.sharedpods``); None reads alone.
    """
    from npa_infra.workflow import live

    records: list[TransactionRecord] = []
    job_ids: list[int] = []
    # every planned job the walk takes, for the run's outcome (runs.outcome)
    ledger = accounting.Ledger(supervised=request.mode == "runtime")
    ledger.plan(request.jobs)
    command = live.resume_command(request.invocation, request.run_id)
    try:
        if request.mode == "runtime" and request.replan is not None:
            return _run_routed(
                request,
                journal,
                sky,
                clock,
                store,
                launch,
                records,
                job_ids,
                ledger,
                cluster,
                progress,
                shared_queue,
                shared_pods,
            )
        return _run_listed(request, journal, sky, clock, launch, records, job_ids, ledger)
    except RunCancelledError as cancelled:  # an operator's cancel stopped the next launch
        return _finish(request, journal, clock, records, job_ids, cancelled, ledger)
    except KeyboardInterrupt:
        error = InterruptedRunError(
            "interrupted while supervising; every launch so far is journaled",
            remedy=f"rerun: {command}",
        )
        return _finish(request, journal, clock, records, job_ids, error, ledger)


def watch_policy(extra: Mapping[str, Any]) -> supervision.WatchPolicy:
    """The supervision policy from the submit options (``LiveRequest.extra``); the
    ``WatchPolicy`` defaults where an option is not given."""
    default = supervision.WatchPolicy()
    poll = dict(extra.get("poll") or {})

    def number(value: object, fallback: float) -> float:
        return float(value) if isinstance(value, int | float) else fallback

    return supervision.WatchPolicy(
        permanent_grace=number(extra.get("permanent_grace"), default.permanent_grace),
        infrastructure_grace=number(
            extra.get("infrastructure_grace"), default.infrastructure_grace
        ),
        max_wait=number(poll.get("max_wait"), default.max_wait),
        heartbeat_seconds=number(extra.get("heartbeat_seconds"), default.heartbeat_seconds),
        stale_after_seconds=number(extra.get("stale_after_seconds"), default.stale_after_seconds),
    )


def _run_listed(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    launch: Launch,
    records: list[TransactionRecord],
    job_ids: list[int],
    ledger: accounting.Ledger,
) -> LiveResult:
    """The rendered jobs in order (one-shot: one serial pipeline; no routing)."""
    from npa_infra.workflow import live

    command = live.resume_command(request.invocation, request.run_id)
    for index, job in enumerate(request.jobs):
        record = launch(job, index)
        records.append(record)
        error = live.outcome_error(record, command)
        ledger.take(job, [record], error)
        if error is not None:
            return _finish(request, journal, clock, records, job_ids, error, ledger)
        assert record.job_id is not None  # SUBMITTED/ADOPTED always carry the reconciled id
        job_ids.append(record.job_id)
    return _finish(request, journal, clock, records, job_ids, None, ledger)


def _run_routed(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    store: Callable[[], ObjectStore],
    launch: Launch,
    records: list[TransactionRecord],
    job_ids: list[int],
    ledger: accounting.Ledger,
    cluster: KubeCluster | None,
    progress: Callable[[str], None] | None = None,
    shared_queue: SharedQueue | None = None,
    shared_pods: SharedPods | None = None,
) -> LiveResult:
    """Runtime mode with decisions: run the plan prefix, read the decision, re-plan, go on.

    Every rendered job of the route is one journal slot, numbered by its position
    in the route: a parallel group wider than its ``maxConcurrency`` renders one
    JobGroup per batch, and each batch is launched and supervised to its end
    before the next (dsl.md §5.4). A re-plan extends the route; the jobs already
    run must stay its prefix. Decisions already read are kept in the run's
    journal data, so a resumed run re-plans to the same prefix and replays its
    succeeded jobs instead of relaunching them (runtime-reference.md §3).
    """
    from npa_infra.workflow import live

    assert request.replan is not None
    run = journal.get_run(request.run_id)
    decided: dict[str, str] = dict((run.data if run else {}).get("decisions") or {})
    done: dict[int, str] = {}  # position in the route -> the job run there
    command = live.resume_command(request.invocation, request.run_id)
    poll = dict(request.extra.get("poll") or {})
    replan = request.replan

    def recompute_digest(index: int) -> recovery.Recomputed:
        # the identity is recomputed from the current inputs, never copied (§3): the
        # spec file is re-read from disk, so an edit made while the run is supervised
        # shows; the spec already in memory (replan) could never differ
        if request.reidentify is None:
            return recovery.Recomputed(None, "this run cannot re-read its spec to re-identify")
        return request.reidentify(decided, index)

    context = WaveContext(
        cluster=cluster,
        policy=watch_policy(request.extra),
        interval=float(poll.get("interval", 30.0)),
        store=store,
        recompute_digest=recompute_digest,
        outputs=lambda index: tuple(replan(decided).outputs.get(index, ())),
        schemas=lambda index: replan(decided).schemas,
        progress=progress,
        shared_queue=shared_queue,
        shared_pods=shared_pods,
    )
    while True:
        routed = request.replan(decided)
        ledger.plan(routed.jobs)
        moved = accounting.prefix_moved(done, routed.jobs, command)
        if moved is not None:
            return _finish(request, journal, clock, records, job_ids, moved, ledger)
        for index, job in enumerate(routed.jobs):
            if index in done:
                continue
            error = accounting.slot_conflict(journal, request.run_id, index, job, command)
            if error is not None:
                return _finish(request, journal, clock, records, job_ids, error, ledger)
            first = len(records)
            error = _run_wave(
                request, journal, sky, clock, launch, job, index, records, job_ids, context
            )
            ledger.take(job, records[first:], error)
            if error is not None:
                return _finish(request, journal, clock, records, job_ids, error, ledger)
            done[index] = job.job_name
        if routed.pending is None:
            return _finish(request, journal, clock, records, job_ids, None, ledger)
        value, failure = routing.read_decision(store, routed.pending, command)
        if failure is not None:
            return _finish(request, journal, clock, records, job_ids, failure, ledger)
        decided[routed.pending.key] = value
        now = clock.now()
        journal.update_run(request.run_id, data={"decisions": decided}, now=now)
        journal.append_event(
            request.run_id,
            "decision",
            {**routed.pending.to_json(), "decision": value},
            now=now,
        )


def _run_wave(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    launch: Launch,
    job: RenderedJob,
    index: int,
    records: list[TransactionRecord],
    job_ids: list[int],
    context: WaveContext,
) -> NpaError | None:
    """Launch one wave and watch it; spend ``--retries`` on payload failures and the
    infrastructure budget on proven transient ones, never one for the other."""
    from npa_infra.workflow import live

    command = live.resume_command(request.invocation, request.run_id)
    new_attempt = False
    exports: Mapping[str, Mapping[str, str]] | None = None
    while True:
        record = launch(job, index, new_attempt, exports=exports)
        records.append(record)
        budgets = _budgets(request, journal, index, clock.now())  # the wave row exists now
        error = live.outcome_error(record, command)
        if error is not None:
            return error
        assert record.job_id is not None  # SUBMITTED/ADOPTED carry the reconciled id
        job_ids.append(record.job_id)
        attempt = _attempt_of(journal, request.run_id, index)
        found = cancels.intent_of(journal, request.run_id, index, attempt)
        if found is not None:  # a resume finds npa's own cancel: carry it through (faults.md)
            step = _carry(request, journal, sky, clock, job, record, found, context, budgets)
            if not isinstance(step, resumption.Resumption):
                return step
            new_attempt, exports = True, step.exports
            continue
        result = recheck.watch_wave(  # an infrastructure verdict only after a fresh read
            functools.partial(
                watch.watch_job,
                run_id=request.run_id,
                wave_index=index,
                attempt=attempt,
                job_id=record.job_id,
                sky=sky,
                cluster=context.cluster,
                journal=journal,
                clock=clock,
                policy=context.policy,
                interval=context.interval,
                progress=context.progress,
                label=f"wave {index:02d} {record.job_name} (job {record.job_id})",
                read_queue=_per_tick(context.shared_queue, context.interval),
                read_pods=_per_tick(context.shared_pods, context.interval),
                job_name=record.job_name,
            ),
            functools.partial(
                recheck.recheck,
                run_id=request.run_id,
                wave_index=index,
                attempt=attempt,
                job_id=record.job_id,
                sky=sky,
                journal=journal,
                clock=clock,
                interval=context.interval,
            ),
        )
        Verdict = supervision.Verdict
        if result.verdict is Verdict.SUCCEEDED:
            return completion.validate_outputs(
                journal=journal,
                run_id=request.run_id,
                wave_index=index,
                attempt=attempt,
                what=f"wave {index:02d} ({record.job_name})",
                uris=context.outputs(index),
                schemas=context.schemas(index),
                store=context.store,
                now=clock.now,
            )
        if result.verdict is Verdict.PAYLOAD_FAILED and budgets["retries_left"] > 0:
            resumed = _resumption(request, journal, job, index, record, context, clock)
            if isinstance(resumed, NpaError):
                return resumed
            _spend(journal, request.run_id, index, budgets, "retries_left", result, clock)
            clock.sleep(RETRY_PAUSE)
            new_attempt, exports = True, resumed.exports
            continue
        key = (index, attempt)
        intent = _intend(request, journal, clock, key, record, result, budgets)
        if not isinstance(intent, resume.CancelIntent):
            return intent or _wave_failure(request, index, record, command, result)
        seen = resume.JobObservation.present(result.status) if result.status else None
        step = _carry(request, journal, sky, clock, job, record, intent, context, budgets, seen)
        if not isinstance(step, resumption.Resumption):
            return step
        new_attempt, exports = True, step.exports


@dataclass(frozen=True, slots=True)
class WaveContext:
    """What supervising a wave needs besides the launch: the cluster, the watch policy,
    and the independent recomputation of the wave's identity and outputs."""

    cluster: KubeCluster | None
    policy: supervision.WatchPolicy
    interval: float
    store: Callable[[], ObjectStore]
    recompute_digest: Callable[[int], str | recovery.Recomputed | None]
    outputs: Callable[[int], tuple[str, ...]]
    progress: Callable[[str], None] | None = None
    schemas: Callable[[int], Mapping[str, str]] = lambda index: {}  # output URI → schema label
    shared_queue: SharedQueue | None = None  # one queue read per tick for every run
    shared_pods: SharedPods | None = None  # one pod (and node) list per tick for every run


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _TickShared(Protocol[T_co]):
    def read(self, *, max_age: float, not_before: float) -> T_co: ...


def _per_tick(shared: _TickShared[T] | None, interval: float) -> Callable[[float], T] | None:
    """``watch_job``'s reader: the shared answer of this tick, taken since the watch began."""
    if shared is None:
        return None
    return lambda not_before: shared.read(max_age=interval, not_before=not_before)


def _resumption(
    request: LiveRequest,
    journal: Journal,
    job: RenderedJob,
    index: int,
    record: TransactionRecord,
    context: WaveContext,
    clock: Clock,
) -> resumption.Resumption | NpaError:
    """How the next attempt starts (checkpoint or restart), journaled before the launch;
    an unreadable checkpoint blocks the relaunch and spends no budget (§3)."""
    from npa_infra.workflow import live

    found = resumption.prepare(
        journal=journal,
        run_id=request.run_id,
        wave_index=index,
        job=job,
        store=context.store,
        now=clock.now,
    )
    blocked = found.blocked
    if blocked is None:
        return found
    where = blocked.declaration
    return UncertainOutcomeError(
        f"wave {index:02d} ({record.job_name}, job {record.job_id}) was not relaunched: the "
        f"checkpoint of {where.task} at {where.uri} could not be checked, so neither a "
        "checkpoint resume nor a restart is safe",
        remedy="rerun once the bucket is readable: "
        + live.resume_command(request.invocation, request.run_id),
    )


def _budgets(request: LiveRequest, journal: Journal, index: int, now: float) -> dict[str, int]:
    """The wave's persisted budgets; created from the flags the first time (never borrowed).

    ``*_left`` is what may still be spent, ``*_total`` the budget the wave was
    given (``status`` reports both; a journal from before totals has only ``*_left``).
    """
    for wave in journal.waves(request.run_id):
        if wave.wave_index == index and "retries_left" in wave.budgets:
            stored = {k: int(v) for k, v in wave.budgets.items() if isinstance(v, int)}
            return _extended(request, journal, index, stored, now) if request.resume else stored
    retries = int(request.extra.get("retries") or 0)
    recoveries = int(request.extra.get("max_infrastructure_recoveries", 1))
    budgets = {
        "retries_left": retries,
        "infrastructure_recoveries_left": recoveries,
        "retries_total": retries,
        "infrastructure_recoveries_total": recoveries,
    }
    journal.update_wave(request.run_id, index, budgets=budgets, now=now)
    return budgets


def _extended(
    request: LiveRequest, journal: Journal, index: int, budgets: dict[str, int], now: float
) -> dict[str, int]:
    """On ``--resume-run``, ``--retries N`` may raise (never lower) the payload budget.

    Issue 9: an adopted job proven terminal on resume retries through the same
    durable path when the operator asks for retries now. The wave may use N
    retries in all, so what is left is N minus the retries already spent, and
    never less than what the journal holds; ``retries_total`` becomes N. The
    infrastructure budget is not extended: its exhaustion is persisted and
    terminal.
    """
    used = sum(
        1
        for event in journal.events(request.run_id)
        if event.kind == "payload_retry" and event.data.get("wave") == index
    )
    wanted = int(request.extra.get("retries") or 0) - used
    if wanted <= budgets["retries_left"]:
        return budgets
    journal.append_event(
        request.run_id,
        "budget_extended",
        {
            "wave": index,
            "retries_left": wanted,
            "retries_total": wanted + used,
            "was": budgets["retries_left"],
            "used": used,
        },
        now=now,
    )
    budgets = {**budgets, "retries_left": wanted, "retries_total": wanted + used}
    journal.update_wave(request.run_id, index, budgets=budgets, now=now)
    return budgets


def _spend(
    journal: Journal,
    run_id: str,
    index: int,
    budgets: dict[str, int],
    which: str,
    result: watch.WatchResult,
    clock: Clock,
) -> None:
    budgets[which] -= 1
    now = clock.now()
    journal.update_wave(run_id, index, budgets=budgets, now=now)
    journal.append_event(
        run_id,
        "payload_retry" if which == "retries_left" else "infrastructure_recovery",
        {
            "wave": index,
            "verdict": result.verdict.value,
            "status": result.status,
            "blocker": result.blocker,
            **budgets,
        },
        now=now,
    )


def _intend(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    key: tuple[int, int],
    record: TransactionRecord,
    result: watch.WatchResult,
    budgets: dict[str, int],
) -> resume.CancelIntent | NpaError | None:
    """The cancel a finished watch calls for, journaled before it is sent (faults.md
    invariant 5); an error when the wave fails with nothing to cancel; None: no cancel."""
    assert record.job_id is not None
    index, attempt = key
    infrastructure = result.verdict is supervision.Verdict.INFRASTRUCTURE_FAILED
    code = result.status if infrastructure else (result.blocker or {}).get("code")
    left = budgets["infrastructure_recoveries_left"]
    reason = resume.reason_for(result.verdict, left)
    if left <= 0 and (infrastructure or result.verdict is supervision.Verdict.TRANSIENT_EXPIRED):
        journal.update_wave(
            request.run_id, index, status="infrastructure_budget_exhausted", now=clock.now()
        )
        if reason is None:  # the job already ended: there is nothing to cancel
            return _exhausted(_what(index, record), code)
    if reason is None:
        return None
    intent = resume.CancelIntent(
        job_id=record.job_id,
        wave=index,
        attempt=attempt,
        reason=reason,
        code=code,
        status=result.status,
        blocker=result.blocker,
        budget="infrastructure_recoveries_left" if reason.relaunches else None,
    )
    cancels.record(journal, request.run_id, intent, clock.now())
    return intent


def _carry(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    job: RenderedJob,
    record: TransactionRecord,
    intent: resume.CancelIntent,
    context: WaveContext,
    budgets: dict[str, int],
    first: resume.JobObservation | None = None,
) -> resumption.Resumption | NpaError | None:
    """Carry npa's own cancel through: the cancel, then the recovery it serves (the next
    attempt's resumption) or the stop it ends with; a resume takes the same path."""
    index = intent.wave
    settled = cancels.settle(journal, sky, clock, request.run_id, intent, first)
    if settled.decision.action is resume.Action.SUPERVISE:  # it succeeded before the cancel
        return completion.validate_outputs(
            journal=journal,
            run_id=request.run_id,
            wave_index=index,
            attempt=intent.attempt,
            what=f"wave {index:02d} ({record.job_name})",
            uris=context.outputs(index),
            schemas=context.schemas(index),
            store=context.store,
            now=clock.now,
        )
    if not intent.reason.relaunches:
        return _stopped(request, journal, clock, record, intent, settled.check)
    blocked = _prove_relaunch(request, journal, clock, record, intent, settled.check, context)
    if blocked is not None:
        return blocked
    resumed = _resumption(request, journal, job, index, record, context, clock)
    if isinstance(resumed, NpaError):
        return resumed
    if settled.decision.spend is not None:  # spent once, with the intent marked spent
        cancels.spend(journal, request.run_id, intent, budgets, clock.now())
    return resumed


def _stopped(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    record: TransactionRecord,
    intent: resume.CancelIntent,
    cancelled: recovery.Check,
) -> NpaError:
    """A stop: fail the wave with the recorded code once the cancel is proven; no budget."""
    what = _what(intent.wave, record)
    if intent.reason is not resume.CancelReason.PERMANENT_BLOCKER:
        return _exhausted(what, intent.code, cancelled)
    blocker = intent.blocker or {}
    journal.append_event(
        request.run_id,
        "permanent_blocker",
        {
            "wave": intent.wave,
            "job_id": intent.job_id,
            "blocker": blocker,
            "cancelled": cancelled.ok,
            "detail": cancelled.reason,
        },
        now=clock.now(),
    )
    detail = blocker.get("message") or blocker.get("reason") or ""
    message = f"{what} is blocked permanently: {intent.code}: {detail}".rstrip(": ")
    remedy = str(blocker.get("remedy") or "fix the cause shown, then submit a new run")
    if not cancelled.ok:
        return UncertainOutcomeError(message + f"; and {cancelled.reason}", remedy=remedy)
    return LaunchFailedError(message + f"; job {intent.job_id} was cancelled", remedy=remedy)


def _exhausted(what: str, cause: str | None, cancelled: recovery.Check | None = None) -> NpaError:
    message = f"{what} failed on infrastructure ({cause}) and the recovery budget is exhausted"
    remedy = (
        "raise --max-infrastructure-recoveries, or fix the capacity problem and submit a new run"
    )
    if cancelled is not None and not cancelled.ok:
        return UncertainOutcomeError(f"{message}; {cancelled.reason}", remedy=remedy)
    return LaunchFailedError(message, remedy=remedy)


def _what(index: int, record: TransactionRecord) -> str:
    return f"wave {index:02d} ({record.job_name}, job {record.job_id})"


def _prove_relaunch(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    record: TransactionRecord,
    intent: resume.CancelIntent,
    cancelled: recovery.Check,
    context: WaveContext,
) -> NpaError | None:
    """None when a new attempt may be created; otherwise why not (runtime-reference.md §3).

    ``cancelled`` is the proof of the old attempt's cancel (``cancels.settle``).
    """
    index, cause = intent.wave, intent.code
    what = _what(index, record)
    checks = [cancelled]
    attempt = journal.latest_attempt(request.run_id, index)
    expected = str((attempt.data if attempt else {}).get("yaml_sha256") or "") or None
    checks.append(recovery.identity_unchanged(expected, lambda: context.recompute_digest(index)))
    checks.append(recovery.outputs_absent(context.store, context.outputs(index)))
    journal.append_event(
        request.run_id,
        "relaunch_checks",
        {
            "wave": index,
            "cause": cause,
            "checks": [{"ok": c.ok, "reason": c.reason} for c in checks],
        },
        now=clock.now(),
    )
    failed = next((c for c in checks if not c.ok), None)
    if failed is None:
        return None
    message = f"{what} failed on infrastructure ({cause}); no relaunch: {failed.reason}"
    if failed.indeterminate:
        return UncertainOutcomeError(
            message, remedy="rerun the same command with --resume-run once the evidence is readable"
        )
    return LaunchFailedError(
        message, remedy="inspect the outputs or the change, then submit a new run"
    )


def _wave_failure(
    request: LiveRequest,
    index: int,
    record: TransactionRecord,
    command: str,
    result: watch.WatchResult,
) -> NpaError:
    what = f"wave {index:02d} ({record.job_name}, job {record.job_id})"
    if result.verdict in (supervision.Verdict.UNREADABLE, supervision.Verdict.TIMEOUT):
        return UncertainOutcomeError(
            f"{what} did not reach a terminal state: its status stayed unreadable, or "
            "--max-wait-seconds passed; the job was left running",
            remedy=f"check it with `npa workbench workflow status {request.run_id}`, then rerun: "
            f"{command}",
        )
    seen = resume.JobObservation.present(result.status) if result.status else None
    if seen is not None and resume.decide(None, seen).action is resume.Action.CANCELLED_BY_OPERATOR:
        return LaunchFailedError(  # no intent journaled: not npa's cancel, never relaunched
            f"{what} was cancelled outside this run's supervision (npa journaled no cancel "
            "of it); it is not relaunched",
            remedy=f"inspect: npa workbench workflow status {request.run_id}",
        )
    return LaunchFailedError(
        f"{what} ended {result.status}",
        remedy=f"inspect: npa workbench workflow status {request.run_id}",
    )


def _attempt_of(journal: Journal, run_id: str, wave_index: int) -> int:
    latest = journal.latest_attempt(run_id, wave_index)
    return latest.attempt if latest is not None else 1


def _cancel_requested(journal: Journal, run_id: str) -> bool:
    run = journal.get_run(run_id)
    return bool(run is not None and (run.data or {}).get("cancel_requested"))


def _finish(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    records: list[TransactionRecord],
    job_ids: list[int],
    error: NpaError | None,
    ledger: accounting.Ledger,
) -> LiveResult:
    """Journal the run's outcome, accounted over every planned job (``runs.outcome``):
    a run that left a planned job unlaunched, or whose evidence is unproven, never
    succeeds."""
    from npa_infra.workflow.live import LiveResult, resume_command

    decided, error = accounting.conclude(
        ledger,
        error,
        command=resume_command(request.invocation, request.run_id),
        run_id=request.run_id,
        # an error after the operator asked to cancel is the cancel's doing
        cancelled=error is not None and _cancel_requested(journal, request.run_id),
    )
    status = decided.status
    now = clock.now()
    journal.update_run(
        request.run_id,
        status=status,
        lifecycle_state=lifecycle.lifecycle_state(status),
        data={"sky_job_ids": job_ids},
        now=now,
    )
    journal.append_event(
        request.run_id,
        "outcome",
        {
            "status": status,
            "reason": decided.reason,
            "job": decided.job,
            "error": error.message if error else None,
        },
        now=now,
    )
    return LiveResult(
        run_id=request.run_id,
        workflow=request.workflow,
        mode=request.mode,
        status=status,
        job_id=job_ids[-1] if job_ids else None,
        job_ids=job_ids,
        submitted_yaml_path=None,
        transactions=[r.to_json() for r in records],
        error=error,
        exit_code=error.exit_code if error else 0,
    )
