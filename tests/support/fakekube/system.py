"""Non-resource answers: ``/version``, health checks, and the server-side Tables kubectl prints.

``/readyz`` and ``/livez`` answer ``ok``; ``?verbose`` lists one
``[+]<check> ok`` line per check and ends ``readyz check passed``;
``?exclude=<check>`` drops a check; ``/readyz/<check>`` answers that check
(kubernetes.md §1.1). A failing answer lists ``[-]etcd failed: reason
withheld`` and ends ``readyz check failed``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

__all__ = ["VERSION", "health_body", "known_check", "table"]

VERSION: dict[str, str] = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.4",
    "gitCommit": "a78aa47129b8539636eb86a9d00e31b2720fe06b",
    "gitTreeState": "clean",
    "buildDate": "2024-12-10T18:44:58Z",
    "goVersion": "go1.22.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_LIVEZ_CHECKS = [
    "ping",
    "log",
    "etcd",
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/start-informers",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/bootstrap-controller",
    "poststarthook/apiservice-registration-controller",
]
_READYZ_CHECKS = [
    *_LIVEZ_CHECKS[:3],
    "etcd-readiness",
    "informer-sync",
    *_LIVEZ_CHECKS[3:],
    "shutdown",
]


def _checks(kind: str) -> list[str]:
    return _READYZ_CHECKS if kind == "readyz" else _LIVEZ_CHECKS


def known_check(kind: str, check: str) -> bool:
    return check in _checks(kind)


def health_body(kind: str, *, verbose: bool, exclude: list[str], ok: bool) -> str:
    """The text of a ``/readyz``, ``/livez`` or ``/healthz`` answer."""
    if ok and not verbose:
        return "ok"
    lines = []
    for check in _checks(kind):
        if check in exclude:
            continue
        if not ok and check == "etcd":
            lines.append("[-]etcd failed: reason withheld")
        else:
            lines.append(f"[+]{check} ok")
    lines.append(f"{kind} check {'passed' if ok else 'failed'}")
    return "\n".join(lines) + "\n"


def _age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    created = _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC)
    seconds = max(0, int((_dt.datetime.now(_dt.UTC) - created).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for group in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(group) or []:
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated", {}).get("reason") and group == "containerStatuses":
                reason = state["terminated"]["reason"]
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_row(pod: dict[str, Any]) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        _pod_status(pod),
        str(sum(int(cs.get("restartCount", 0)) for cs in statuses)),
        _age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        (pod.get("spec") or {}).get("nodeName") or "<none>",
        "<none>",
        "<none>",
    ]


def _node_row(node: dict[str, Any]) -> list[Any]:
    conditions = {
        c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []
    }
    state = {"True": "Ready", "False": "NotReady"}.get(conditions.get("Ready", ""), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
    ]


def _column(name: str, description: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "pods": [
        _column("Name", "Name must be unique within a namespace.", fmt="name"),
        _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _column("Status", "The aggregate status of the containers in this pod."),
        _column("Restarts", "The number of times the containers in this pod have been restarted."),
        _column(
            "Age",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        _column("IP", "IP address allocated to the pod.", 1),
        _column("Node", "Name of the Node this pod is assigned to.", 1),
        _column("Nominated Node", "Name of the node nominated by the scheduler.", 1),
        _column("Readiness Gates", "Pod readiness gates.", 1),
    ],
    "nodes": [
        _column("Name", "Name must be unique within a namespace.", fmt="name"),
        _column("Status", "The status of the node"),
        _column("Roles", "The roles of the node"),
        _column(
            "Age",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        _column("Version", "Kubelet Version reported by the node."),
    ],
}
_GENERIC = [
    _column("Name", "Name must be unique within a namespace.", fmt="name"),
    _column(
        "Age",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    ),
]


def table(
    resource: str, items: list[dict[str, Any]], rv: str, include_object: str
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table, as returned for ``Accept: ...;as=Table``."""
    rows = []
    for obj in items:
        if resource == "pods":
            cells = _pod_row(obj)
        elif resource == "nodes":
            cells = _node_row(obj)
        else:
            cells = [obj["metadata"]["name"], _age(obj["metadata"].get("creationTimestamp"))]
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": _COLUMNS.get(resource, _GENERIC),
        "rows": rows,
    }
