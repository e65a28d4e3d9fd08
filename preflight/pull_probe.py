"""The in-cluster pull probe over a preflight report (kubernetes.md §9, cli.md §1.3).

Runs after the registry checks, only for rows that are registry-``ok``, and
only for the Kubernetes steps that use them (``probe_paths.authority``). Per
row, in this order:

- no Kubernetes step and no undecided one → unchanged (a VM pulls with its
  own credentials; no pod to probe);
- a step whose profile omits ``cloud`` while no ``--infra`` decides it →
  ``target_pull_unverified`` (never guessed);
- ``--plan-only`` → ``target_pull_unverified``: plan-only creates no pod;
- no exact context (``--infra k8s/<ctx>``, or submit's stack context) →
  ``target_pull_unverified``: there is no fallback to the kubeconfig's
  current context;
- otherwise every distinct probe path of its Kubernetes steps is probed
  (``probe_runner``), concurrently across rows and paths, at most
  ``MAX_WORKERS`` at a time, each path once per digest. All compatible →
  the row stays ``ok`` with ``probe`` filled; any incompatible →
  ``probe_incompatible``; anything else (indeterminate, or a path that
  cannot be rebuilt) → ``probe_indeterminate``. The row's ``probe`` is the
  record that decided it.

Compatible records are cached (``probe_cache``) under the digest, the
contract and the path; when the path requests no pull secrets the key also
holds the ServiceAccount's current secrets, read first. A cache hit creates
no pod. On ``KeyboardInterrupt`` the pods still in flight are deleted by UID
from the calling thread, the workers are told to stop (each cleans up its
own pod), and the interrupt propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from npa_infra.errors import KubeError
from npa_infra.gpus import catalog as gpu_catalog
from npa_infra.kube.base import PodProber
from npa_infra.registry import reference
from npa_infra.registry.models import (
    CheckResult,
    CheckStatus,
    ImageRef,
    ProbeRecord,
    ProbeVerdict,
)
from npa_infra.render import tasks
from preflight import probe_paths, probe_runner
from preflight.images import ImagePreflightReport
from preflight.probe_cache import ProbeCache, cache_key
from preflight.probe_ledger import ProbeLedger
from preflight.probe_paths import Authority, PathProblem, ProbePath
from preflight.probe_runner import LivePods, ProbeJob, Tools
from preflight.probe_verdict import Reason
from preflight.targets import StepImage

__all__ = ["MAX_WORKERS", "ProbeRequest", "probe_report"]

MAX_WORKERS = 8
RERUN = "npa workbench workflow preflight-images SPEC"
Opener = Callable[[str], PodProber]


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """Where and how to probe; ``context`` None means no exact context was given."""

    run_id: str
    contract: str
    context: str | None = None
    infra: str | None = None  # decides steps whose profile omits `cloud`
    deadline_seconds: float = 1800.0  # --image-bootstrap-timeout-seconds; 0 = none
    plan_only: bool = False
    sky_config: Mapping[str, Any] = field(default_factory=dict)
    base_account: str = "skypilot-service-account"
    gpu_override: str = ""


@dataclass(frozen=True, slots=True)
class _Outcome:
    record: ProbeRecord
    path: ProbePath | None = None


def _unverified(row: CheckResult, detail: str, remedy: str) -> CheckResult:
    return row.model_copy(
        update={"status": CheckStatus.TARGET_PULL_UNVERIFIED, "detail": detail, "remedy": remedy}
    )


def _skip(
    row: CheckResult, steps: Sequence[StepImage], request: ProbeRequest
) -> CheckResult | None:
    """The row's status when no pod is created for it, else None (it needs probing)."""
    kinds = {s.state: probe_paths.authority(s.profile, request.infra) for s in steps}
    unknown = [state for state, kind in kinds.items() if kind is Authority.UNKNOWN]
    if unknown:  # cli.md §1.3: a profile without `cloud` needs an exact --infra
        return _unverified(
            row,
            f"state(s) {', '.join(unknown)} omit `cloud` and no --infra decides where they run; "
            "npa-infra never guesses VM versus Kubernetes, so the target pull is unproven",
            "set `cloud` in the resources profile, or pass --infra k8s/<context>",
        )
    if Authority.KUBERNETES not in kinds.values():
        return row  # VM steps only: no pod to probe
    if request.plan_only:  # cli.md §1.4: plan-only creates no probe pod
        return _unverified(
            row,
            "submit --plan-only creates no pod: the in-cluster pull probe was not run",
            f"prove the pull with `{RERUN} --infra k8s/<context>`",
        )
    if request.context is None:  # kubernetes.md preamble: no ambient fallback
        return _unverified(
            row,
            "no exact --infra k8s/<context>: the in-cluster pull was not probed (there is no "
            "fallback to the kubeconfig's current context)",
            f"rerun `{RERUN} --infra k8s/<context>`",
        )
    if not row.digest or not isinstance(reference.parse(row.image), ImageRef):
        return row.model_copy(
            update={
                "status": CheckStatus.PROBE_INDETERMINATE,
                "detail": "the registry reported no digest, so no pod can run the image by digest",
                "remedy": f"rerun `{RERUN}`",
            }
        )
    return None


