"""The cluster's SkyPilot pods and its nodes, read once per tick for every supervisor.

A supervisor diagnosing a PENDING/STARTING job needs that job's pods and,
when it has any, the nodes (kubernetes.md §6). Instead of one pod list per
job, ``SharedPods.read`` lists every SkyPilot job pod of the context in one
call (``KubeCluster.cluster_pods``) plus the nodes, shares the answer with
every other supervisor of the same controller for one tick
(``npa_infra.tickshare``), and ``for_job`` picks the exact job's pods out of
it by SkyPilot's cluster label (the queue's cluster name, else the whole
``-`` component, §6.1). A failed read raises ``KubeError`` and is not
shared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from npa_infra.kube import pending
from npa_infra.kube.base import KubeCluster
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    NodeInfo,
    PodCondition,
    PodEvent,
    PodObservation,
    Taint,
)
from npa_infra.tickshare import TickFile

__all__ = ["ClusterView", "SharedPods", "decode", "encode", "for_job"]

ClusterView = tuple[tuple[PodObservation, ...], tuple[NodeInfo, ...]]
_SCHEMA = "npa.kube.shared-pods.v1"


def encode(view: ClusterView) -> dict[str, Any]:
    pods, nodes = view
    return {
        "schema": _SCHEMA,
        "pods": [asdict(pod) for pod in pods],
        "nodes": [node._asdict() for node in nodes],
    }


def _pod(row: dict[str, Any]) -> PodObservation:
    return PodObservation(
        **{
            **row,
            "labels": tuple((str(k), str(v)) for k, v in row["labels"]),
            "conditions": tuple(PodCondition(*c) for c in row["conditions"]),
            "container_waiting": tuple(ContainerWaiting(*c) for c in row["container_waiting"]),
            "init_container_waiting": tuple(
                ContainerWaiting(*c) for c in row["init_container_waiting"]
            ),
            "container_terminated": tuple(
                ContainerTerminated(*c) for c in row["container_terminated"]
            ),
            "init_container_terminated": tuple(
                ContainerTerminated(*c) for c in row["init_container_terminated"]
            ),
            "events": tuple(PodEvent(*e) for e in row["events"]),
            "gpu_selector": tuple((str(k), str(v)) for k, v in row["gpu_selector"]),
        }
    )


def _node(row: dict[str, Any]) -> NodeInfo:
    return NodeInfo(**{**row, "taints": tuple(Taint(*t) for t in row["taints"])})


def decode(data: object) -> ClusterView | None:
    """The stored view; None when it is not one this module wrote."""
    if not isinstance(data, dict) or data.get("schema") != _SCHEMA:
        return None
    try:
        return tuple(_pod(p) for p in data["pods"]), tuple(_node(n) for n in data["nodes"])
    except (KeyError, TypeError, ValueError):
        return None


def for_job(
    pods: Iterable[PodObservation], job_id: int, cluster_name: str | None
) -> list[PodObservation]:
    """Managed job ``job_id``'s pods among ``pods`` (kubernetes.md §6.1)."""
    return [
        pod
        for pod in pods
        if pending.pod_of_job(pod.label(pending.CLUSTER_LABEL) or "", job_id, cluster_name)
    ]


class SharedPods:
    """See the module docstring. ``directory`` is the state directory's ``supervision``."""

    def __init__(self, cluster: KubeCluster, directory: Path, now: Callable[[], float]) -> None:
        self._cluster = cluster
        self._file: TickFile[ClusterView] = TickFile(
            directory, "pods", now=now, encode=encode, decode=decode
        )

    @property
    def fetches(self) -> int:
        return self._file.fetches

    def read(self, *, max_age: float, not_before: float) -> ClusterView:
        """Every SkyPilot job pod and, when there are any, the nodes, as of this tick.

        Raises:
            KubeError: the pod or node list failed.
        """
        return self._file.read(self._fetch, max_age=max_age, not_before=not_before)

    def _fetch(self) -> ClusterView:
        pods: Sequence[PodObservation] = self._cluster.cluster_pods()
        nodes: Sequence[NodeInfo] = self._cluster.nodes() if pods else ()
        return tuple(pods), tuple(nodes)
