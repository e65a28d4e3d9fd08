"""The resource types the double serves, with the discovery data kubectl reads (kubernetes.md §10.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "GROUPS",
    "RESOURCES",
    "Resource",
    "api_resource_list",
    "api_versions",
    "group",
    "group_list",
]

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True, slots=True)
class Resource:
    """One served resource type."""

    name: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_spec: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("namespaces", "Namespace", "", "v1", False, ("ns",), ("status",)),
        Resource("nodes", "Node", "", "v1", False, ("no",), ("status",)),
        Resource("pods", "Pod", "", "v1", True, ("po",), ("status", "log"), ("all",)),
        Resource("secrets", "Secret", "", "v1", True, has_spec=False),
        Resource("configmaps", "ConfigMap", "", "v1", True, ("cm",), has_spec=False),
        Resource("serviceaccounts", "ServiceAccount", "", "v1", True, ("sa",), has_spec=False),
        Resource("events", "Event", "", "v1", True, ("ev",), has_spec=False),
        Resource("resourcequotas", "ResourceQuota", "", "v1", True, ("quota",), ("status",)),
        Resource(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            "policy",
            "v1",
            True,
            ("pdb",),
            ("status",),
        ),
        Resource("runtimeclasses", "RuntimeClass", "node.k8s.io", "v1", False, has_spec=False),
    )
}

GROUPS: dict[str, str] = {"policy": "v1", "node.k8s.io": "v1"}


def _resource_entries(resource: Resource) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [
        {
            "name": resource.name,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": _ALL_VERBS,
            **({"shortNames": list(resource.short_names)} if resource.short_names else {}),
            **({"categories": list(resource.categories)} if resource.categories else {}),
        }
    ]
    for sub in resource.subresources:
        verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
        kind = "Pod" if sub == "log" else resource.kind
        entries.append(
            {
                "name": f"{resource.name}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind,
                "verbs": verbs,
            }
        )
    return entries


def api_resource_list(group: str, version: str) -> dict[str, Any]:
    """``/api/v1`` or ``/apis/<group>/<version>``."""
    resources = [r for r in RESOURCES.values() if r.group == group and r.version == version]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for r in resources for entry in _resource_entries(r)],
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def group_list() -> dict[str, Any]:
    """``/apis``."""
    groups = []
    for name, version in GROUPS.items():
        gv = {"groupVersion": f"{name}/{version}", "version": version}
        groups.append({"name": name, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(name: str) -> dict[str, Any]:
    """``/apis/<group>``."""
    version = GROUPS[name]
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": [gv],
        "preferredVersion": gv,
    }