def _remedy(record: ProbeRecord, path: ProbePath | None, context: str) -> str:
    rerun = f"rerun `{RERUN} --infra k8s/{context}`"
    reason = record.reason.split(":", 1)[0]
    if reason == Reason.CLEANUP_FAILED and record.pod:
        return (
            f"inspect the probe pod first: `kubectl --context {context} -n {record.namespace} get "
            f"pod {record.pod} -o yaml`; delete it only after checking its uid, then {rerun}"
        )
    if reason == Reason.DEADLINE:
        return f"a large image may need longer: {rerun} --image-bootstrap-timeout-seconds 0"
    if reason == Reason.IDENTITY_DRIFT:
        return (
            "a RuntimeClass or admission webhook changes the pod; state those fields in the "
            f"profile's pod_config so the job and the probe request the same pod, then {rerun}"
        )
    if reason == Reason.PERMANENT_WAITING and path is not None:
        secrets = ", ".join(path.pull_secrets) or "its imagePullSecrets"
        return (
            f"give ServiceAccount {path.namespace}/{path.service_account} ({secrets}) pull "
            f"access to the image, or fix the reference, then {rerun}"
        )
    if reason == Reason.CONTAINER_FAILED:
        return (
            "the image lacks what SkyPilot's bootstrap needs (rsync, sshd, service, a writable "
            f"HOME, passwordless sudo for a non-root user); rebuild it, then {rerun}"
        )
    return rerun


def _apply(
    row: CheckResult, outcomes: Sequence[_Outcome], problems: Sequence[PathProblem], context: str
) -> CheckResult:
    worst = next((o for o in outcomes if o.record.status is ProbeVerdict.INCOMPATIBLE), None)
    worst = worst or next(
        (o for o in outcomes if o.record.status is ProbeVerdict.INDETERMINATE), None
    )
    if worst is None and not problems:
        return row.model_copy(update={"probe": outcomes[0].record if outcomes else None})
    if worst is None:  # only paths that could not be rebuilt
        problem = problems[0]
        return row.model_copy(
            update={
                "status": CheckStatus.PROBE_INDETERMINATE,
                "detail": f"state {problem.state}: {problem.reason}",
                "remedy": f"check `npa workbench workflow gpus --cluster {context}`, then "
                f"rerun `{RERUN} --infra k8s/{context}`",
                "probe": outcomes[0].record if outcomes else None,
            }
        )
    record = worst.record
    status = (
        CheckStatus.PROBE_INCOMPATIBLE
        if record.status is ProbeVerdict.INCOMPATIBLE
        else CheckStatus.PROBE_INDETERMINATE
    )
    where = f"context {context}"
    if worst.path is not None:
        where += f", {worst.path.namespace}/{worst.path.service_account}"
    return row.model_copy(
        update={
            "status": status,
            "detail": f"in-cluster pull probe ({where}): {record.reason}",
            "remedy": _remedy(record, worst.path, context),
            "probe": record,
        }
    )


