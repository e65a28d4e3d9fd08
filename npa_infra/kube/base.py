"""The interfaces the logic layers use to talk to a Kubernetes cluster.

``KubeCluster`` reads (readiness, nodes, a job's pods, every SkyPilot pod, and for the
drain preview the disruption budgets and the pods on nodes); ``PodProber`` is the
narrow write surface of the image pull probe (kubernetes.md §9): one owned
pod at a time, created, watched and deleted only with its UID.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from npa_infra.kube.models import (
    DeleteOutcome,
    DisruptionBudget,
    NodeInfo,
    NodePod,
    PodObservation,
    ProbePod,
    ReadyzSample,
)

__all__ = ["KubeCluster", "PodProber"]


class KubeCluster(Protocol):
    """One exact context of the first kubeconfig file. Methods raise ``KubeError``."""

    context: str

    def readyz(self, *, timeout: float = 10.0) -> ReadyzSample: ...

    def nodes(self) -> list[NodeInfo]: ...

    def namespace_exists(self, name: str) -> bool: ...

    def service_account_exists(self, namespace: str, name: str) -> bool: ...

    def job_pods(
        self, job_id: int, *, cluster_name: str | None = None, namespace: str | None = None
    ) -> list[PodObservation]:
        """Managed job ``job_id``'s pods (kubernetes.md §6.1), sorted by namespace and name."""
        ...

    def cluster_pods(
        self,
        *,
        namespace: str | None = None,
        select: Callable[[str], bool] | None = None,
    ) -> list[PodObservation]:
        """Every non-controller pod with SkyPilot's cluster label whose value ``select``
        keeps, in one list call, sorted by namespace and name (kubernetes.md §6.1)."""
        ...

    def disruption_budgets(self) -> list[DisruptionBudget]:
        """Every PodDisruptionBudget, sorted by namespace and name (kubernetes.md §7.1)."""
        ...

    def bound_pods(self) -> list[NodePod]:
        """Every pod bound to a node, sorted by namespace and name (kubernetes.md §7.1)."""
        ...


class PodProber(Protocol):
    """The pull probe's pod operations on one exact context. Methods raise ``KubeError``."""

    context: str

    def namespace(self) -> str:
        """The context's namespace, else ``default`` (skypilot-0.12.md §9.1)."""
        ...

    def nodes(self) -> list[NodeInfo]: ...

    def service_account_pull_secrets(self, namespace: str, name: str) -> tuple[str, ...] | None:
        """The ServiceAccount's ``imagePullSecrets`` names in order; None when it does not exist."""
        ...

    def create_pod(self, namespace: str, manifest: Mapping[str, object]) -> ProbePod | None:
        """Create the pod as given; None when the name already exists (409 ``AlreadyExists``)."""
        ...

    def watch_pod(
        self,
        namespace: str,
        name: str,
        *,
        timeout_seconds: int,
        until: Callable[[ProbePod], bool],
    ) -> ProbePod | None:
        """Watch the pod by ``metadata.name`` for at most ``timeout_seconds``.

        Returns the last state seen: as soon as ``until`` holds for it or the
        pod is deleted, or when the window ends; None when nothing was seen.
        """
        ...

    def delete_pod(self, namespace: str, name: str, uid: str) -> DeleteOutcome:
        """DELETE with the server-side precondition ``uid`` (kubernetes.md §5); never by name alone."""
        ...

    def read_pod(self, namespace: str, name: str) -> ProbePod | None:
        """The pod named ``name`` now, whatever its UID; None when there is none (404)."""
        ...
