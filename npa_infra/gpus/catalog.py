"""Build the GPU catalog of one Kubernetes context from its nodes (kubernetes.md §8).

One accelerator per distinct value of the label key SkyPilot reads
(``labels.skypilot_label_key``), named as SkyPilot names it. Each lists every
node carrying it with its eligibility (§8.2) and a reason when ineligible;
``requestable_qty_per_node`` is the largest allocatable ``nvidia.com/gpu`` on
an eligible node (§8.4). Unlike ``sky show-gpus``, a cordoned node never
counts. GPU nodes SkyPilot cannot see under that key, typically nodes that
carry only ``nebius.com/gpu-name`` while the GPU operator is still labelling,
are reported as ``not_yet_labelled`` and never become an accelerator.

The input is anything shaped like ``npa_infra.kube.models.NodeInfo``; this
module stays below the adapters and imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from npa_infra.gpus import labels

__all__ = ["Accelerator", "GpuCatalog", "NodeEntry", "NodeView", "build", "node_reason"]

# The one NoSchedule taint a GPU node may carry and stay eligible (kubernetes.md §8.2).
GPU_TAINT_KEY = "nvidia.com/gpu"


class TaintView(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


class NodeView(Protocol):
    """The fields of ``NodeInfo`` the catalog reads."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> Sequence[TaintView]: ...
    @property
    def ready(self) -> bool: ...
    @property
    def unschedulable(self) -> bool: ...
    @property
    def allocatable_gpus(self) -> int: ...


@dataclass(frozen=True, slots=True)
class NodeEntry:
    name: str
    gpus: int
    eligible: bool
    reason: str | None  # None when eligible

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpus": self.gpus,
            "eligible": self.eligible,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str  # what SkyPilot matches on this cluster
    canonical: str  # labels.normalise(name)
    label_key: str
    label_value: str
    requestable_qty_per_node: int
    nodes: tuple[NodeEntry, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "canonical": self.canonical,
            "label_key": self.label_key,
            "label_value": self.label_value,
            "requestable_qty_per_node": self.requestable_qty_per_node,
            "nodes": [n.to_json() for n in self.nodes],
        }


@dataclass(frozen=True, slots=True)
class GpuCatalog:
    """``gpus --json`` (kubernetes.md §8.4); ``label_key`` is the key SkyPilot reads, if any."""

    context: str
    accelerators: tuple[Accelerator, ...]
    not_yet_labelled: tuple[str, ...]
    label_key: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Distinct accelerator names, in catalog order."""
        return tuple(dict.fromkeys(a.name for a in self.accelerators))

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "accelerators": [a.to_json() for a in self.accelerators],
            "not_yet_labelled": list(self.not_yet_labelled),
        }


def node_reason(node: NodeView) -> str | None:
    """Why ``node`` cannot host a GPU pod (every failed rule of §8.2), or None when eligible."""
    reasons = []
    if not node.ready:
        reasons.append("NotReady")
    if node.unschedulable:
        reasons.append("cordoned")
    for taint in node.taints:
        # kubernetes.md §8.2: NoExecute always excludes; NoSchedule unless it is the GPU taint.
        if taint.effect == "NoExecute":
            reasons.append(f"NoExecute taint {taint.key}")
        elif taint.effect == "NoSchedule" and taint.key != GPU_TAINT_KEY:
            reasons.append(f"NoSchedule taint {taint.key}")
    if node.allocatable_gpus <= 0:
        reasons.append("no allocatable nvidia.com/gpu")
    return "; ".join(reasons) if reasons else None


def _is_gpu_node(node: NodeView) -> bool:
    return node.allocatable_gpus > 0 or any(
        node.labels.get(key, "").strip() for key in labels.PRODUCT_KEYS
    )


def build(context: str, nodes: Iterable[NodeView]) -> GpuCatalog:
    """The catalog of ``context`` from its nodes, in the API's node order."""
    node_list = list(nodes)
    key = labels.skypilot_label_key(n.labels for n in node_list)
    groups: dict[tuple[str, str], list[NodeEntry]] = {}
    hidden: list[str] = []
    for node in node_list:
        value = node.labels.get(key, "") if key else ""
        if not value.strip():  # SkyPilot skips empty values (CPU nodes of a mixed cluster)
            if _is_gpu_node(node):
                hidden.append(node.name)
            continue
        reason = node_reason(node)
        entry = NodeEntry(node.name, node.allocatable_gpus, reason is None, reason)
        name = labels.accelerator_name(key or "", value)
        groups.setdefault((name, value), []).append(entry)
    accelerators = tuple(
        Accelerator(
            name=name,
            canonical=labels.normalise(name),
            label_key=key or "",
            label_value=value,
            requestable_qty_per_node=max((e.gpus for e in entries if e.eligible), default=0),
            nodes=tuple(sorted(entries, key=lambda e: e.name)),
        )
        for (name, value), entries in sorted(groups.items())
    )
    return GpuCatalog(context, accelerators, tuple(sorted(hidden)), key)
