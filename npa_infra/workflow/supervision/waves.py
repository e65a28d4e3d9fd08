"""The wave loop of a live run: launch each rendered job in order and see it to its end.

One-shot: the run is one serial pipeline; it is done when its launch
transaction ends (submitted and reconciled, or adopted). Runtime: each wave
is launched, then watched (``watch``; one shared ``sky jobs queue --all -v``
per tick) until its job is terminal; a payload failure spends ``--retries``
(``budgets``), an infrastructure verdict the recovery budget through npa's own
cancel (``interventions``); decision artifacts route the next waves
(``routing``). Every planned job the walk takes goes into the ledger
(``accounting``), so the run's outcome accounts for all of them. The outcome
of every step is journaled before the next one starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from npa_infra.errors import InterruptedRunError, NpaError, RunCancelledError
from npa_infra.runs import lifecycle, resume, supervision
from npa_infra.runs.models import TransactionRecord
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.execution.liverun import LiveResult, outcome_error, resume_command
from npa_infra.workflow.supervision import (
    accounting,
    budgets,
    cancels,
    completion,
    interventions,
    recheck,
    resumption,
    routing,
    watch,
)
from npa_infra.workflow.supervision.interventions import WaveContext

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.kube.sharedpods import SharedPods
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.sharedqueue import SharedQueue
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.execution.launcher import LaunchDriver
    from npa_infra.workflow.execution.liverun import LiveRequest
    from npa_infra.workflow.target.services import Clock

__all__ = ["RETRY_PAUSE", "Launch", "run_waves", "watch_policy"]

RETRY_PAUSE = 30.0  # runtime-reference.md §3: N+1 attempts, 30 s apart


class Launch(Protocol):
    """Launch (or re-enter) a wave; ``new_attempt`` starts the next immutable attempt."""

    def __call__(
        self,
        job: RenderedJob,
        wave_index: int,
        new_attempt: bool = False,
        exports: Mapping[str, Mapping[str, str]] | None = None,
    ) -> TransactionRecord: ...


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
    records: list[TransactionRecord] = []
    job_ids: list[int] = []
    # every planned job the walk takes, for the run's outcome (runs.outcome)
    ledger = accounting.Ledger(supervised=request.mode == "runtime")
    ledger.plan(request.jobs)
    command = resume_command(request.invocation, request.run_id)
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
                idle=driver.idle,  # issue 19: readiness kept between supervision ticks
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
    command = resume_command(request.invocation, request.run_id)
    for index, job in enumerate(request.jobs):
        record = launch(job, index)
        records.append(record)
        error = outcome_error(record, command)
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
    idle: Callable[[float], None] | None = None,
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
    assert request.replan is not None
    run = journal.get_run(request.run_id)
    decided: dict[str, str] = dict((run.data if run else {}).get("decisions") or {})
    done: dict[int, str] = {}  # position in the route -> the job run there
    command = resume_command(request.invocation, request.run_id)
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
        # the route of this round (``routed`` below), never a re-plan per wave (issue 19)
        outputs=lambda index: tuple(routed.outputs.get(index, ())),
        schemas=lambda index: routed.schemas,
        progress=progress,
        shared_queue=shared_queue,
        shared_pods=shared_pods,
    )
    while True:
        routed = replan(decided)  # once per round: planned once per decision set
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
                request, journal, sky, clock, launch, job, index, records, job_ids, context, idle
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
    idle: Callable[[float], None] | None = None,
) -> NpaError | None:
    """Launch one wave and watch it; spend ``--retries`` on payload failures and the
    infrastructure budget on proven transient ones, never one for the other."""
    command = resume_command(request.invocation, request.run_id)
    new_attempt = False
    exports: Mapping[str, Mapping[str, str]] | None = None
    while True:
        record = launch(job, index, new_attempt, exports=exports)
        records.append(record)
        allowed = budgets.load(request, journal, index, clock.now())  # the wave row exists now
        error = outcome_error(record, command)
        if error is not None:
            return error
        assert record.job_id is not None  # SUBMITTED/ADOPTED carry the reconciled id
        job_ids.append(record.job_id)
        attempt = _attempt_of(journal, request.run_id, index)
        found = cancels.intent_of(journal, request.run_id, index, attempt)
        if found is not None:  # a resume finds npa's own cancel: carry it through (faults.md)
            step = interventions.carry(
                request, journal, sky, clock, job, record, found, context, allowed
            )
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
                since=_found_at(record),
                idle=idle,
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
        if result.verdict is Verdict.PAYLOAD_FAILED and allowed["retries_left"] > 0:
            resumed = interventions.next_start(request, journal, job, index, record, context, clock)
            if isinstance(resumed, NpaError):
                return resumed
            budgets.spend(journal, request.run_id, index, allowed, "retries_left", result, clock)
            clock.sleep(RETRY_PAUSE)
            new_attempt, exports = True, resumed.exports
            continue
        key = (index, attempt)
        intent = interventions.intend(request, journal, clock, key, record, result, allowed)
        if not isinstance(intent, resume.CancelIntent):
            return intent or interventions.wave_failure(request, index, record, command, result)
        seen = resume.JobObservation.present(result.status) if result.status else None
        step = interventions.carry(
            request, journal, sky, clock, job, record, intent, context, allowed, seen
        )
        if not isinstance(step, resumption.Resumption):
            return step
        new_attempt, exports = True, step.exports


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _TickShared(Protocol[T_co]):
    def read(self, *, max_age: float, not_before: float) -> T_co: ...


def _per_tick(shared: _TickShared[T] | None, interval: float) -> Callable[[float], T] | None:
    """``watch_job``'s reader: the shared answer of this tick, taken since the watch began."""
    if shared is None:
        return None
    return lambda not_before: shared.read(max_age=interval, not_before=not_before)


def _found_at(record: TransactionRecord) -> float | None:
    """When the lookup that found the job was made: a shared answer read since then lists
    it, so it may serve the first supervision tick (issue 19: no poll right after the id)."""
    from npa_infra.runs.models import ReconciliationState

    last = record.reconciliations[-1] if record.reconciliations else None
    if last is None or last.state is not ReconciliationState.FOUND or last.at <= 0:
        return None
    return last.at


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
