"""Complete objects: server-filled defaults, validation and builders (kubernetes.md §10.2).

The kubernetes 37 client deserialises strictly (required fields, strict
string/int types), so every object built here carries every field the
client's models require: containers have ``name``, container statuses have
``name, image, imageID, ready, restartCount``, conditions have ``type`` and
``status``, events have ``involvedObject`` and ``metadata``, quantities are
strings.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import secrets
from typing import Any

from tests.support.fakekube.errors import ApiError

__all__ = [
    "image_id_for",
    "make_event",
    "make_namespace",
    "make_node",
    "node_taints_for",
    "now",
    "pod_defaults",
    "random_suffix",
    "ready_condition",
    "service_account_volume",
    "validate_metadata",
]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.',"
    " and must start and end with an alphanumeric character (e.g. 'example.com', regex used for"
    " validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.',"
    " and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or"
    " '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def now() -> str:
    """The current UTC time in the RFC 3339 form the API uses."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def _label_errors(labels: dict[str, Any]) -> list[str]:
    errors = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix))) or (
            len(name) > 63 or not _LABEL_NAME.match(name)
        ):
            errors.append(f'metadata.labels: Invalid value: "{key}": name part must be valid')
        if not isinstance(value, str):
            errors.append(f"metadata.labels: Invalid value: {value!r}: must be a string")
        elif len(value) > 63:
            errors.append(
                f'metadata.labels: Invalid value: "{value}": must be no more than 63 characters'
            )
        elif not _LABEL_VALUE.match(value):
            errors.append(f'metadata.labels: Invalid value: "{value}": {_VALUE_MSG}')
    return errors


def validate_metadata(kind: str, meta: dict[str, Any], *, dns_label: bool = False) -> None:
    """422 for an invalid name or label, with the real field paths and wording.

    Raises:
        ApiError: 422 Invalid.
    """
    name = meta.get("name", "")
    errors: list[str] = []
    limit = 63 if dns_label else 253
    if not name:
        errors.append("metadata.name: Required value: name or generateName is required")
    elif len(name) > limit:
        errors.append(
            f'metadata.name: Invalid value: "{name}": must be no more than {limit} characters'
        )
    elif not _SUBDOMAIN.match(name) or (dns_label and "." in name):
        errors.append(f'metadata.name: Invalid value: "{name}": {_SUBDOMAIN_MSG}')
    errors += _label_errors(meta.get("labels") or {})
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            errors.append(f'metadata.annotations: Invalid value: "{key}": must be a string')
    if errors:
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ApiError.invalid(kind, name, joined)


def _default_pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _qos_class(containers: list[dict[str, Any]]) -> str:
    # Only cpu and memory decide the QoS class; extended resources (GPUs) do not.
    def pick(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if k in ("cpu", "memory")}

    requests = [pick(c.get("resources", {}).get("requests") or {}) for c in containers]
    limits = [pick(c.get("resources", {}).get("limits") or {}) for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    for req, lim in zip(requests, limits, strict=True):
        for res in ("cpu", "memory"):
            if res not in lim or req.get(res) != lim.get(res):
                return "Burstable"
    return "Guaranteed"


def pod_defaults(pod: dict[str, Any]) -> None:
    """Apply the defaulting the API server performs on pod create."""
    spec = pod.setdefault("spec", {})
    for key, value in (
        ("restartPolicy", "Always"),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("terminationGracePeriodSeconds", 30),
        ("securityContext", {}),
        ("enableServiceLinks", True),
        ("preemptionPolicy", "PreemptLowerPriority"),
        ("priority", 0),
        ("serviceAccountName", spec.get("serviceAccount") or "default"),
    ):
        spec.setdefault(key, value)
    spec["serviceAccount"] = spec["serviceAccountName"]
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        container.setdefault("imagePullPolicy", _default_pull_policy(container.get("image", "")))
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for key, value in limits.items():
                requests.setdefault(key, value)
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec.get("containers", [])))


