"""An in-memory ``KubeCluster`` and a fake clock for unit tests (no server, no sleeping).

``FakeCluster`` answers ``nodes``, ``namespace_exists``,
``service_account_exists``, ``job_pods`` and ``cluster_pods`` (from ``pod_list``, with the real
adapter's selection rule of kubernetes.md §6.1), ``disruption_budgets`` and ``bound_pods``
(``budget_list``, ``bound_pod_list``) from plain collections, scripts ``/readyz``
answers (the last one repeats), can raise a ``KubeError`` from any call, and
records every call. ``FakeClock`` is a monotonic clock whose ``sleep`` moves
time instead of waiting, for ``readiness.wait_ready``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from npa_infra.errors import KubeError
from npa_infra.kube import pending
from npa_infra.kube.models import (
    DisruptionBudget,
    KubeErrorKind,
    NodeInfo,
    NodePod,
    PodObservation,
    ReadyzSample,
    Taint,
)

__all__ = ["FakeClock", "FakeCluster", "gpu_node", "kube_error", "ready_sample"]


class FakeClock:
    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def ready_sample() -> ReadyzSample:
    return ReadyzSample(at=0.0, ok=True, status=200, kind=KubeErrorKind.NONE)


def kube_error(kind: KubeErrorKind, message: str, status: int | None = None) -> KubeError:
    return KubeError(message, remedy="fix it", details={"kind": kind.value, "status": status})


def gpu_node(
    name: str,
    labels: dict[str, str] | None = None,
    gpus: int = 1,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Iterable[Taint] = (),
) -> NodeInfo:
    return NodeInfo(name, dict(labels or {}), tuple(taints), ready, unschedulable, gpus)


@dataclass
class FakeCluster:
    context: str
    node_list: list[NodeInfo] = field(default_factory=list)
    namespaces: set[str] = field(default_factory=lambda: {"default"})
    service_accounts: set[tuple[str, str]] = field(default_factory=set)
    pod_list: list[PodObservation] = field(default_factory=list)
    budget_list: list[DisruptionBudget] = field(default_factory=list)
    bound_pod_list: list[NodePod] = field(default_factory=list)
    readyz_script: list[ReadyzSample | KubeError] = field(default_factory=lambda: [ready_sample()])
    fail_on: dict[str, KubeError] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    closed: bool = False

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail_on:
            raise self.fail_on[name]

    def readyz(self, *, timeout: float = 10.0) -> ReadyzSample:
        self._call("readyz")
        answer = self.readyz_script.pop(0) if len(self.readyz_script) > 1 else self.readyz_script[0]
        if isinstance(answer, KubeError):
            raise answer
        return answer

    def nodes(self) -> list[NodeInfo]:
        self._call("nodes")
        return list(self.node_list)

    def namespace_exists(self, name: str) -> bool:
        self._call("namespace_exists")
        return name in self.namespaces

    def service_account_exists(self, namespace: str, name: str) -> bool:
        self._call("service_account_exists")
        return (namespace, name) in self.service_accounts

    def job_pods(
        self, job_id: int, *, cluster_name: str | None = None, namespace: str | None = None
    ) -> list[PodObservation]:
        self._call("job_pods")

        def ours(value: str) -> bool:
            if cluster_name is not None:
                return value == cluster_name
            return pending.job_label_matches(value, job_id)

        return self._labelled(namespace, ours)

    def cluster_pods(
        self,
        *,
        namespace: str | None = None,
        select: Callable[[str], bool] | None = None,
    ) -> list[PodObservation]:
        self._call("cluster_pods")
        return self._labelled(namespace, select)

    def disruption_budgets(self) -> list[DisruptionBudget]:
        self._call("disruption_budgets")
        return sorted(self.budget_list, key=lambda b: (b.namespace, b.name))

    def bound_pods(self) -> list[NodePod]:
        self._call("bound_pods")
        return sorted(self.bound_pod_list, key=lambda p: (p.namespace, p.name))

    def _labelled(
        self, namespace: str | None, select: Callable[[str], bool] | None
    ) -> list[PodObservation]:
        """Non-controller pods carrying SkyPilot's cluster label whose value ``select`` keeps."""
        found = []
        for pod in self.pod_list:
            value = pod.label(pending.CLUSTER_LABEL)
            if value is None or (namespace is not None and pod.namespace != namespace):
                continue
            if pending.is_controller_pod(pod.name, pod.labels):
                continue
            if select is not None and not select(value):
                continue
            found.append(pod)
        return sorted(found, key=lambda p: (p.namespace, p.name))

    def close(self) -> None:
        self.closed = True
