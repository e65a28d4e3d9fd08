"""Admission on pod CREATE: ServiceAccount, DefaultTolerationSeconds, RuntimeClass, ResourceQuota.

- ServiceAccount (kubernetes.md §2.1): ``serviceAccountName`` defaults to
  ``default``; a missing account is a 403 with the real message; the account's
  ``imagePullSecrets`` are copied only when the pod lists none (no merging);
  the token volume is mounted unless automounting is off.
- DefaultTolerationSeconds (§3): the two NoExecute not-ready/unreachable
  tolerations with 300 s, unless the pod already tolerates those taints.
- RuntimeClass (§3): must exist; its ``scheduling.nodeSelector`` is merged
  (a conflict is rejected), its tolerations appended, its overhead set.
- ResourceQuota (§4.2, optional in §10.3): ``pods``/``count/pods``,
  ``requests.*``, ``limits.*`` and bare ``cpu``/``memory``/extended resources.

Also the create-time defaults of the other resources (secret ``stringData``,
namespace label and phase, PDB validation, quota status), the required-field
checks (422), and the node lifecycle rule that keeps the ``unschedulable``
taint in step with ``spec.unschedulable``.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from kubernetes.utils import quantity as _quantity

from tests.support.fakekube import disruption, objects
from tests.support.fakekube.errors import ApiError

__all__ = ["admit", "admit_pod", "parse_quantity", "pod_requests", "reconcile_node", "validate"]

Lookup = Callable[[str, str, str], dict[str, Any] | None]
Listing = Callable[[str, str], list[dict[str, Any]]]

_TERMINAL = ("Succeeded", "Failed")


def parse_quantity(value: object) -> Decimal:
    """A Kubernetes quantity (``500m``, ``8Gi``, ``8``) as a Decimal."""
    parsed: Decimal = _quantity.parse_quantity(value)  # type: ignore[no-untyped-call]  # untyped upstream
    return parsed


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError.forbidden("pods", name, why)


def _service_account(pod: dict[str, Any], namespace: str, lookup: Lookup) -> None:
    spec = pod["spec"]
    name = pod["metadata"]["name"]
    sa_name = spec["serviceAccountName"]
    account = lookup("serviceaccounts", namespace, sa_name)
    if account is None:
        raise _forbidden(
            name,
            f"error looking up service account {namespace}/{sa_name}: "
            f'serviceaccount "{sa_name}" not found',
        )
    if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [
            {"name": ref["name"]} for ref in account["imagePullSecrets"] if ref.get("name")
        ]
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = account.get("automountServiceAccountToken")
    if automount is not False:
        objects.service_account_volume(pod)


def _default_toleration_seconds(spec: dict[str, Any]) -> None:
    tolerations = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        # Same test as the upstream plugin: an empty key or effect tolerates everything.
        tolerated = any(
            t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
            for t in tolerations
        )
        if not tolerated:
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )


def _runtime_class(pod: dict[str, Any], lookup: Lookup) -> None:
    spec = pod["spec"]
    rc_name = spec.get("runtimeClassName")
    if not rc_name:
        return
    name = pod["metadata"]["name"]
    runtime_class = lookup("runtimeclasses", "", rc_name)
    if runtime_class is None:
        raise _forbidden(name, f'pod rejected: RuntimeClass "{rc_name}" not found')
    scheduling = runtime_class.get("scheduling") or {}
    selector = spec.get("nodeSelector") or {}
    for key, value in (scheduling.get("nodeSelector") or {}).items():
        if key in selector and selector[key] != value:
            raise _forbidden(name, "pod rejected: conflict with RuntimeClass nodeSelector")
        selector[key] = value
    if selector:
        spec["nodeSelector"] = selector
    tolerations = spec.setdefault("tolerations", [])
    for toleration in scheduling.get("tolerations") or []:
        if toleration not in tolerations:
            tolerations.append(copy.deepcopy(toleration))
    overhead = (runtime_class.get("overhead") or {}).get("podFixed")
    if overhead:
        if spec.get("overhead") and spec["overhead"] != overhead:
            raise _forbidden(
                name, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
            )
        spec["overhead"] = dict(overhead)


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """Effective requests: the sum over containers, at least the largest init container, plus overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[key] = total.get(key, Decimal(0)) + parse_quantity(value)
    for container in spec.get("initContainers") or []:
        for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[key] = max(total.get(key, Decimal(0)), parse_quantity(value))
    for key, value in (spec.get("overhead") or {}).items():
        total[key] = total.get(key, Decimal(0)) + parse_quantity(value)
    return total


