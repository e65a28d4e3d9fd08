"""``KubeApi``: one exact kubeconfig context through the official ``kubernetes`` client.

The client is imported inside the methods that use it, never at import time,
so ``npa --help`` stays fast (style.md rule 6). The constructor does no I/O:
the kubeconfig is read and the ``ApiClient`` built on the first call, then
reused. Only the named context is used (kubernetes.md preamble); its
relative certificate paths resolve against the kubeconfig's directory and the
file itself is never written back (npa-infra never rewrites contexts).

urllib3 retries are off: one call is one answer, and the callers' own loops
(the readiness gate, kubernetes.md §1.2) decide what a failure means. Every
upstream failure becomes a ``KubeError`` through ``failures.classify``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from npa_infra.errors import KubeError
from npa_infra.gpus import labels
from npa_infra.kube import budgets, failures, kubeconfig, pending
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    DisruptionBudget,
    KubeErrorKind,
    NodeInfo,
    NodePod,
    PodCondition,
    PodEvent,
    PodObservation,
    ReadyzSample,
    Taint,
)

if TYPE_CHECKING:
    from kubernetes.client import (
        ApiClient,
        Configuration,
        CoreV1Api,
        V1ContainerStatus,
        V1Node,
        V1Pod,
        V1PodList,
        V1ResourceRequirements,
    )

__all__ = ["GPU_RESOURCE", "KubeApi", "node_info", "pod_observation"]

GPU_RESOURCE = "nvidia.com/gpu"
_BODY_CAP = 200
_PAGE = 500


class KubeApi:
    """The real ``KubeCluster``: ``context`` of the kubeconfig file ``kubeconfig``."""

    def __init__(
        self,
        kubeconfig: Path,
        context: str,
        *,
        request_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self._request_timeout = request_timeout
        self._clock = clock
        self._api: ApiClient | None = None
        self._lock = threading.Lock()  # the pull probe calls from several threads

    @classmethod
    def for_context(cls, context: str, env: Mapping[str, str] | None = None) -> KubeApi:
        """``context`` of the first existing ``KUBECONFIG`` file (skypilot-0.12.md §9.1).

        Raises:
            KubeError: ``NO_KUBECONFIG`` when no kubeconfig file exists.
        """
        return cls(kubeconfig.first_path(env), context)

    def __repr__(self) -> str:
        return f"KubeApi(kubeconfig={str(self.kubeconfig)!r}, context={self.context!r})"

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool; the next call builds a new client."""
        if self._api is not None:
            self._api.close()  # type: ignore[no-untyped-call]  # kubernetes 37 leaves it unannotated
            self._api = None

    # -- KubeCluster -----------------------------------------------------------
    def readyz(self, *, timeout: float = 10.0) -> ReadyzSample:
        """One ``GET /readyz`` sample; failures are samples too, never exceptions."""
        try:
            api = self._client()
            method, url, headers, _body, _post = api.param_serialize(
                method="GET", resource_path="/readyz", auth_settings=["BearerToken"]
            )
            response = api.call_api(method, url, header_params=headers, _request_timeout=timeout)
            status = int(response.status)
            data = response.read() or b""  # type: ignore[no-untyped-call]  # unannotated upstream
        except KubeError as exc:
            return self._sample(False, None, failures.kind_of(exc), exc.message)
        except failures.upstream_errors() as exc:
            kind = failures.classify(exc)  # a refused connection stays TRANSPORT (§1.2)
            detail = failures.describe(exc)
            if failures.refused(exc):
                detail = f"connection refused by {self._server()}"
            return self._sample(False, _status_of(exc), kind, detail)
        text = data.decode("utf-8", errors="replace")
        if status == 200 and text.startswith("ok"):  # kubernetes.md §1.2
            return self._sample(True, status, KubeErrorKind.NONE, "")
        kind = failures.kind_for_status(status)
        kind = KubeErrorKind.UNEXPECTED if kind is KubeErrorKind.NONE else kind
        snippet = " ".join(text.split())[:_BODY_CAP]
        return self._sample(False, status, kind, f"HTTP {status}: {snippet}".rstrip(": "))

    def nodes(self) -> list[NodeInfo]:
        """Every node, mapped to ``NodeInfo`` (kubernetes.md §8.2).

        Raises:
            KubeError: any failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        found: list[NodeInfo] = []
        token: str | None = None
        while True:
            try:
                page = core.list_node(
                    limit=_PAGE, _continue=token, _request_timeout=self._request_timeout
                )
            except failures.upstream_errors() as exc:
                raise failures.translate(exc, context=self.context, operation="list nodes") from exc
            found.extend(node_info(node) for node in page.items)
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                return found

    def namespace_exists(self, name: str) -> bool:
        """Whether namespace ``name`` exists.

        Raises:
            KubeError: any failure but 404, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        try:
            core.read_namespace(name, _request_timeout=self._request_timeout)
        except failures.upstream_errors() as exc:
            return self._absent_or_raise(exc, f"read namespace {name}")
        return True

    def service_account_exists(self, namespace: str, name: str) -> bool:
        """Whether ServiceAccount ``namespace/name`` exists.

        Raises:
            KubeError: any failure but 404, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        try:
            core.read_namespaced_service_account(
                name, namespace, _request_timeout=self._request_timeout
            )
        except failures.upstream_errors() as exc:
            return self._absent_or_raise(exc, f"read serviceaccount {namespace}/{name}")
        return True

    def job_pods(
        self, job_id: int, *, cluster_name: str | None = None, namespace: str | None = None
    ) -> list[PodObservation]:
        """The pods of managed job ``job_id``, with their Warning events (kubernetes.md §6.1, §6.2).

        With ``cluster_name`` (the queue's ``cluster_name_on_cloud``, never
        ``current_cluster_name``) the selector is ``skypilot-cluster-name=<it>``;
        without it, the bare key, keeping values whose ``-`` components include
        the exact id. Every namespace, or only ``namespace``. Controller pods
        are never returned. Events are read only for pods that may be blocked.

        Raises:
            KubeError: any failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        label = pending.CLUSTER_LABEL
        selector = f"{label}={cluster_name}" if cluster_name else label
        found: list[PodObservation] = []
        for pod in self._list_pods(core, selector, namespace):
            observed = pod_observation(pod)
            value = observed.label(label) or ""
            if pending.is_controller_pod(observed.name, observed.labels):
                continue
            if cluster_name is None and not pending.job_label_matches(value, job_id):
                continue  # kubernetes.md §6.1: a whole component, never a substring
            if observed.phase not in ("Running", "Succeeded"):
                observed = replace(observed, events=self._warning_events(core, observed))
            found.append(observed)
        return sorted(found, key=lambda p: (p.namespace, p.name))

    def cluster_pods(
        self,
        *,
        namespace: str | None = None,
        select: Callable[[str], bool] | None = None,
    ) -> list[PodObservation]:
        """Every pod carrying SkyPilot's cluster label, in ONE list call (kubernetes.md §6.1).

        For ``workflow status --all``: the caller groups the pods per exact job id
        (``pending.job_label_matches`` or the queue's ``cluster_name_on_cloud``).
        ``select`` sees the label's value and drops unrelated pods before their
        Warning events are read. Controller pods are never returned.

        Raises:
            KubeError: any failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        label = pending.CLUSTER_LABEL
        found: list[PodObservation] = []
        for pod in self._list_pods(core, label, namespace):
            observed = pod_observation(pod)
            if pending.is_controller_pod(observed.name, observed.labels):
                continue
            if select is not None and not select(observed.label(label) or ""):
                continue
            if observed.phase not in ("Running", "Succeeded"):
                observed = replace(observed, events=self._warning_events(core, observed))
            found.append(observed)
        return sorted(found, key=lambda p: (p.namespace, p.name))

    def disruption_budgets(self) -> list[DisruptionBudget]:
        """Every policy/v1 PodDisruptionBudget of every namespace (kubernetes.md §7.1).

        Raises:
            KubeError: any failure, by kind.
        """
        from kubernetes.client import PolicyV1Api

        policy = PolicyV1Api(self._client())
        found = budgets.list_all(
            lambda token: policy.list_pod_disruption_budget_for_all_namespaces(
                limit=_PAGE, _continue=token, _request_timeout=self._request_timeout
            ),
            context=self.context,
            operation="list poddisruptionbudgets in all namespaces",
        )
        return sorted((budgets.budget(b) for b in found), key=lambda b: (b.namespace, b.name))

    def bound_pods(self) -> list[NodePod]:
        """Every pod of every namespace that is bound to a node (kubernetes.md §7.1).

        Raises:
            KubeError: any failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        found = budgets.list_all(
            lambda token: core.list_pod_for_all_namespaces(
                field_selector="spec.nodeName!=",
                limit=_PAGE,
                _continue=token,
                _request_timeout=self._request_timeout,
            ),
            context=self.context,
            operation="list pods bound to nodes in all namespaces",
        )
        pods = (budgets.node_pod(pod) for pod in found)
        return sorted((p for p in pods if p is not None), key=lambda p: (p.namespace, p.name))

    # -- internals -------------------------------------------------------------
    def _list_pods(self, core: CoreV1Api, selector: str, namespace: str | None) -> list[V1Pod]:
        where = f"namespace {namespace}" if namespace else "all namespaces"
        items: list[V1Pod] = []
        token: str | None = None
        while True:
            try:
                page: V1PodList
                if namespace:
                    page = core.list_namespaced_pod(
                        namespace,
                        label_selector=selector,
                        limit=_PAGE,
                        _continue=token,
                        _request_timeout=self._request_timeout,
                    )
                else:
                    page = core.list_pod_for_all_namespaces(
                        label_selector=selector,
                        limit=_PAGE,
                        _continue=token,
                        _request_timeout=self._request_timeout,
                    )
            except failures.upstream_errors() as exc:
                operation = f"list pods -l {selector} in {where}"
                raise failures.translate(exc, context=self.context, operation=operation) from exc
            items.extend(page.items or [])
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                return items

    def _warning_events(self, core: CoreV1Api, pod: PodObservation) -> tuple[PodEvent, ...]:
        """The pod's Warning events by ``involvedObject.name`` and uid, oldest first (§6.2)."""
        try:
            listed = core.list_namespaced_event(
                pod.namespace,
                field_selector=f"involvedObject.name={pod.name}",
                _request_timeout=self._request_timeout,
            )
        except failures.upstream_errors() as exc:
            operation = f"list events of pod {pod.ref}"
            raise failures.translate(exc, context=self.context, operation=operation) from exc
        events = []
        for event in listed.items or []:
            involved = event.involved_object
            if event.type != "Warning" or (pod.uid and involved.uid and involved.uid != pod.uid):
                continue
            stamp = event.last_timestamp or event.event_time or event.first_timestamp
            events.append((str(stamp or ""), event.reason or "", event.message or ""))
        return tuple(PodEvent(reason, message) for _, reason, message in sorted(events))

    def _server(self) -> str:
        """The API server address the client talks to (the kubeconfig's ``server``)."""
        host = self._api.configuration.host if self._api is not None else None
        return str(host) if host else f"the API server of context {self.context!r}"

    def _sample(
        self, ok: bool, status: int | None, kind: KubeErrorKind, detail: str
    ) -> ReadyzSample:
        return ReadyzSample(at=self._clock(), ok=ok, status=status, kind=kind, detail=detail)

    def _absent_or_raise(self, exc: BaseException, operation: str) -> bool:
        if failures.classify(exc) is KubeErrorKind.NOT_FOUND:
            return False
        raise failures.translate(exc, context=self.context, operation=operation) from exc

    def _client(self) -> ApiClient:
        """The cached ``ApiClient`` for the exact context.

        Raises:
            KubeError: ``NO_KUBECONFIG``, ``UNKNOWN_CONTEXT`` or ``EXEC_PLUGIN``.
        """
        with self._lock:
            if self._api is not None:
                return self._api
            config = kubeconfig.load(self.kubeconfig)
            context = config.context(self.context)  # exact: never current-context
            from kubernetes.client import ApiClient

            configuration = self._configuration(config, context)
            self._api = ApiClient(configuration=configuration)
            return self._api

    def _configuration(
        self, config: kubeconfig.Kubeconfig, context: kubeconfig.KubeContext
    ) -> Configuration:
        from kubernetes.client import Configuration
        from kubernetes.config.kube_config import KubeConfigLoader

        configuration = Configuration()
        # TypeError/KeyError/AttributeError: the loader on malformed kubeconfig entries.
        errors: tuple[type[BaseException], ...] = (
            *failures.upstream_errors(),
            TypeError,
            KeyError,
            AttributeError,
        )
        try:
            with _logged_errors() as logged:
                loader = KubeConfigLoader(  # type: ignore[no-untyped-call]  # unannotated upstream
                    config_dict=copy.deepcopy(dict(config.document)),
                    active_context=self.context,
                    config_base_path=str(self.kubeconfig.parent),
                )
                loader.load_and_set(configuration)  # type: ignore[no-untyped-call]  # unannotated upstream
        except errors as exc:
            kind = failures.classify(exc)
            kind = kind if kind.terminal else KubeErrorKind.NO_KUBECONFIG
            raise failures.kube_error(
                kind,
                f"cannot use context {self.context!r} of {self.kubeconfig}: "
                f"{failures.describe(exc)}",
                context=self.context,
                kubeconfig=str(self.kubeconfig),
            ) from exc
        if _exec_plugin_failed(config.document, context.user, configuration):
            # kube_config.py logs exec-plugin failures instead of raising them.
            reason = "; ".join(logged) or "it produced no credentials"
            raise failures.kube_error(
                KubeErrorKind.EXEC_PLUGIN,
                f"the exec credential plugin of context {self.context!r} failed: {reason}"[:1000],
                context=self.context,
                kubeconfig=str(self.kubeconfig),
            )
        configuration.retries = False  # one call, one answer (see the module docstring)
        return configuration


def node_info(node: V1Node) -> NodeInfo:
    """``V1Node`` → ``NodeInfo``: labels, taints, Ready, cordoned, allocatable GPUs."""
    metadata, spec, status = node.metadata, node.spec, node.status
    taints = tuple(
        Taint(key=t.key, value=t.value or "", effect=t.effect)
        for t in ((spec.taints if spec is not None else None) or [])
    )
    conditions = (status.conditions if status is not None else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    allocatable = (status.allocatable if status is not None else None) or {}
    return NodeInfo(
        name=(metadata.name if metadata is not None else None) or "",
        labels=dict((metadata.labels if metadata is not None else None) or {}),
        taints=taints,
        ready=ready,
        unschedulable=bool(spec is not None and spec.unschedulable),
        allocatable_gpus=_gpu_count(allocatable.get(GPU_RESOURCE)),
    )


def pod_observation(pod: V1Pod) -> PodObservation:
    """``V1Pod`` → ``PodObservation``: phase, conditions, container states, GPU shape."""
    metadata, spec, status = pod.metadata, pod.spec, pod.status
    conditions = (status.conditions if status is not None else None) or []
    statuses = (status.container_statuses if status is not None else None) or []
    inits = (status.init_container_statuses if status is not None else None) or []
    containers = list(spec.containers or []) if spec is not None else []
    return PodObservation(
        name=(metadata.name if metadata is not None else None) or "",
        namespace=(metadata.namespace if metadata is not None else None) or "",
        phase=(status.phase if status is not None else None) or "Pending",
        labels=tuple(sorted(((metadata.labels if metadata is not None else None) or {}).items())),
        node_name=spec.node_name if spec is not None else None,
        conditions=tuple(
            PodCondition(c.type or "", c.status or "", c.reason or "", c.message or "")
            for c in conditions
        ),
        container_waiting=_waiting(statuses),
        init_container_waiting=_waiting(inits),
        container_terminated=_terminated(statuses),
        init_container_terminated=_terminated(inits),
        uid=(metadata.uid if metadata is not None else None) or "",
        gpu_request=sum(_container_gpus(c.resources) for c in containers),
        gpu_selector=_gpu_selector(pod),
    )


def _waiting(statuses: Iterable[V1ContainerStatus]) -> tuple[ContainerWaiting, ...]:
    return tuple(
        ContainerWaiting(s.name, s.state.waiting.reason or "", s.state.waiting.message or "")
        for s in statuses
        if s.state is not None and s.state.waiting is not None
    )


def _terminated(statuses: Iterable[V1ContainerStatus]) -> tuple[ContainerTerminated, ...]:
    return tuple(
        ContainerTerminated(
            s.name,
            s.state.terminated.reason or "",
            int(s.state.terminated.exit_code or 0),
            s.state.terminated.message or "",
        )
        for s in statuses
        if s.state is not None and s.state.terminated is not None
    )


def _container_gpus(resources: V1ResourceRequirements | None) -> int:
    """A container's ``nvidia.com/gpu``: its limit, else its request (limits default requests)."""
    if resources is None:
        return 0
    for quantities in (resources.limits, resources.requests):
        if quantities and GPU_RESOURCE in quantities:
            return _gpu_count(quantities[GPU_RESOURCE])
    return 0


def _product_key(key: str) -> bool:
    return key in labels.PRODUCT_KEYS or "product" in key  # kubernetes.md §8.1


def _gpu_selector(pod: V1Pod) -> tuple[tuple[str, str], ...]:
    """``(key, value)`` the pod allows for GPU product labels: nodeSelector, required ``In`` terms."""
    spec = pod.spec
    if spec is None:
        return ()
    pairs = [(k, v) for k, v in (spec.node_selector or {}).items() if _product_key(k)]
    node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution
        if node_affinity is not None
        else None
    )
    for term in (required.node_selector_terms if required is not None else None) or []:
        for expression in term.match_expressions or []:
            if expression.operator == "In" and _product_key(expression.key):
                pairs.extend((expression.key, value) for value in expression.values or [])
    return tuple(dict.fromkeys(pairs))


def _gpu_count(quantity: str | None) -> int:
    """An allocatable ``nvidia.com/gpu`` quantity as a whole count; 0 when absent or odd."""
    if quantity is None:
        return 0
    text = str(quantity).strip()
    if text.isdigit():
        return int(text)
    from kubernetes.utils.quantity import parse_quantity

    try:
        value = parse_quantity(text)  # type: ignore[no-untyped-call]  # unannotated upstream
    except ValueError:
        return 0
    return max(0, int(value))


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and status else None


def _exec_plugin_failed(
    document: Mapping[str, Any], user: str, configuration: Configuration
) -> bool:
    """The user authenticates only by an exec plugin and the loader got no credentials."""
    users = document.get("users")
    entry: Mapping[str, Any] = {}
    for candidate in users if isinstance(users, list) else []:
        if isinstance(candidate, dict) and candidate.get("name") == user:
            body = candidate.get("user")
            entry = body if isinstance(body, dict) else {}
            break
    if "exec" not in entry or any(k in entry for k in ("auth-provider", "token", "tokenFile")):
        return False
    has_token = bool(configuration.api_key.get("BearerToken"))
    return not has_token and not configuration.cert_file


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(level=logging.ERROR)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self._sink.append(record.getMessage())


@contextlib.contextmanager
def _logged_errors() -> Iterator[list[str]]:
    """Collect ERROR records on the root logger while the kubeconfig loader runs.

    kube_config.py reports exec-plugin failures with ``logging.error`` on the
    root logger; with our handler installed it also cannot ``basicConfig`` a
    stderr handler behind the CLI's back.
    """
    sink: list[str] = []
    handler = _Collect(sink)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield sink
    finally:
        root.removeHandler(handler)
