"""``npa cluster down``: preview the PodDisruptionBudgets that will hold up draining a cluster.

Read-only (issue 16): on the exact context of the first kubeconfig file (no
fallback to the current context; an unknown one fails before any request), it
makes three list calls (nodes, the pods bound to them, every
PodDisruptionBudget) and hands them to the pure decision
``kube.drainpreview`` (kubernetes.md §7). It never writes to the cluster:
npa-infra does not own it, and the drain itself belongs to whoever deletes the
nodes. cli.md §4 also names a terminal-run gate and a ``--yes`` teardown for
this command; issue 16 makes it a preview only, and the issue wins.

A failed read is a ``KubeError`` that names the context, its API server and
the read that failed, with the adapter's remedy for its kind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from npa_infra.errors import KubeError
from npa_infra.kube import drainpreview, kubeconfig

if TYPE_CHECKING:
    from npa_infra.kube.base import KubeCluster
    from npa_infra.workflow.target.services import Services

__all__ = ["ClusterDownReport", "SkippedPods", "preview"]

_READS = "nodes, pods bound to nodes, poddisruptionbudgets (all namespaces)"


class SkippedPods(BaseModel):
    """Pods on the nodes that a drain does not evict (kubernetes.md §7.1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    daemonset: int
    mirror: int


class ClusterDownReport(BaseModel):
    """``npa cluster down --json``: one budget verdict each, and how many block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["preview"] = "preview"
    context: str
    nodes: int
    budgets: tuple[drainpreview.BudgetVerdict, ...]
    blocking: int
    skipped_pods: SkippedPods

    @property
    def exit_code(self) -> int:
        """0: a preview changes nothing, whatever it finds (it is advisory)."""
        return 0


def _server(config: kubeconfig.Kubeconfig, cluster: str) -> str:
    """The API server URL of ``cluster`` in the kubeconfig ("" when it names none)."""
    entries = config.document.get("clusters")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == cluster:
            body = entry.get("cluster")
            server = body.get("server") if isinstance(body, dict) else None
            return server if isinstance(server, str) else ""
    return ""


def _open(path: Path, context: str) -> KubeCluster:
    from npa_infra.kube.client import KubeApi

    return KubeApi(path, context)


def preview(
    context: str,
    *,
    env: Mapping[str, str] | None = None,
    services: Services | None = None,
) -> ClusterDownReport:
    """The PodDisruptionBudget preview of draining every node of ``context``.

    Raises:
        KubeError: no kubeconfig, an unknown context (the message lists the
            contexts that exist), or a read that failed (unreachable API server,
            401/403, TLS, 5xx), naming the server and the reads.
    """
    environ = os.environ if env is None else env
    config, ctx = kubeconfig.resolve(context, environ)  # exact; unknown: no request made
    factory = (services.cluster if services is not None else None) or _open
    cluster = factory(config.path, context)
    try:
        nodes = [n.name for n in cluster.nodes()]
        pods = cluster.bound_pods()
        budgets = cluster.disruption_budgets()
    except KubeError as exc:
        server = _server(config, ctx.cluster)
        at = f" at {server}" if server else ""
        raise KubeError(
            f"cannot read context {context!r}{at} for the drain preview (checked: {_READS}): "
            f"{exc.message}",
            remedy=exc.remedy,
            details={**exc.details, "server": server, "checked": _READS},
        ) from exc
    finally:
        close = getattr(cluster, "close", None)
        if callable(close):
            close()
    result = drainpreview.preview(nodes, pods, budgets)
    return ClusterDownReport(
        context=context,
        nodes=result.nodes,
        budgets=result.budgets,
        blocking=result.blocking,
        skipped_pods=SkippedPods(
            daemonset=result.skipped_daemonset_pods, mirror=result.skipped_mirror_pods
        ),
    )