def _pod_limits(pod: dict[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for key, value in ((container.get("resources") or {}).get("limits") or {}).items():
            total[key] = total.get(key, Decimal(0)) + parse_quantity(value)
    return total


def _usage(pod: dict[str, Any]) -> dict[str, Decimal]:
    usage: dict[str, Decimal] = {"pods": Decimal(1), "count/pods": Decimal(1)}
    requests = pod_requests(pod)
    for key, value in requests.items():
        usage[f"requests.{key}"] = value
        if key in ("cpu", "memory", "ephemeral-storage"):
            usage[key] = value
    for key, value in _pod_limits(pod).items():
        usage[f"limits.{key}"] = value
    return usage


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _quota(pod: dict[str, Any], namespace: str, listing: Listing) -> None:
    requested = _usage(pod)
    active = [
        p
        for p in listing("pods", namespace)
        if (p.get("status") or {}).get("phase") not in _TERMINAL
    ]
    for quota in sorted(listing("resourcequotas", namespace), key=lambda q: q["metadata"]["name"]):
        hard = (quota.get("spec") or {}).get("hard") or {}
        exceeded: list[tuple[str, str, str, str]] = []
        for resource in sorted(hard):
            want = requested.get(resource, Decimal(0))
            if not want:
                continue
            used = sum((_usage(p).get(resource, Decimal(0)) for p in active), Decimal(0))
            if used + want > parse_quantity(hard[resource]):
                exceeded.append((resource, _fmt(want), _fmt(used), hard[resource]))
        if exceeded:
            requested_text = ",".join(f"{r}={want}" for r, want, _, _ in exceeded)
            used_text = ",".join(f"{r}={used}" for r, _, used, _ in exceeded)
            limited_text = ",".join(f"{r}={limit}" for r, _, _, limit in exceeded)
            raise _forbidden(
                pod["metadata"]["name"],
                f"exceeded quota: {quota['metadata']['name']}, requested: {requested_text}, "
                f"used: {used_text}, limited: {limited_text}",
            )


def admit_pod(pod: dict[str, Any], namespace: str, lookup: Lookup, listing: Listing) -> None:
    """Mutate and validate a pod being created, in the admission chain's order.

    Raises:
        ApiError: 403 Forbidden for a missing ServiceAccount or RuntimeClass, or quota.
    """
    objects.pod_defaults(pod)
    _service_account(pod, namespace, lookup)
    _runtime_class(pod, lookup)
    _default_toleration_seconds(pod["spec"])
    _quota(pod, namespace, listing)


def admit(
    resource: str, obj: dict[str, Any], namespace: str, lookup: Lookup, listing: Listing
) -> None:
    """Create-time mutation for every resource (defaults the API server fills in).

    Raises:
        ApiError: from pod admission.
    """
    if resource == "pods":
        admit_pod(obj, namespace, lookup, listing)
    elif resource == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
    elif resource == "secrets":
        obj.setdefault("type", "Opaque")
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(value.encode()).decode()
    elif resource == "nodes":
        reconcile_node(obj)
    elif resource == "poddisruptionbudgets":
        # 422s only: the status is written by the store's disruption controller (disruption.py).
        disruption.validate(obj)
    elif resource == "resourcequotas":
        hard = dict((obj.get("spec") or {}).get("hard") or {})
        obj["status"] = {"hard": hard, "used": {key: "0" for key in hard}}


def validate(resource: str, obj: dict[str, Any]) -> None:
    """422 for the required fields the double checks.

    Raises:
        ApiError: 422 Invalid.
    """
    name = obj.setdefault("metadata", {})["name"]
    if resource == "pods":
        containers = (obj.get("spec") or {}).get("containers") or []
        if not containers:
            raise ApiError.invalid("Pod", name, "spec.containers: Required value")
        for index, container in enumerate(containers):
            for field in ("name", "image"):
                if not container.get(field):
                    raise ApiError.invalid(
                        "Pod", name, f"spec.containers[{index}].{field}: Required value"
                    )
    elif resource == "events" and not obj.get("involvedObject"):
        raise ApiError.invalid("Event", name, 'involvedObject.namespace: Invalid value: ""')
    elif resource == "runtimeclasses" and not obj.get("handler"):
        raise ApiError.invalid("RuntimeClass", name, "handler: Required value")


def reconcile_node(node: dict[str, Any]) -> None:
    """Keep the ``unschedulable`` taint in step with ``spec.unschedulable`` (TaintNodesByCondition)."""
    spec = node.setdefault("spec", {})
    key = "node.kubernetes.io/unschedulable"
    present = any(t.get("key") == key for t in spec.get("taints") or [])
    if present == bool(spec.get("unschedulable")):
        return
    taints = [t for t in spec.get("taints") or [] if t.get("key") != key]
    if spec.get("unschedulable"):
        taints.append(
            {
                "key": "node.kubernetes.io/unschedulable",
                "effect": "NoSchedule",
                "timeAdded": objects.now(),
            }
        )
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