class _Session:
    """One context's probes: paths, cache, concurrency, interrupt cleanup."""

    def __init__(
        self, prober: PodProber, request: ProbeRequest, cache: ProbeCache | None, tools: Tools
    ) -> None:
        self.prober = prober
        self.request = request
        self.cache = cache
        self.tools = tools
        self.live = LivePods()
        self.ledger: ProbeLedger | None = None  # the durable record of this context's pods
        self._namespace: str | None = None
        self._catalog_read = False
        self._gpu: gpu_catalog.GpuCatalog | None = None

    def paths(
        self, steps: Sequence[StepImage], context: str
    ) -> tuple[list[ProbePath], list[PathProblem]]:
        """The distinct paths of the Kubernetes steps, and the steps whose path cannot be built."""
        if self._namespace is None:
            self._namespace = self.prober.namespace()
        namespace = self._namespace
        catalog = self._catalog(steps, context)
        found: dict[str, ProbePath] = {}
        problems: list[PathProblem] = []
        for step in steps:
            built = probe_paths.probe_path(
                step.state,
                step.profile,
                tasks.task_pod_config(step.profile, step.image),
                context=context,
                namespace=namespace,
                sky_config=self.request.sky_config,
                base_account=self.request.base_account,
                catalog=catalog,
                gpu_override=self.request.gpu_override,
            )
            if isinstance(built, PathProblem):
                problems.append(built)
            else:
                found.setdefault(built.key(), built)
        return list(found.values()), problems

    def _catalog(self, steps: Sequence[StepImage], context: str) -> gpu_catalog.GpuCatalog | None:
        if not any(s.profile.get("accelerators") for s in steps):
            return None
        if not self._catalog_read:
            self._catalog_read = True
            try:
                self._gpu = gpu_catalog.build(context, self.prober.nodes())
            except KubeError:
                self._gpu = None  # GPU paths then report that the catalog was not read
        return self._gpu

    def key(self, job: ProbeJob) -> str | None:
        key = cache_key(job.digest, job.contract, job.path)
        if job.path.pull_secrets:
            return key
        try:
            inherited = self.prober.service_account_pull_secrets(
                job.path.namespace, job.path.service_account
            )
        except KubeError:
            return None
        return None if inherited is None else f"{key}|sa:{','.join(inherited)}"

    def run(self, job: ProbeJob) -> ProbeRecord:
        key = self.key(job) if self.cache is not None else None
        cached = self.cache.get(key) if self.cache is not None and key else None
        if cached is not None:
            return cached.model_copy(update={"reason": f"cached: {cached.reason}"})
        record = probe_runner.run_probe(
            self.prober,
            job,
            deadline_seconds=self.request.deadline_seconds,
            tools=self.tools,
            live=self.live,
            ledger=self.ledger,
        )
        if self.cache is not None and key:
            self.cache.put(key, record)
        return record

    def run_all(self, jobs: Sequence[ProbeJob]) -> list[ProbeRecord]:
        if len(jobs) == 1:
            return [self.run(jobs[0])]
        pool = ThreadPoolExecutor(
            max_workers=min(MAX_WORKERS, len(jobs)), thread_name_prefix="npa-pull-probe"
        )
        try:
            futures = [pool.submit(self.run, job) for job in jobs]
            return [future.result() for future in futures]
        except KeyboardInterrupt:
            self.tools.cancel.set()
            for namespace, name, uid in self.live.snapshot():
                probe_runner.cleanup(self.prober, namespace, name, uid, self.tools, self.ledger)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _jobs(
    pending: Sequence[tuple[CheckResult, list[ProbePath]]], request: ProbeRequest
) -> list[ProbeJob]:
    jobs: dict[tuple[str, str], ProbeJob] = {}
    for row, paths in pending:
        parsed, digest = reference.parse(row.image), row.digest or ""
        image = parsed.pinned(digest) if isinstance(parsed, ImageRef) else row.image
        for path in paths:
            jobs.setdefault(
                (digest, path.key()),
                ProbeJob(
                    image=image,
                    digest=digest,
                    platform_digest=row.platform_digest,
                    path=path,
                    run_id=request.run_id,
                    contract=request.contract,
                ),
            )
    return list(jobs.values())


def _triage(
    report: ImagePreflightReport, steps: Sequence[StepImage], request: ProbeRequest
) -> tuple[list[CheckResult], list[tuple[int, CheckResult, list[StepImage]]]]:
    """Rows decided without a pod, and the rows to probe with their Kubernetes steps."""
    by_image: dict[str, list[StepImage]] = {}
    for step in steps:
        by_image.setdefault(step.image, []).append(step)
    rows = list(report.rows)
    todo: list[tuple[int, CheckResult, list[StepImage]]] = []
    for index, row in enumerate(rows):
        if row.status is not CheckStatus.OK:
            continue  # registry-ok rows only
        mine = by_image.get(row.image, [])
        decided = _skip(row, mine, request)
        if decided is not None:
            rows[index] = decided
            continue
        kube = [
            s
            for s in mine
            if probe_paths.authority(s.profile, request.infra) is Authority.KUBERNETES
        ]
        todo.append((index, row, kube))
    return rows, todo


def probe_report(
    report: ImagePreflightReport,
    steps: Sequence[StepImage],
    request: ProbeRequest,
    *,
    open_prober: Opener,
    cache: ProbeCache | None = None,
    tools: Tools | None = None,
    ledger: Callable[[str], ProbeLedger] | None = None,
) -> ImagePreflightReport:
    """``report`` with each registry-``ok`` Kubernetes row proven in-cluster, or marked unproven.

    ``open_prober`` is called (once, only when some row needs a pod) with the
    exact context; the prober is closed afterwards when it has ``close``.

    Raises:
        KubeError: no kubeconfig, or the context is not in it (a failed precondition).
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
        KeyboardInterrupt: after every created probe pod was cleaned up.
    """
    rows, todo = _triage(report, steps, request)
    if not todo or request.context is None:
        return report.model_copy(update={"rows": tuple(rows)})
    context = request.context
    prober = open_prober(context)
    try:
        session = _Session(prober, request, cache, tools or Tools())
        if ledger is not None:  # pods an earlier, killed run left: deleted before new ones
            session.ledger = ledger(context)
            probe_runner.recover(prober, session.ledger, session.tools)
        pending = []
        for index, row, kube in todo:
            paths, problems = session.paths(kube, context)
            pending.append((index, row, paths, problems))
        jobs = _jobs([(r, p) for _, r, p, _ in pending], request)
        records = dict(
            zip(((j.digest, j.path.key()) for j in jobs), session.run_all(jobs), strict=True)
        )
        for index, row, paths, problems in pending:
            outcomes = [_Outcome(records[(row.digest or "", p.key())], p) for p in paths]
            rows[index] = _apply(row, outcomes, problems, context)
    finally:
        close = getattr(prober, "close", None)
        if callable(close):
            close()
    return report.model_copy(update={"rows": tuple(rows)})
