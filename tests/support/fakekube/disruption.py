"""The double's disruption controller: policy/v1 PodDisruptionBudget status (kubernetes.md §7, §10.1).

The store calls ``status`` whenever a pod or a budget of a namespace changes
(as the real controller resyncs on pod and budget events), so a budget's
status follows its pods. The rules are the upstream controller's:

- **matching pods**: the pods of the budget's namespace its ``spec.selector``
  matches (``matchLabels`` and ``matchExpressions`` with ``In``, ``NotIn``,
  ``Exists``, ``DoesNotExist``); in policy/v1 an empty selector matches every
  pod of the namespace and a missing (null) one matches none;
- ``currentHealthy``: matching pods with ``Ready=True`` and no
  ``deletionTimestamp``;
- an integer ``minAvailable``: ``expectedPods`` is the number of matching pods
  and ``desiredHealthy`` the integer;
- a percentage ``minAvailable`` or any ``maxUnavailable``: ``expectedPods`` is
  the summed scale of the matching pods' controllers (an owner reference with
  ``controller: true``); pods without one are *unmanaged* and not counted.
  Percentages round up; ``desiredHealthy`` is the scaled ``minAvailable``, or
  ``expectedPods`` minus the scaled ``maxUnavailable`` (never below 0); with
  neither field the controller counts nothing (``expectedPods`` 0);
- ``disruptionsAllowed`` = ``currentHealthy - desiredHealthy``, never below 0,
  and 0 while ``expectedPods`` is 0 (so a budget that does not see its pods yet
  is safe); ``observedGeneration`` = the budget's ``generation``;
- one ``DisruptionAllowed`` condition: ``True``/``SufficientPods`` when a
  disruption is allowed, else ``False``/``InsufficientPods``; its
  ``lastTransitionTime`` moves only when its status flips.

Limits: the double serves no workload controllers, so a controller's scale is
the number of its non-terminal pods in the namespace unless a test set it
(``FakeKube.set_controller_scale``); no ``disruptedPods`` (no eviction
subresource); no ``UnmanagedPods`` or ``NoPods`` events.
``unhealthyPodEvictionPolicy`` is validated and stored; it changes what the
eviction API allows, not the status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tests.support.fakekube import objects
from tests.support.fakekube.errors import ApiError
from tests.support.fakekube.selectors import match_label_selector_spec

__all__ = ["EVICTION_POLICIES", "matching_pods", "status", "validate"]

EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_PERCENT = re.compile(r"^[0-9]+%$")
_TERMINAL = ("Succeeded", "Failed")


def _scaled(value: int | str, total: int) -> int:
    """An int-or-percent against ``total``, a percentage rounded up (as upstream)."""
    if isinstance(value, str):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def _invalid_value(field: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return f"spec.{field}: Invalid value: {value!r}: must be an integer or percentage"
    if isinstance(value, int):
        if value >= 0:
            return None
        return f"spec.{field}: Invalid value: {value}: must be greater than or equal to 0"
    if not _PERCENT.match(value):
        return (
            f'spec.{field}: Invalid value: "{value}": a valid percent string must be a numeric'
            " string followed by an ending '%'"
        )
    if int(value[:-1]) > 100:
        return f'spec.{field}: Invalid value: "{value}": must not be greater than 100%'
    return None


def validate(pdb: Mapping[str, Any]) -> None:
    """422 for a budget spec the API server rejects.

    Raises:
        ApiError: 422 Invalid: both ``minAvailable`` and ``maxUnavailable``, a
            negative or malformed int-or-percent, an unknown eviction policy.
    """
    name = (pdb.get("metadata") or {}).get("name", "")
    spec = pdb.get("spec") or {}
    errors: list[str] = []
    if "minAvailable" in spec and "maxUnavailable" in spec:
        errors.append("spec: Invalid value: minAvailable and maxUnavailable cannot be both set")
    for field in ("minAvailable", "maxUnavailable"):
        if field in spec:
            problem = _invalid_value(field, spec[field])
            if problem:
                errors.append(problem)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in EVICTION_POLICIES)
        errors.append(
            f'spec.unhealthyPodEvictionPolicy: Unsupported value: "{policy}": '
            f"supported values: {supported}"
        )
    if errors:
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ApiError.invalid("PodDisruptionBudget", name, joined, "policy")


def matching_pods(pdb: Mapping[str, Any], pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of the budget's namespace its selector matches (null selector: none)."""
    namespace = (pdb.get("metadata") or {}).get("namespace", "")
    selector = (pdb.get("spec") or {}).get("selector")
    return [
        p
        for p in pods
        if (p.get("metadata") or {}).get("namespace", "") == namespace
        and match_label_selector_spec(selector, (p.get("metadata") or {}).get("labels"))
    ]


def _healthy(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _controller_uid(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True and ref.get("uid"):
            return str(ref["uid"])
    return None


def _expected_scale(
    matching: list[dict[str, Any]], namespace_pods: list[dict[str, Any]], scales: Mapping[str, int]
) -> int:
    """The summed scale of the controllers of ``matching``; unmanaged pods count for nothing."""
    controllers = {uid for uid in map(_controller_uid, matching) if uid is not None}
    total = 0
    for uid in controllers:
        if uid in scales:
            total += scales[uid]
            continue
        total += sum(
            1
            for p in namespace_pods
            if _controller_uid(p) == uid and (p.get("status") or {}).get("phase") not in _TERMINAL
        )
    return total


def _condition(
    allowed: bool, generation: int, previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    state = "True" if allowed else "False"
    old = next(
        (
            c
            for c in (previous or {}).get("conditions") or []
            if c.get("type") == "DisruptionAllowed"
        ),
        None,
    )
    stamp = old["lastTransitionTime"] if old and old.get("status") == state else objects.now()
    return {
        "type": "DisruptionAllowed",
        "status": state,
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": stamp,
    }


def status(
    pdb: Mapping[str, Any],
    namespace_pods: list[dict[str, Any]],
    *,
    scales: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The status the disruption controller would write for ``pdb`` now."""
    spec = pdb.get("spec") or {}
    generation = int((pdb.get("metadata") or {}).get("generation") or 1)
    matching = matching_pods(pdb, namespace_pods)
    healthy = sum(1 for p in matching if _healthy(p))
    if "maxUnavailable" in spec:
        expected = _expected_scale(matching, namespace_pods, scales or {})
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif isinstance(spec.get("minAvailable"), str):
        expected = _expected_scale(matching, namespace_pods, scales or {})
        desired = _scaled(spec["minAvailable"], expected)
    elif "minAvailable" in spec:
        expected, desired = len(matching), int(spec["minAvailable"])
    else:  # neither: the upstream controller counts nothing, so nothing may be disrupted
        expected, desired = 0, 0
    allowed = healthy - desired if expected > 0 else 0
    allowed = max(0, allowed)
    return {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [_condition(allowed > 0, generation, pdb.get("status"))],
    }
