"""What the drain preview reads (kubernetes.md §7.1): PodDisruptionBudgets and the pods on nodes.

``KubeApi.disruption_budgets`` and ``KubeApi.bound_pods`` page through one
list call each, across all namespaces, and map the client's objects to
``DisruptionBudget`` and ``NodePod`` here, so the preview's decision
(``kube.drainpreview``) sees our records only. Failures are translated by
``failures.translate`` like every other call of the adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_infra.kube import failures
from npa_infra.kube.models import (
    BudgetStatus,
    DisruptionBudget,
    LabelSelector,
    NodePod,
    SelectorRequirement,
)

if TYPE_CHECKING:
    from kubernetes.client import V1LabelSelector, V1Pod, V1PodDisruptionBudget

__all__ = ["MIRROR_ANNOTATION", "budget", "list_all", "node_pod", "selector"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def list_all(fetch: Callable[[str | None], Any], *, context: str, operation: str) -> list[Any]:
    """Every item of a paged list call; ``fetch`` takes the ``continue`` token.

    Raises:
        KubeError: any failure, by kind.
    """
    items: list[Any] = []
    token: str | None = None
    while True:
        try:
            page = fetch(token)
        except failures.upstream_errors() as exc:
            raise failures.translate(exc, context=context, operation=operation) from exc
        items.extend(page.items or [])
        token = page.metadata._continue if page.metadata is not None else None
        if not token:
            return items


def selector(raw: V1LabelSelector | None) -> LabelSelector | None:
    """``V1LabelSelector`` → ``LabelSelector``; None stays None (a null selector)."""
    if raw is None:
        return None
    return LabelSelector(
        match_labels=tuple(sorted((raw.match_labels or {}).items())),
        match_expressions=tuple(
            SelectorRequirement(e.key or "", e.operator or "", tuple(e.values or ()))
            for e in raw.match_expressions or []
        ),
    )


def _int_or_percent(value: object) -> int | str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return str(value)


def budget(raw: V1PodDisruptionBudget) -> DisruptionBudget:
    """``V1PodDisruptionBudget`` → ``DisruptionBudget``."""
    metadata, spec, status = raw.metadata, raw.spec, raw.status
    return DisruptionBudget(
        name=(metadata.name if metadata is not None else None) or "",
        namespace=(metadata.namespace if metadata is not None else None) or "",
        selector=selector(spec.selector) if spec is not None else None,
        min_available=_int_or_percent(spec.min_available) if spec is not None else None,
        max_unavailable=_int_or_percent(spec.max_unavailable) if spec is not None else None,
        unhealthy_pod_eviction_policy=(
            spec.unhealthy_pod_eviction_policy if spec is not None else None
        )
        or None,
        generation=int((metadata.generation if metadata is not None else None) or 1),
        status=None
        if status is None
        else BudgetStatus(
            current_healthy=int(status.current_healthy or 0),
            desired_healthy=int(status.desired_healthy or 0),
            disruptions_allowed=int(status.disruptions_allowed or 0),
            expected_pods=int(status.expected_pods or 0),
            observed_generation=status.observed_generation,
        ),
    )


def node_pod(raw: V1Pod) -> NodePod | None:
    """``V1Pod`` → ``NodePod``; None when the pod is not bound to a node."""
    metadata, spec, status = raw.metadata, raw.spec, raw.status
    node = spec.node_name if spec is not None else None
    if not node:
        return None
    owners = (metadata.owner_references if metadata is not None else None) or []
    annotations = (metadata.annotations if metadata is not None else None) or {}
    conditions = (status.conditions if status is not None else None) or []
    return NodePod(
        name=(metadata.name if metadata is not None else None) or "",
        namespace=(metadata.namespace if metadata is not None else None) or "",
        node_name=node,
        labels=tuple(sorted(((metadata.labels if metadata is not None else None) or {}).items())),
        phase=(status.phase if status is not None else None) or "Pending",
        ready=any(c.type == "Ready" and c.status == "True" for c in conditions),
        deleting=metadata is not None and metadata.deletion_timestamp is not None,
        daemonset=any(o.kind == "DaemonSet" for o in owners),
        mirror=MIRROR_ANNOTATION in annotations,
    )
