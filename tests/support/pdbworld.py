"""Pods and budgets on the Kubernetes double for the PodDisruptionBudget tests (kubernetes.md §7).

``run_pod`` creates a pod through the double's API path (admission included),
binds it to a node and, unless ``ready=False``, starts it Ready, as the
scheduler and kubelet would. ``owner`` names its controller (a ReplicaSet, a
StatefulSet, a DaemonSet: an owner reference with ``controller: true``);
``mirror`` marks it a static pod's mirror (the ``kubernetes.io/config.mirror``
annotation).
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.fakekube import FakeKube

__all__ = ["IMAGE", "controller", "run_pod"]

IMAGE = "registry.k8s.io/pause:3.9"


def controller(kind: str, name: str) -> dict[str, Any]:
    """An owner reference to a workload controller of ``kind`` (``uid`` is fresh)."""
    group = "v1" if kind == "ReplicationController" else "apps/v1"
    return {
        "apiVersion": group,
        "kind": kind,
        "name": name,
        "uid": str(uuid.uuid4()),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def run_pod(
    fake: FakeKube,
    namespace: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    node: str = "node-1",
    ready: bool = True,
    owner: dict[str, Any] | None = None,
    mirror: bool = False,
) -> dict[str, Any]:
    """A pod bound to ``node``; Running and Ready unless ``ready`` is False (then only bound)."""
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": uuid.uuid4().hex}
    body = {"metadata": meta, "spec": {"containers": [{"name": "main", "image": IMAGE}]}}
    fake.create("pods", namespace, body)
    fake.schedule_pod(name, node, namespace=namespace)
    if ready:
        fake.start_pod(name, namespace=namespace)
    return fake.pod(name, namespace)
