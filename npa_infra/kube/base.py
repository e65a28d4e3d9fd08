"""The one interface the logic layers use to read a Kubernetes cluster."""

from __future__ import annotations

from typing import Protocol

from npa_infra.kube.models import NodeInfo, PodObservation, ReadyzSample

__all__ = ["KubeCluster"]


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
