"""Read a context's GPU catalog and resolve a plan's GPU requests against it.

``gpus`` backs ``npa workbench workflow gpus`` (cli.md §1.9). ``resolve_for_plan``
is the submit-time remap (runtime-reference.md §14): with an exact
``--infra k8s/<ctx>`` it reads the nodes through a ``KubeCluster``, rewrites
each Kubernetes GPU step to the name SkyPilot matches on that cluster, and
refuses, before anything is rendered or launched, a request the cluster
cannot satisfy or that needs more GPUs than one node offers. It never
contacts a cluster without an exact context, and is skipped when the
operator asked for verbatim names (``--no-resolve-accelerators``) or set
``NPA_WORKFLOW_GPU_ACCELERATOR`` (the environment override wins).

The cluster comes from ``Services.gpu_cluster`` (``workflow.target.services``),
which tests replace with the Kubernetes double.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra.errors import PreflightError
from npa_infra.plan.model import Plan
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:  # the Kubernetes models load only where a cluster is read (issue 19)
    from npa_infra.gpus import catalog, resolve
    from npa_infra.kube.base import KubeCluster

__all__ = [
    "AcceleratorOutcome",
    "Catalogs",
    "GpusReport",
    "context_of",
    "gpus",
    "read_catalog",
    "resolve_for_plan",
]

GPU_OVERRIDE_ENV = "NPA_WORKFLOW_GPU_ACCELERATOR"


def _close(cluster: KubeCluster) -> None:
    close = getattr(cluster, "close", None)
    if callable(close):
        close()


def read_catalog(cluster: KubeCluster) -> catalog.GpuCatalog:
    """The GPU catalog of the cluster's context from one node listing.

    Raises:
        KubeError: the node listing failed.
    """
    from npa_infra.gpus import catalog

    return catalog.build(cluster.context, cluster.nodes())


@dataclass(slots=True)
class Catalogs:
    """The GPU catalog of each context, listed once for a run and then reused.

    A run's ``--infra k8s/<ctx>`` catalog is fixed at submit (issue 19): the
    submit's remap and every re-render of the route (``reidentification.Router``)
    share one node listing; a resume is a new run of ``submit`` and lists once again.
    """

    env: Mapping[str, str]
    services: Services | None = None
    _read: dict[str, catalog.GpuCatalog] = field(default_factory=dict)

    def __call__(self, context: str) -> catalog.GpuCatalog:
        """The catalog of ``context``, listed on the first call.

        Raises:
            KubeError: the kubeconfig, the context or the node listing failed
                (nothing is kept, so the next call lists again).
        """
        found = self._read.get(context)
        if found is None:
            cluster = (self.services or Services()).gpu_cluster(context, self.env)
            try:
                found = read_catalog(cluster)
            finally:
                _close(cluster)
            self._read[context] = found
        return found


def context_of(infra: str | None) -> str | None:
    """The exact context of ``--infra k8s/<ctx>``; None for anything else."""
    if not infra or not infra.startswith("k8s/"):
        return None
    return infra.removeprefix("k8s/") or None


@dataclass(frozen=True, slots=True)
class GpusReport:
    """``gpus --json``: the catalog (kubernetes.md §8.4), plus ``steps`` with ``--spec``."""

    catalog: catalog.GpuCatalog
    steps: list[resolve.StepResolution] | None = None

    @property
    def exit_code(self) -> int:
        """1 when a spec step could not run on this cluster as submitted; otherwise 0."""
        return 1 if self.steps and any(not s.resolution.verdict.ok for s in self.steps) else 0

    def to_json(self) -> dict[str, Any]:
        out = {"status": "refused" if self.exit_code else "ok", **self.catalog.to_json()}
        if self.steps is not None:
            out["steps"] = [{**s.to_json(), "message": s.resolution.message} for s in self.steps]
        return out


def gpus(
    context: str,
    *,
    spec_path: Path | None = None,
    variables: Mapping[str, str] | None = None,
    catalog_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    services: Services | None = None,
) -> GpusReport:
    """The GPU catalog of ``context``; with a spec, each GPU step's verdict on it.

    Raises:
        SpecError: the spec is invalid (checked before the cluster is contacted).
        KubeError: no kubeconfig, no such context, or the node listing failed.
    """
    from npa_infra.gpus import resolve
    from npa_infra.workflow.planning import api

    environ = os.environ if env is None else env
    plan = None
    if spec_path is not None:
        report = api.plan_spec(
            spec_path, variables=variables or {}, catalog_path=catalog_path, env=environ
        )
        plan = report.plan
    cluster = (services or Services()).gpu_cluster(context, environ)
    try:
        cat = read_catalog(cluster)
    finally:
        _close(cluster)
    steps = resolve.resolve_steps(plan.steps, cat) if plan is not None else None
    return GpusReport(cat, steps)


@dataclass(frozen=True, slots=True)
class AcceleratorOutcome:
    """What the submit-time remap did; ``plan`` is what to render."""

    plan: Plan
    status: str  # "resolved" | "skipped"
    reason: str
    context: str | None = None
    steps: tuple[resolve.StepResolution, ...] = ()
    mapping: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.steps]

    def summary_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "context": self.context}


def _skip(plan: Plan, reason: str, context: str | None) -> AcceleratorOutcome:
    return AcceleratorOutcome(plan, "skipped", reason, context)


def _refusal(context: str, failed: list[resolve.StepResolution]) -> PreflightError:
    from npa_infra.gpus import resolve

    first = failed[0].resolution
    if len(failed) == 1:
        message = f"state '{failed[0].state}': {first.message}"
    else:
        parts = "; ".join(f"'{s.state}' {s.resolution.requested}" for s in failed)
        message = f"{len(failed)} GPU requests cannot run on context '{context}' ({parts}); "
        message += f"first: {first.message}"
    remedy = first.remedy
    if first.verdict is not resolve.Verdict.EXCEEDS_PER_NODE:
        remedy += ", or pass --no-resolve-accelerators to submit the spec's names verbatim"
    return PreflightError(
        message,
        remedy=remedy,
        details={
            "context": context,
            "accelerators": [{**s.to_json(), "message": s.resolution.message} for s in failed],
        },
    )


def resolve_for_plan(
    plan: Plan,
    *,
    infra: str | None,
    enabled: bool,
    env: Mapping[str, str],
    services: Services | None = None,
    catalogs: Catalogs | None = None,
) -> AcceleratorOutcome:
    """Remap the plan's Kubernetes GPU requests to what ``--infra k8s/<ctx>`` advertises.

    ``catalogs``: the run's catalog reader (listed once per run); None lists the nodes now.

    Raises:
        PreflightError: a request is unsatisfiable, ambiguous, or exceeds the per-node quantity.
        KubeError: the kubeconfig, the context or the node listing failed.
    """
    context = context_of(infra)
    if not enabled:
        return _skip(
            plan, "--no-resolve-accelerators: the spec's names are submitted verbatim", context
        )
    if env.get(GPU_OVERRIDE_ENV):
        return _skip(plan, f"{GPU_OVERRIDE_ENV} is set: the environment override wins", context)
    if context is None:
        return _skip(plan, "no --infra k8s/<context>: no cluster was contacted", None)
    from npa_infra.gpus import resolve  # only where a cluster's catalog is consulted (issue 19)

    if not resolve.gpu_requests(plan.steps):
        return _skip(plan, "no Kubernetes GPU step", context)
    cat = (catalogs or Catalogs(env, services))(context)
    steps = resolve.resolve_steps(plan.steps, cat)
    failed = [s for s in steps if not s.resolution.verdict.ok]
    if failed:
        raise _refusal(context, failed)
    mapping = resolve.remap_plan_accelerators(plan.steps, cat)
    return AcceleratorOutcome(
        resolve.apply_remap(plan, mapping),
        "resolved",
        f"resolved against the GPU catalog of context '{context}'",
        context,
        tuple(steps),
        mapping,
    )
