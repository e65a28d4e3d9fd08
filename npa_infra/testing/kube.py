"""``FakePodProber``: a stateful ``kube.base.PodProber`` for tests of the image pull probe.

Pods live in memory. ``create_pod`` admits them as the API would
(kubernetes.md §2, §3): the ServiceAccount must exist (else a 403
``KubeError``), its ``imagePullSecrets`` are copied only into an empty list,
the two DefaultTolerationSeconds tolerations are added, a duplicate name is
``AlreadyExists`` (None). ``watch_pod`` plays the kubelet once per pod with
``kubelet`` (default ``succeed``: phase ``Succeeded``, ``imageID`` = the
image by digest, on node ``node-1``); ``pull_auth_failure``, ``fail``,
``stay_pending`` and ``opaque_image_id`` are the other scripts.
``delete_pod`` honours the UID precondition (``CONFLICT`` on a mismatch,
``GONE`` when absent). ``faults`` maps an operation name (``create``,
``watch``, ``delete``, ``read``, ``service_account``) to errors raised by
its next calls, in order. ``created``, ``deleted`` and ``calls`` record
what happened, thread-safely.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from npa_infra.errors import KubeError
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    DeleteOutcome,
    KubeErrorKind,
    NodeInfo,
    PodObservation,
    ProbePod,
)

__all__ = [
    "DEFAULT_TOLERATIONS",
    "FakePodProber",
    "Kubelet",
    "fail",
    "kube_error",
    "opaque_image_id",
    "pull_auth_failure",
    "stay_pending",
    "succeed",
]

Kubelet = Callable[[ProbePod], ProbePod]
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def kube_error(kind: KubeErrorKind, message: str = "injected") -> KubeError:
    """A ``KubeError`` of ``kind``, as the real adapter raises it."""
    return KubeError(message, details={"kind": kind.value, "context": "fake"})


def _image(pod: ProbePod) -> str:
    containers = pod.spec.get("containers")
    first = containers[0] if isinstance(containers, list) and containers else {}
    return str(first.get("image", "")) if isinstance(first, dict) else ""


def _observed(pod: ProbePod, **fields: object) -> ProbePod:
    base = pod.observation or PodObservation(pod.name, pod.namespace, uid=pod.uid)
    observation = replace(base, **fields)  # type: ignore[arg-type]  # PodObservation fields
    return replace(pod, observation=observation, phase=observation.phase)


def succeed(pod: ProbePod) -> ProbePod:
    """The container pulled the image by digest and exited 0."""
    done = _observed(
        pod,
        phase="Succeeded",
        container_terminated=(ContainerTerminated("probe", "Completed", 0),),
    )
    return replace(done, image_id=_image(pod), node_name="node-1")


def fail(exit_code: int = 1, message: str = "npa-probe: rsync is missing") -> Kubelet:
    """The container ran and failed its checks."""

    def run(pod: ProbePod) -> ProbePod:
        done = _observed(
            pod,
            phase="Failed",
            container_terminated=(ContainerTerminated("probe", "Error", exit_code, message),),
        )
        return replace(done, image_id=_image(pod), node_name="node-1")

    return run


def pull_auth_failure(pod: ProbePod) -> ProbePod:
    """``ErrImagePull`` with the registry's 401: a permanent waiting reason (§6.3 row 1)."""
    message = f'failed to pull and unpack image "{_image(pod)}": 401 Unauthorized'
    waiting = (ContainerWaiting("probe", "ErrImagePull", message),)
    return replace(_observed(pod, container_waiting=waiting), node_name="node-1")


def stay_pending(pod: ProbePod) -> ProbePod:
    """Nothing happens: the pod stays Pending until the deadline."""
    return pod


def opaque_image_id(pod: ProbePod) -> ProbePod:
    """Succeeded, but the runtime reports an imageID without a digest."""
    return replace(succeed(pod), image_id="sha256:" + "0" * 12)


