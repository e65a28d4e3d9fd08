"""Watching one launched wave until ``runs.supervision`` says what happened to it.

Each tick reads ``sky jobs queue --all -v`` once (through ``read_queue``: the
supervisor shares one read per tick among every run on the controller,
``skypilot.sharedqueue``); while the job is PENDING or
STARTING it lists the job's pods once (by the whole-component job id in
SkyPilot's cluster label) and classifies the blocker (kubernetes.md §6.3).
Status changes and blockers are journaled as they are seen. A failed pod read
is a diagnostic, never a reason to act. A job missing from a readable answer
is typed as absent, not lost (``presence_of``): each such read is journaled
(``job_missing``), and only when the pure watch asks (``CONFIRM_MISSING``) is
the exact-name lookup made (``job_missing_lookup``), whose answer the watch
decides on. ``runs.liveness`` turns the same
observations into a heartbeat (journaled every ``heartbeat_seconds``) and a
one-off ``stale_progress`` warning when nothing observable changes for
``stale_after_seconds``; neither ever cancels anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from npa_infra.runs import liveness, supervision
from npa_infra.skypilot.models import QueueRecord, QueueResult, QueueVerdict

if TYPE_CHECKING:
    from npa_infra.gpus.catalog import GpuCatalog
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.kube.models import NodeInfo, PodObservation
    from npa_infra.kube.sharedpods import ClusterView
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.workflow.target.services import Clock

__all__ = [
    "MISSING_CODE",
    "WatchResult",
    "capacity_catalog",
    "diagnose_job",
    "presence_of",
    "watch_job",
]

MISSING_CODE = "JOB_MISSING_FROM_QUEUE"  # status and journal code of a job not listed (unknown)


@dataclass(frozen=True, slots=True)
class WatchResult:
    verdict: supervision.Verdict
    status: str | None
    blocker: dict[str, Any] | None  # the last PendingDiagnosis JSON, when there was one
    waited: float


def watch_job(
    *,
    run_id: str,
    wave_index: int,
    attempt: int,
    job_id: int,
    sky: SkyPilot,
    cluster: KubeCluster | None,
    journal: Journal,
    clock: Clock,
    policy: supervision.WatchPolicy,
    interval: float,
    progress: Callable[[str], None] | None = None,
    label: str = "",
    read_queue: Callable[[float], QueueResult] | None = None,
    read_pods: Callable[[float], ClusterView] | None = None,
    job_name: str | None = None,
    since: float | None = None,
    idle: Callable[[float], None] | None = None,
) -> WatchResult:
    """Poll until the pure watch decides; every observation that changes is journaled.

    A job missing from a readable answer is journaled (``job_missing``) and
    watched on; ``job_name`` is what the exact-name lookup confirming a
    persistent absence asks for (without it the absence is never confirmed).

    ``read_queue(not_before)`` answers each tick's queue read, and ``read_pods``
    the cluster's SkyPilot pods and nodes, with reads taken no earlier than this
    watch began and shared with the other supervisors of the controller (default:
    this job's own reads, made now). ``since``: the queue answer that found the job was
    read then, so a shared answer read since may serve the first tick (issue 19: the
    launch's lookup is the first poll). ``idle`` sleeps between ticks (default: the
    clock's sleep; the launch driver keeps the next launch's readiness window meanwhile).
    """
    state = supervision.WatchState.begin(clock.now())
    not_before = min(since, state.started) if since is not None else state.started
    alive = liveness.Liveness()
    where = _Where(run_id, wave_index, attempt, job_id, label or str(job_id))
    blocker: dict[str, Any] | None = None
    while True:
        queue = read_queue(not_before) if read_queue is not None else sky.queue(verbose=True)
        not_before = state.started  # after the first tick, only answers read while watching
        now = clock.now()
        presence, status = presence_of(queue, job_id)
        rows = [r for r in queue.records if r.job_id == job_id] if status is not None else []
        diagnosis = (
            _diagnose(cluster, job_id, rows, read_pods, state.started)
            if status in ("PENDING", "STARTING")
            else None
        )
        tick = supervision.Tick(
            now,
            presence,
            status,
            blocker_code=(diagnosis or {}).get("code"),
            blocker_class=(diagnosis or {}).get("class"),
        )
        previous = state
        state, verdict = supervision.decide(state, tick, policy)
        _record_presence(journal, where, previous, state, status, now, progress)
        if verdict is supervision.Verdict.CONFIRM_MISSING:  # the exact-name lookup it asks for
            state, verdict = _confirm(journal, where, state, policy, sky, clock, job_name)
        _record(journal, run_id, wave_index, attempt, job_id, previous, state, diagnosis, now)
        if progress is not None and (
            state.last_status != previous.last_status or state.blocker_code != previous.blocker_code
        ):
            blocked = (
                f" — {state.blocker_code} ({state.blocker_class})" if state.blocker_code else ""
            )
            progress(f"{label or job_id}: {state.last_status or 'status unreadable'}{blocked}")
        observation = liveness.Observation(now, status, _fingerprint(status, rows, diagnosis))
        alive, signals = liveness.observe(
            alive,
            observation,
            heartbeat_seconds=policy.heartbeat_seconds,
            stale_after=policy.stale_after_seconds,
        )
        for signal in signals:
            _signal(journal, where, signal, alive, observation, diagnosis, now - state.started)
            if progress is not None:
                progress(_says(where, signal, alive, observation, now - state.started))
        if diagnosis is not None:
            blocker = diagnosis
        if verdict is not supervision.Verdict.WAIT:
            ended = state.last_status if state.evidence is not None else status
            return WatchResult(verdict, ended, blocker, now - state.started)
        (idle or clock.sleep)(interval)


def presence_of(queue: QueueResult, job_id: int) -> tuple[supervision.Presence, str | None]:
    """The job in one queue answer, typed: present with its status, absent, or unknown."""
    if queue.verdict is QueueVerdict.UNAVAILABLE:
        return supervision.Presence.UNKNOWN, None
    found = queue.status_of(job_id)
    if found is None:  # one answer without the job proves nothing (runtime-reference.md §1)
        return supervision.Presence.ABSENT, None
    return supervision.Presence.PRESENT, found.value


def _record_presence(
    journal: Journal,
    where: _Where,
    previous: supervision.WatchState,
    state: supervision.WatchState,
    status: str | None,
    now: float,
    progress: Callable[[str], None] | None,
) -> None:
    """Journal each read that misses the job (``job_missing``) and its return (``job_reappeared``)."""
    base = {"wave": where.wave_index, "attempt": where.attempt, "job_id": where.job_id}
    if state.missing_reads > previous.missing_reads and state.missing_since is not None:
        held = now - state.missing_since
        journal.append_event(
            where.run_id,
            "job_missing",
            {
                **base,
                "code": MISSING_CODE,
                "class": "unknown",
                "reason": "missing_from_queue",
                "message": f"not listed by {state.missing_reads} readable queue answer(s) over "
                f"{held:.0f}s; unknown until the exact-name lookup agrees",
                "evidence": supervision.JOB_MISSING_FROM_QUEUE,
                "missing_since": state.missing_since,
                "missing_reads": state.missing_reads,
                "missing_seconds": round(held, 3),
            },
            now=now,
        )
        if progress is not None and state.missing_reads == 1:
            progress(f"{where.label}: not in this queue answer; unknown, still watching")
    elif previous.missing_reads and not state.missing_reads and status is not None:
        journal.append_event(
            where.run_id,
            "job_reappeared",
            {**base, "status": status, "missing_reads": previous.missing_reads},
            now=now,
        )
        if progress is not None:
            progress(f"{where.label}: listed again ({status})")


def _confirm(
    journal: Journal,
    where: _Where,
    state: supervision.WatchState,
    policy: supervision.WatchPolicy,
    sky: SkyPilot,
    clock: Clock,
    job_name: str | None,
) -> tuple[supervision.WatchState, supervision.Verdict]:
    """Execute ``CONFIRM_MISSING``: a fresh exact-name lookup, journaled, then decided."""
    from npa_infra.workflow.execution.launcher import reconcile

    found = reconcile(sky, job_name, clock.now()) if job_name else None
    now = clock.now()
    lookup = supervision.lookup_of(found, where.job_id, now)
    journal.append_event(
        where.run_id,
        "job_missing_lookup",
        {
            "wave": where.wave_index,
            "attempt": where.attempt,
            "job_id": where.job_id,
            "job_name": job_name,
            "answer": lookup.answer.value,
            "lookup": found.to_json() if found is not None else None,
        },
        now=now,
    )
    return supervision.decide(state, lookup, policy)


def _diagnose(
    cluster: KubeCluster | None,
    job_id: int,
    rows: list[QueueRecord],
    read_pods: Callable[[float], ClusterView] | None,
    since: float,
) -> dict[str, Any] | None:
    """This tick's pending diagnosis, from the shared pod list when there is one."""
    if read_pods is None or cluster is None:
        return diagnose_job(cluster, job_id, rows)
    from npa_infra.errors import KubeError
    from npa_infra.kube import failures, pending, sharedpods

    name = next((r.cluster_name_on_cloud for r in rows if r.cluster_name_on_cloud), None)
    try:
        pods, nodes = read_pods(since)
    except KubeError as exc:
        return pending.diagnostic_failure(
            failures.kind_of(exc), exc.message, job_id=job_id
        ).to_json()
    return diagnose_job(
        cluster, job_id, rows, pods=sharedpods.for_job(pods, job_id, name), nodes=nodes
    )


@dataclass(frozen=True, slots=True)
class _Where:
    run_id: str
    wave_index: int
    attempt: int
    job_id: int
    label: str


def _fingerprint(
    status: str | None, rows: list[QueueRecord], diagnosis: dict[str, Any] | None
) -> tuple[str, ...]:
    """Everything this tick observed of the job: a change in any part is progress."""
    tasks = tuple(f"task {r.task_id}: {r.status.value}" for r in sorted(rows, key=_task))
    pods = diagnosis or {}
    blocker = tuple(str(pods.get(k) or "") for k in ("code", "reason", "pod")) if pods else ()
    return (str(status), *tasks, *blocker)


def _task(record: QueueRecord) -> int:
    return record.task_id


def _signal(
    journal: Journal,
    where: _Where,
    signal: liveness.Signal,
    alive: liveness.Liveness,
    observation: liveness.Observation,
    diagnosis: dict[str, Any] | None,
    waited: float,
) -> None:
    """Journal a liveness signal: what the supervisor saw, and for how long it has held."""
    pods = diagnosis or {}
    journal.append_event(
        where.run_id,
        signal.value,
        {
            "wave": where.wave_index,
            "attempt": where.attempt,
            "job_id": where.job_id,
            "status": observation.status,
            "blocker": pods.get("code"),
            "pod": pods.get("pod"),
            "reason": pods.get("reason"),
            "unchanged_seconds": round(alive.unchanged_for(observation.now), 3),
            "waited_seconds": round(waited, 3),
        },
        now=observation.now,
    )


def _says(
    where: _Where,
    signal: liveness.Signal,
    alive: liveness.Liveness,
    observation: liveness.Observation,
    waited: float,
) -> str:
    """One line for people (stderr), never for a machine."""
    status = observation.status or "status unreadable"
    held = alive.unchanged_for(observation.now)
    if signal is liveness.Signal.STALE_PROGRESS:
        return (
            f"{where.label}: warning: no progress for {held:.0f}s (still {status}); "
            "the job is left alone"
        )
    if signal is liveness.Signal.PROGRESS_RESUMED:
        return f"{where.label}: progress resumed ({status})"
    return f"{where.label}: {status}, supervised for {waited:.0f}s"


def diagnose_job(
    cluster: KubeCluster | None,
    job_id: int,
    rows: list[Any],
    *,
    pods: Sequence[PodObservation] | None = None,
    nodes: Sequence[NodeInfo] | None = None,
) -> dict[str, Any] | None:
    """The pending reason of the job's pods (kubernetes.md §6); a failed read is a
    diagnostic record, never hidden and never acted on. None when there are no pods.

    ``pods``/``nodes``, when given, were already read for many jobs at once
    (``workflow status --all``: one pod list and one node list per tick), and
    replace this job's own ``job_pods``/``nodes`` reads.
    """
    if cluster is None:
        return None
    from npa_infra.errors import KubeError
    from npa_infra.kube import failures, pending

    name = next((r.cluster_name_on_cloud for r in rows if r.cluster_name_on_cloud), None)
    try:
        found = list(pods) if pods is not None else cluster.job_pods(job_id, cluster_name=name)
        if not found:
            return None
        seen = list(nodes) if nodes is not None else cluster.nodes()
    except KubeError as exc:
        return pending.diagnostic_failure(
            failures.kind_of(exc), exc.message, job_id=job_id
        ).to_json()
    return pending.diagnose(
        found,
        job_id=job_id,
        nodes_not_ready=pending.not_ready_nodes(seen),
        catalog=capacity_catalog(cluster.context, seen),
    ).to_json()


def capacity_catalog(context: str, nodes: Sequence[NodeInfo]) -> GpuCatalog:
    """The GPU shapes the context could *ever* offer, for GPU_SHAPE_IMPOSSIBLE (§6.3 row 7).

    Unlike the launch-time catalog (``gpus``: eligible nodes only), a node that is
    NotReady, cordoned or tainted still counts: that is a transient state, and a
    pod waiting for it is blocked by capacity or readiness, never by an impossible
    shape. Only a request larger than every labelled node's allocatable GPUs, or
    for a product no node carries, is proven impossible.
    """
    from npa_infra.gpus import catalog

    whole = [n._replace(ready=True, unschedulable=False, taints=()) for n in nodes]
    return catalog.build(context, whole)


def _record(
    journal: Journal,
    run_id: str,
    wave_index: int,
    attempt: int,
    job_id: int,
    previous: supervision.WatchState,
    state: supervision.WatchState,
    diagnosis: dict[str, Any] | None,
    now: float,
) -> None:
    if state.last_status != previous.last_status and state.last_status is not None:
        # a confirmed absence is FAILED_CONTROLLER with its evidence (runtime-reference.md §1)
        evidence = {"evidence": state.evidence} if state.evidence is not None else {}
        journal.update_attempt(
            run_id,
            wave_index,
            attempt,
            sky_status=state.last_status,
            data=evidence or None,
            now=now,
        )
        journal.append_event(
            run_id,
            "job_status",
            {"wave": wave_index, "job_id": job_id, "status": state.last_status, **evidence},
            now=now,
        )
    if diagnosis is not None and state.blocker_code != previous.blocker_code:
        journal.update_attempt(run_id, wave_index, attempt, data={"blocker": diagnosis}, now=now)
        journal.append_event(
            run_id, "blocker", {"wave": wave_index, "job_id": job_id, **diagnosis}, now=now
        )