def service_account_volume(pod: dict[str, Any]) -> None:
    """Mount the projected service-account token, as the ServiceAccount admission plugin does."""
    spec = pod["spec"]
    name = f"kube-api-access-{random_suffix()}"
    spec.setdefault("volumes", []).append(
        {
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ],
            },
        }
    )
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        container.setdefault("volumeMounts", []).append(
            {
                "name": name,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        )


def make_namespace(name: str) -> dict[str, Any]:
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def node_taints_for(ready: bool | None, unschedulable: bool, added: str) -> list[dict[str, Any]]:
    """The taints the node lifecycle controller keeps in step with readiness and cordoning.

    ``ready`` is True (Ready), False (NotReady) or None (Unknown: unreachable).
    """
    taints: list[dict[str, Any]] = []
    if ready is not True:
        key = "node.kubernetes.io/not-ready" if ready is False else "node.kubernetes.io/unreachable"
        taints.append({"key": key, "effect": "NoSchedule", "timeAdded": added})
        taints.append({"key": key, "effect": "NoExecute", "timeAdded": added})
    if unschedulable:
        taints.append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": added}
        )
    return taints


def ready_condition(ready: bool | None, stamp: str) -> dict[str, Any]:
    if ready is True:
        status, reason, message = "True", "KubeletReady", "kubelet is posting ready status"
    elif ready is False:
        status, reason = "False", "KubeletNotReady"
        message = (
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
            " message:Network plugin returns error: cni plugin not initialized"
        )
    else:
        status, reason, message = (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    return {
        "type": "Ready",
        "status": status,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def make_node(
    name: str,
    *,
    labels: dict[str, str] | None,
    gpus: int,
    ready: bool | None,
    unschedulable: bool,
    taints: list[dict[str, Any]] | None,
    cpu: str,
    memory: str,
    pods: int,
    index: int,
) -> dict[str, Any]:
    """A kubelet-registered node with complete status."""
    stamp = now()
    resources = {
        "cpu": cpu,
        "memory": memory,
        "pods": str(pods),
        "ephemeral-storage": "500Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        **(labels or {}),
    }
    pressure = [
        {
            "type": kind,
            "status": "False",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
            "reason": f"KubeletHas{reason}",
            "message": f"kubelet has {text}",
        }
        for kind, reason, text in (
            ("MemoryPressure", "SufficientMemory", "sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "no disk pressure"),
            ("PIDPressure", "SufficientPID", "sufficient PID available"),
        )
    ]
    spec: dict[str, Any] = {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]}
    all_taints = list(taints or []) + node_taints_for(ready, unschedulable, stamp)
    if all_taints:
        spec["taints"] = all_taints
    if unschedulable:
        spec["unschedulable"] = True
    machine = hashlib.sha256(name.encode()).hexdigest()
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": all_labels, "annotations": {}},
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [*pressure, ready_condition(ready, stamp)],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.0.{10 + index}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine[:32],
                "systemUUID": f"{machine[:8]}-{machine[8:12]}-{machine[12:16]}-{machine[16:20]}-{machine[20:32]}",
                "bootID": machine[32:64],
                "kernelVersion": "6.1.0-28-cloud-amd64",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.31.4",
                "kubeProxyVersion": "v1.31.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def image_id_for(image: str, runtime: str = "containerd") -> str:
    """The ``imageID`` a runtime reports after pulling ``image`` (kubernetes.md §4.4)."""
    repo, _, digest = image.partition("@")
    if not digest:
        repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
        digest = "sha256:" + hashlib.sha256(image.encode()).hexdigest()
    first = repo.split("/", 1)[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in first and ":" not in first and first != "localhost":
        repo = f"docker.io/{repo}"
    result = f"{repo}@{digest}"
    return f"docker-pullable://{result}" if runtime == "docker" else result


def make_event(
    involved: dict[str, Any],
    *,
    reason: str,
    message: str,
    type_: str,
    component: str,
    host: str | None,
    field_path: str | None,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved`` (a stored object)."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = now()
    ref: dict[str, Any] = {
        "kind": involved.get("kind", "Pod"),
        "namespace": namespace,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": involved.get("apiVersion", "v1"),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{meta['name']}.{secrets.token_hex(8)}",
            "namespace": namespace,
        },
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }
