"""Typed Kubernetes observations the logic layers consume (kubernetes.md §1, §6, §7, §8)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "BudgetStatus",
    "ContainerTerminated",
    "ContainerWaiting",
    "DeleteOutcome",
    "DisruptionBudget",
    "KubeErrorKind",
    "LabelSelector",
    "NodeInfo",
    "NodePod",
    "PodCondition",
    "PodEvent",
    "PodObservation",
    "ProbePod",
    "ReadyzSample",
    "SelectorRequirement",
    "Taint",
]


class KubeErrorKind(StrEnum):
    """What a failed call means (kubernetes.md §1.2): terminal, transient or ambiguous."""

    NONE = "none"
    NO_KUBECONFIG = "no_kubeconfig"  # terminal
    UNKNOWN_CONTEXT = "unknown_context"  # terminal
    AUTH = "auth"  # 401: terminal
    FORBIDDEN = "forbidden"  # 403: terminal
    CERTIFICATE = "certificate"  # terminal
    EXEC_PLUGIN = "exec_plugin"  # credential plugin failed: terminal
    TRANSPORT = "transport"  # connection refused/reset/timeout: transient
    RATE_LIMIT = "rate_limit"  # 429: transient
    SERVER = "server"  # 5xx: transient
    NOT_FOUND = "not_found"
    UNEXPECTED = "unexpected"  # anything else: ambiguous

    @property
    def terminal(self) -> bool:
        return self in (
            KubeErrorKind.NO_KUBECONFIG,
            KubeErrorKind.UNKNOWN_CONTEXT,
            KubeErrorKind.AUTH,
            KubeErrorKind.FORBIDDEN,
            KubeErrorKind.CERTIFICATE,
            KubeErrorKind.EXEC_PLUGIN,
        )

    @property
    def transient(self) -> bool:
        return self in (KubeErrorKind.TRANSPORT, KubeErrorKind.RATE_LIMIT, KubeErrorKind.SERVER)


class ReadyzSample(NamedTuple):
    """One ``GET /readyz``: success means HTTP 200 with a body starting ``ok``."""

    at: float  # monotonic seconds, from the injected clock
    ok: bool
    status: int | None
    kind: KubeErrorKind
    detail: str = ""


class Taint(NamedTuple):
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


class NodeInfo(NamedTuple):
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    ready: bool
    unschedulable: bool
    allocatable_gpus: int


# -- pods of a managed job (kubernetes.md §6) -----------------------------------------------
class PodCondition(NamedTuple):
    type: str  # PodScheduled, DisruptionTarget, Ready, ...
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""


class ContainerWaiting(NamedTuple):
    """``state.waiting`` of one container (kubernetes.md §4.1)."""

    container: str
    reason: str
    message: str = ""


class ContainerTerminated(NamedTuple):
    """``state.terminated`` of one container: how it last ended."""

    container: str
    reason: str
    exit_code: int
    message: str = ""


class PodEvent(NamedTuple):
    """A core/v1 Event whose ``involvedObject`` is the pod (name and uid)."""

    reason: str
    message: str
    type: str = "Warning"


@dataclass(frozen=True, slots=True)
class PodObservation:
    """One pod as supervision sees it: status signals only, never a client object.

    ``labels`` are sorted ``(key, value)`` pairs. ``gpu_request`` is the pod's
    total ``nvidia.com/gpu`` request (limits default the requests), and
    ``gpu_selector`` the ``(key, value)`` pairs its ``nodeSelector`` and
    required node affinity (``In``) allow for GPU product label keys
    (kubernetes.md §3, §8.1): what the GPU shape check of §6.3 row 7 compares
    with the catalog.
    """

    name: str
    namespace: str
    phase: str = "Pending"
    labels: tuple[tuple[str, str], ...] = ()
    node_name: str | None = None
    conditions: tuple[PodCondition, ...] = ()
    container_waiting: tuple[ContainerWaiting, ...] = ()
    init_container_waiting: tuple[ContainerWaiting, ...] = ()
    container_terminated: tuple[ContainerTerminated, ...] = ()
    init_container_terminated: tuple[ContainerTerminated, ...] = ()
    events: tuple[PodEvent, ...] = ()  # Warning events, oldest first
    uid: str = ""
    gpu_request: int = 0
    gpu_selector: tuple[tuple[str, str], ...] = ()

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def label(self, key: str) -> str | None:
        return next((value for k, value in self.labels if k == key), None)

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


# -- the image pull probe (kubernetes.md §9) ------------------------------------------------
class DeleteOutcome(StrEnum):
    """The answer to a UID-preconditioned DELETE (kubernetes.md §5.1, §5.3)."""

    ACCEPTED = "accepted"  # 200/202: our object is deleted or terminating
    GONE = "gone"  # 404: already gone
    CONFLICT = "conflict"  # 409: the name belongs to another object now; never deleted


@dataclass(frozen=True, slots=True)
class ProbePod:
    """One pull-probe pod as the API answered it, never a client object.

    ``labels`` and ``spec`` are the server's JSON (camelCase keys, None
    fields dropped), so the requested manifest and the observed pod compare
    field by field. ``image_id`` is the first container's ``imageID`` ("" before
    the pull); ``deleting`` means ``deletionTimestamp`` is set; ``deleted``
    that a watch reported the object gone (a ``DELETED`` event).
    """

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, object] = field(default_factory=dict)
    phase: str = "Pending"
    image_id: str = ""
    node_name: str = ""
    deleting: bool = False
    deleted: bool = False
    observation: PodObservation | None = None


# -- the drain preview (kubernetes.md §7) ---------------------------------------------------
class SelectorRequirement(NamedTuple):
    """One ``matchExpressions`` entry."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist (anything else matches nothing)
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A structured label selector; an empty one matches every pod (policy/v1)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """``status`` of a PodDisruptionBudget as the disruption controller last wrote it."""

    current_healthy: int
    desired_healthy: int
    disruptions_allowed: int
    expected_pods: int
    observed_generation: int | None = None


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """One policy/v1 PodDisruptionBudget, never a client object.

    ``selector`` None is a null selector (it matches no pod); ``min_available``
    and ``max_unavailable`` are an int or a percentage string such as ``"50%"``;
    ``unhealthy_pod_eviction_policy`` None means the default ``IfHealthyBudget``;
    ``status`` None means the controller has not written one yet.
    """

    name: str
    namespace: str
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str | None = None
    generation: int = 1
    status: BudgetStatus | None = None

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodePod:
    """A pod bound to a node, as a node drain sees it (kubernetes.md §7.1).

    ``ready`` is the ``Ready`` condition; ``deleting`` that ``deletionTimestamp``
    is set; ``daemonset`` that an owner reference has kind ``DaemonSet``;
    ``mirror`` that it carries the ``kubernetes.io/config.mirror`` annotation.
    """

    name: str
    namespace: str
    node_name: str
    labels: tuple[tuple[str, str], ...] = ()
    phase: str = "Running"
    ready: bool = True
    deleting: bool = False
    daemonset: bool = False
    mirror: bool = False

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"
