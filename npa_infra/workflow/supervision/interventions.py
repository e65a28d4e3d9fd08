"""What a finished watch calls for: npa's own cancel, then the relaunch or the stop.

A wave's watch ended with a verdict (``runs.supervision``); this module turns
it into the step the fault model allows (faults.md): the cancel intent is
journaled before the cancel is sent (``intend``); ``carry`` drives it to its
proven outcome (``cancels.settle``) and then either proves a relaunch safe
(``runtime-reference.md`` §3: cancel verified, identity unchanged, outputs
absent) and prepares the next attempt's start (``next_start``), or fails the
wave with the recorded cause. A resume that finds a journaled intent takes the
same path, so a crash between the cancel and its record never costs budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from npa_infra.errors import LaunchFailedError, NpaError, UncertainOutcomeError
from npa_infra.runs import resume, supervision
from npa_infra.runs.models import TransactionRecord
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.execution.liverun import resume_command
from npa_infra.workflow.supervision import cancels, completion, resumption

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.kube.sharedpods import SharedPods
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.sharedqueue import SharedQueue
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.execution.liverun import LiveRequest
    from npa_infra.workflow.supervision.watch import WatchResult
    from npa_infra.workflow.target.services import Clock

__all__ = ["WaveContext", "carry", "intend", "next_start", "wave_failure"]


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


def next_start(
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
        + resume_command(request.invocation, request.run_id),
    )


def intend(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    key: tuple[int, int],
    record: TransactionRecord,
    result: WatchResult,
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


def carry(
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
    resumed = next_start(request, journal, job, index, record, context, clock)
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


def wave_failure(
    request: LiveRequest,
    index: int,
    record: TransactionRecord,
    command: str,
    result: WatchResult,
) -> NpaError:
    """The error of a wave that ends with nothing to cancel and nothing to relaunch."""
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
