"""``FakeKube``: start/stop, kubeconfig, and the cluster-side test controls (kubernetes.md §10.4)."""

from __future__ import annotations

import copy
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.fakekube import kubeconfig, objects
from tests.support.fakekube.errors import FakeKubeError
from tests.support.fakekube.faults import Fault, ReadyzScript, RequestRecord
from tests.support.fakekube.kubelet import KubeletControls
from tests.support.fakekube.server import Backend, Server
from tests.support.fakekube.store import Store

__all__ = ["FakeKube"]

_LIFECYCLE_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
    }
)
_READINESS_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "team-a",
    "team-b",
    "ambient",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeKube(KubeletControls):
    """A stateful Kubernetes API double on 127.0.0.1, driven by the official client and kubectl."""

    def __init__(self, directory: Path, *, history_limit: int = 10_000) -> None:
        self.directory = Path(directory)
        self.kubeconfig = self.directory / "kubeconfig"
        self.contexts: dict[str, str] = dict(kubeconfig.CONTEXTS)
        self.bad_contexts: dict[str, str] = dict(kubeconfig.BAD_CONTEXTS)
        self.current_context = kubeconfig.AMBIENT[0]
        ca_pem = (kubeconfig.TLS_DIR / "ca.pem").read_text()
        self.store = Store(history_limit=history_limit, ca_pem=ca_pem)
        self.backend = Backend(store=self.store, tokens=kubeconfig.tokens())
        self.backend.denials.append((kubeconfig.FORBIDDEN_USER, "*", "*"))
        self._servers: list[Server] = []
        self.url = ""
        self.http_url = ""

    @classmethod
    def start(cls, directory: Path, *, history_limit: int = 10_000) -> FakeKube:
        """Start the HTTP and HTTPS listeners and write ``<directory>/kubeconfig``."""
        fake = cls(directory, history_limit=history_limit)
        fake._start()
        return fake

    def _start(self) -> None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(kubeconfig.TLS_DIR / "server.pem", kubeconfig.TLS_DIR / "server.key")
        plain, secure = Server(self.backend), Server(self.backend, tls)
        self._servers = [plain, secure]
        self.url = f"https://127.0.0.1:{secure.port}"
        self.http_url = f"http://127.0.0.1:{plain.port}"
        self.backend.server_address = f"127.0.0.1:{secure.port}"
        for name in _NAMESPACES:
            self.add_namespace(name)
        self.directory.mkdir(parents=True, exist_ok=True)
        kubeconfig.build_kubeconfig(
            self.kubeconfig,
            https_url=self.url,
            unreachable_url=f"http://127.0.0.1:{_free_port()}",
        )
        for server in self._servers:
            server.start()

    def stop(self) -> None:
        """Close every watch and connection, then the listeners. Idempotent."""
        self.backend.stopping.set()
        self.store.close_watchers()
        for server in self._servers:
            server.stop()
        self._servers = []

    def __enter__(self) -> FakeKube:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- generic objects ---------------------------------------------------------------------

    def create(self, resource: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create any served object as the API would (admission included); ``namespace=""`` for cluster scope."""
        return self.store.create(resource, namespace, body)

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.lookup(resource, namespace, name)

    def add_namespace(self, name: str) -> dict[str, Any]:
        """A namespace with its ``default`` ServiceAccount and ``kube-root-ca.crt`` ConfigMap."""
        return self.store.create("namespaces", "", objects.make_namespace(name))

    def add_service_account(
        self,
        namespace: str,
        name: str,
        *,
        image_pull_secrets: Iterable[str] = (),
        automount: bool | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"name": name}}
        pulls = [{"name": secret} for secret in image_pull_secrets]
        if pulls:
            body["imagePullSecrets"] = pulls
        if automount is not None:
            body["automountServiceAccountToken"] = automount
        existing = self.store.lookup("serviceaccounts", namespace, name)
        if existing is not None:
            return self.store.update(
                "serviceaccounts",
                namespace,
                name,
                lambda sa: {**sa, **body, "metadata": sa["metadata"]},
            )
        return self.store.create("serviceaccounts", namespace, body)

    def add_secret(
        self,
        namespace: str,
        name: str,
        *,
        string_data: dict[str, str] | None = None,
        type_: str = "Opaque",
    ) -> dict[str, Any]:
        return self.store.create(
            "secrets",
            namespace,
            {"metadata": {"name": name}, "type": type_, "stringData": string_data or {}},
        )

    def add_runtime_class(
        self,
        name: str,
        handler: str = "nvidia",
        *,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        overhead: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"name": name}, "handler": handler}
        scheduling: dict[str, Any] = {}
        if node_selector:
            scheduling["nodeSelector"] = node_selector
        if tolerations:
            scheduling["tolerations"] = tolerations
        if scheduling:
            body["scheduling"] = scheduling
        if overhead:
            body["overhead"] = {"podFixed": overhead}
        return self.store.create("runtimeclasses", "", body)

    def add_pdb(
        self,
        namespace: str,
        name: str,
        *,
        selector: dict[str, Any] | None,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        unhealthy_pod_eviction_policy: str | None = None,
        status: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """A policy/v1 PDB; its status is the disruption controller's (``disruption.py``), kept
        in step with the pods, unless ``status`` pins it (see ``set_pdb_status``)."""
        spec: dict[str, Any] = {}
        if selector is not None:
            spec["selector"] = selector
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        if unhealthy_pod_eviction_policy:
            spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
        body: dict[str, Any] = {"metadata": {"name": name}, "spec": spec}
        if status is not None:
            body["status"] = {"observedGeneration": 1, **status}
            self.store.pinned_budgets.add((namespace, name))
        return self.store.create("poddisruptionbudgets", namespace, body)

    def set_pdb_status(
        self, namespace: str, name: str, status: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Pin a PDB's status to ``status`` (the controller stops writing it); None unpins it
        and lets the controller recompute it from the pods at once."""
        key = (namespace, name)
        if status is None:
            self.store.pinned_budgets.discard(key)
            with self.store.lock:
                self.store.reconcile_budgets(namespace)
            found = self.get("poddisruptionbudgets", namespace, name)
            assert found is not None
            return found
        self.store.pinned_budgets.add(key)
        return self.store.update(
            "poddisruptionbudgets",
            namespace,
            name,
            lambda pdb: {**pdb, "status": copy.deepcopy(status)},
            subresource="status",
        )

    def set_controller_scale(self, controller_uid: str, replicas: int | None) -> None:
        """The scale (``spec.replicas``) of the controller with ``controller_uid``, which the
        disruption controller reads for percentage and maxUnavailable budgets; None: count its pods."""
        with self.store.lock:
            if replicas is None:
                self.store.controller_scales.pop(controller_uid, None)
            else:
                self.store.controller_scales[controller_uid] = replicas
            for namespace in {
                p["metadata"]["namespace"] for p in self.store.items("poddisruptionbudgets")
            }:
                self.store.reconcile_budgets(namespace)

    def add_resource_quota(self, namespace: str, name: str, hard: dict[str, str]) -> dict[str, Any]:
        return self.store.create(
            "resourcequotas", namespace, {"metadata": {"name": name}, "spec": {"hard": hard}}
        )

    def set_pod_log(self, name: str, text: str, *, namespace: str | None = None) -> None:
        ns, _ = self._locate(name, namespace)
        self.backend.logs[(ns, name)] = text

    # -- nodes -------------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        gpus: int = 0,
        ready: bool = True,
        unschedulable: bool = False,
        taints: list[dict[str, Any]] | None = None,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: int = 110,
    ) -> dict[str, Any]:
        """A registered node; NotReady nodes carry the lifecycle controller's not-ready taints."""
        node = objects.make_node(
            name,
            labels=labels,
            gpus=gpus,
            ready=ready,
            unschedulable=unschedulable,
            taints=taints,
            cpu=cpu,
            memory=memory,
            pods=pods,
            index=len(self.store.items("nodes")),
        )
        return self.store.create("nodes", "", node)

    def node(self, name: str) -> dict[str, Any]:
        found = self.store.lookup("nodes", "", name)
        if found is None:
            raise FakeKubeError(f"no node {name!r}")
        return found

    def _node_write(
        self, name: str, change: Callable[[dict[str, Any]], None], *, status: bool = False
    ) -> dict[str, Any]:
        self.node(name)

        def apply(node: dict[str, Any]) -> dict[str, Any]:
            change(node)
            return node

        return self.store.update("nodes", "", name, apply, subresource="status" if status else None)

    def set_node_ready(
        self, name: str, ready: bool, *, unreachable: bool = False
    ) -> dict[str, Any]:
        """Flip the Ready condition (False, or Unknown with ``unreachable``) and the matching taints."""
        state: bool | None = True if ready else (None if unreachable else False)
        stamp = objects.now()

        def condition(node: dict[str, Any]) -> None:
            conditions = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
            node["status"]["conditions"] = [*conditions, objects.ready_condition(state, stamp)]

        def taints(node: dict[str, Any]) -> None:
            kept = [
                t for t in node["spec"].get("taints") or [] if t["key"] not in _READINESS_TAINTS
            ]
            kept += objects.node_taints_for(state, False, stamp)
            node["spec"]["taints"] = kept

        self._node_write(name, condition, status=True)
        return self._node_write(name, taints)

    def set_node_taints(self, name: str, taints: list[dict[str, Any]]) -> dict[str, Any]:
        """Replace the node's own taints; the lifecycle taints (not-ready, unreachable, unschedulable) stay."""

        def change(node: dict[str, Any]) -> None:
            kept = [t for t in node["spec"].get("taints") or [] if t["key"] in _LIFECYCLE_TAINTS]
            node["spec"]["taints"] = [*copy.deepcopy(taints), *kept]

        return self._node_write(name, change)

    def set_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        """Merge labels; a ``None`` value removes the label."""

        def change(node: dict[str, Any]) -> None:
            current = node["metadata"].setdefault("labels", {})
            for key, value in labels.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value

        return self._node_write(name, change)

    def cordon(self, name: str, unschedulable: bool = True) -> dict[str, Any]:
        return self._node_write(
            name, lambda node: node["spec"].__setitem__("unschedulable", unschedulable)
        )

    def set_node_allocatable(self, name: str, **resources: str) -> dict[str, Any]:
        """Set allocatable (and capacity) quantities; ``nvidia_com_gpu="8"`` for ``nvidia.com/gpu``."""

        def change(node: dict[str, Any]) -> None:
            for key, value in resources.items():
                real = "nvidia.com/gpu" if key == "nvidia_com_gpu" else key.replace("_", "-")
                node["status"]["allocatable"][real] = value
                node["status"]["capacity"][real] = value

        return self._node_write(name, change, status=True)

    # -- store, history and waits ------------------------------------------------------------

    @property
    def graceful_pod_deletion(self) -> bool:
        """When True, deleting a bound pod only sets ``deletionTimestamp`` until ``finish_pod_deletion``."""
        return self.store.graceful_pod_deletion

    @graceful_pod_deletion.setter
    def graceful_pod_deletion(self, value: bool) -> None:
        self.store.graceful_pod_deletion = value

    def compact(self) -> None:
        """Drop the change history: a watch from any older resourceVersion now answers 410 Expired."""
        self.store.compact()

    @property
    def resource_version(self) -> str:
        return str(self.store.rv)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait (bounded) until ``predicate()`` holds, re-checked on every store change."""
        deadline = time.monotonic() + timeout
        with self.store.changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.store.changed.wait(remaining)
        return True

    def wait_for_pod(
        self, name: str, namespace: str | None = None, timeout: float = 5.0
    ) -> dict[str, Any]:
        """Wait (bounded) until a pod of that name exists, and return it."""

        def exists() -> bool:
            return any(p["metadata"]["name"] == name for p in self.store.items("pods", namespace))

        if not self.wait_until(exists, timeout):
            raise FakeKubeError(f"no pod {name!r} appeared within {timeout}s")
        return self.pod(name, namespace)

    # -- faults, readiness script, RBAC, request log -----------------------------------------

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        *,
        nth: int = 1,
        message: str | None = None,
        retry_after: int | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer the ``nth``..``nth+times-1`` matching calls with a Status of ``status``.

        ``path_regex`` is searched in the path, plus ``?query`` when there is one.
        """
        self.backend.faults.add(
            Fault(
                method.upper(),
                re.compile(path_regex),
                "status",
                status,
                delay,
                nth - 1,
                times,
                message,
                retry_after,
            )
        )

    def reset_next(self, method: str, path_regex: str, times: int = 1, *, nth: int = 1) -> None:
        """Reset the connection (TCP RST, no answer) on the matching calls."""
        self.backend.faults.add(
            Fault(method.upper(), re.compile(path_regex), "reset", skip=nth - 1, times=times)
        )

    def delay_next(
        self, method: str, path_regex: str, seconds: float, times: int = 1, *, nth: int = 1
    ) -> None:
        """Delay the matching calls by ``seconds``, then answer normally."""
        self.backend.faults.add(
            Fault(
                method.upper(),
                re.compile(path_regex),
                "delay",
                delay=seconds,
                skip=nth - 1,
                times=times,
            )
        )

    def clear_faults(self) -> None:
        self.backend.faults.clear()

    def script_readyz(self, answers: Iterable[object], *, repeat: bool = False) -> None:
        """Queue ``/readyz`` answers: 200, 500, 429..., ``"drop"``, ``("delay", s[, status])``."""
        self.backend.readyz.load(answers, repeat=repeat)

    @property
    def readyz(self) -> ReadyzScript:
        """The script, with ``.calls``: the monotonic time of every ``/readyz`` request."""
        return self.backend.readyz

    def deny(self, user: str, verb: str = "*", resource: str = "*") -> None:
        """RBAC: 403 for ``user`` (= context name) on ``verb`` of ``resource`` (``pods/log`` for a subresource)."""
        self.backend.denials.append((user, verb, resource))

    def calls(
        self, method: str | None = None, path_regex: str | None = None, *, user: str | None = None
    ) -> list[RequestRecord]:
        """The recorded requests, filtered."""
        pattern = re.compile(path_regex) if path_regex else None
        return [
            r
            for r in list(self.backend.requests)
            if (method is None or r.method == method.upper())
            and (pattern is None or pattern.search(f"{r.path}?{r.query}" if r.query else r.path))
            and (user is None or r.user == user)
        ]
