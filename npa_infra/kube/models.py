"""Typed Kubernetes observations the logic layers consume (kubernetes.md §1, §8)."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

__all__ = ["KubeErrorKind", "NodeInfo", "ReadyzSample", "Taint"]


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