class FakePodProber:
    def __init__(
        self,
        context: str = "fake",
        *,
        namespace: str = "default",
        service_accounts: Mapping[str, Iterable[str]] | None = None,
        nodes: Iterable[NodeInfo] = (),
        kubelet: Kubelet = succeed,
    ) -> None:
        self.context = context
        self._namespace = namespace
        self.service_accounts = {
            k: tuple(v) for k, v in (service_accounts or {"skypilot-service-account": ()}).items()
        }
        self.node_list = list(nodes)
        self.kubelet = kubelet
        self.pods: dict[tuple[str, str], ProbePod] = {}
        self.created: list[Mapping[str, object]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.calls: list[str] = []
        self.faults: dict[str, list[KubeError]] = {}
        self.taken: set[str] = set()  # names that answer AlreadyExists once
        self.closed = False
        self._lock = threading.Lock()

    def _enter(self, operation: str) -> None:
        with self._lock:
            self.calls.append(operation)
            queued = self.faults.get(operation)
            error = queued.pop(0) if queued else None
        if error is not None:
            raise error

    def namespace(self) -> str:
        return self._namespace

    def nodes(self) -> list[NodeInfo]:
        self._enter("nodes")
        return list(self.node_list)

    def service_account_pull_secrets(self, namespace: str, name: str) -> tuple[str, ...] | None:
        self._enter("service_account")
        return self.service_accounts.get(name)

    def create_pod(self, namespace: str, manifest: Mapping[str, object]) -> ProbePod | None:
        self._enter("create")
        body = copy.deepcopy(dict(manifest))
        metadata = body["metadata"]
        spec = body["spec"]
        assert isinstance(metadata, dict) and isinstance(spec, dict)
        name = str(metadata["name"])
        with self._lock:
            if name in self.taken:
                self.taken.discard(name)
                return None
            if (namespace, name) in self.pods:
                return None
            account = str(spec.get("serviceAccountName") or "default")
            if account not in self.service_accounts:
                raise kube_error(
                    KubeErrorKind.FORBIDDEN,
                    f'pods "{name}" is forbidden: serviceaccount "{account}" not found',
                )
            if not spec.get("imagePullSecrets") and self.service_accounts[account]:
                spec["imagePullSecrets"] = [{"name": n} for n in self.service_accounts[account]]
            tolerations = spec.setdefault("tolerations", [])
            for default in DEFAULT_TOLERATIONS:
                if not any(t.get("key") == default["key"] for t in tolerations):
                    tolerations.append(dict(default))
            uid = str(uuid.uuid4())
            pod = ProbePod(
                name=name,
                namespace=namespace,
                uid=uid,
                labels=dict(metadata.get("labels") or {}),
                spec=spec,
                observation=PodObservation(name, namespace, uid=uid),
            )
            self.pods[(namespace, name)] = pod
            self.created.append(body)
        return pod

    def watch_pod(
        self,
        namespace: str,
        name: str,
        *,
        timeout_seconds: int,
        until: Callable[[ProbePod], bool],
    ) -> ProbePod | None:
        self._enter("watch")
        with self._lock:
            pod = self.pods.get((namespace, name))
        if pod is None:
            return None
        pod = self.kubelet(pod)  # outside the lock: probes of other pods run meanwhile
        with self._lock:
            if (namespace, name) in self.pods:
                self.pods[(namespace, name)] = pod
        return pod

    def delete_pod(self, namespace: str, name: str, uid: str) -> DeleteOutcome:
        self._enter("delete")
        with self._lock:
            pod = self.pods.get((namespace, name))
            if pod is None:
                return DeleteOutcome.GONE
            if pod.uid != uid:
                return DeleteOutcome.CONFLICT
            del self.pods[(namespace, name)]
            self.deleted.append((namespace, name, uid))
        return DeleteOutcome.ACCEPTED

    def read_pod(self, namespace: str, name: str) -> ProbePod | None:
        self._enter("read")
        with self._lock:
            return self.pods.get((namespace, name))

    def close(self) -> None:
        self.closed = True
