"""The one interface the logic layers use to read a Kubernetes cluster."""

from __future__ import annotations

from typing import Protocol

from npa_infra.kube.models import NodeInfo, ReadyzSample

__all__ = ["KubeCluster"]


class KubeCluster(Protocol):
    """One exact context of the first kubeconfig file. Methods raise ``KubeError``."""

    context: str

    def readyz(self, *, timeout: float = 10.0) -> ReadyzSample: ...

    def nodes(self) -> list[NodeInfo]: ...

    def namespace_exists(self, name: str) -> bool: ...

    def service_account_exists(self, namespace: str, name: str) -> bool: ...
