"""A scheduler simulation producing the real Unschedulable messages (kubernetes.md §4.2, §8.2).

Each node is run through the default filters in upstream order and reports
the first failing one: NodeUnschedulable (``node(s) were unschedulable``),
TaintToleration (``node(s) had untolerated taint {k: v}``), NodeAffinity
(``node(s) didn't match Pod's node affinity/selector``), then NodeResourcesFit
(``Too many pods``, ``Insufficient <resource>`` for each short resource). The
histogram is rendered as upstream's FitError, followed by the preemption
summary (resource failures: ``No preemption victims found for incoming pod``;
the others: ``Preemption is not helpful for scheduling``).
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from tests.support.fakekube.admission import parse_quantity, pod_requests

__all__ = ["fit_failures", "unschedulable_message"]

_UNRESOLVABLE_PREEMPTION = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key", "")
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator", "Equal")
    if operator == "Exists":
        return True
    return bool(key) and toleration.get("value", "") == taint.get("value", "")


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    value = labels.get(key)
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _affinity_matches(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(
        all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])
        for term in terms
    )


def _node_failures(
    pod: dict[str, Any], node: dict[str, Any], bound: list[dict[str, Any]]
) -> list[tuple[str, bool]]:
    """The failing filter's reasons for one node, each with "resolvable by preemption"."""
    spec = node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if spec.get("unschedulable") and not any(
        _tolerates(t, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        for t in tolerations
    ):
        return [("node(s) were unschedulable", False)]
    for taint in spec.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            text = f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
            return [(text, False)]
    if not _affinity_matches(pod, labels):
        return [("node(s) didn't match Pod's node affinity/selector", False)]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    failures: list[tuple[str, bool]] = []
    if len(bound) + 1 > int(parse_quantity(allocatable.get("pods", "110"))):
        failures.append(("Too many pods", True))
    used: dict[str, Decimal] = {}
    for other in bound:
        for key, value in pod_requests(other).items():
            used[key] = used.get(key, Decimal(0)) + value
    for key, want in sorted(pod_requests(pod).items()):
        if want <= 0:
            continue
        have = parse_quantity(allocatable.get(key, "0")) - used.get(key, Decimal(0))
        if want > have:
            failures.append((f"Insufficient {key}", True))
    return failures


def fit_failures(
    pod: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> dict[str, list[tuple[str, bool]]]:
    """Per node name, the reasons it cannot take ``pod`` (empty list: it fits)."""
    active = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and (p.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid")
    ]
    result = {}
    for node in nodes:
        name = node["metadata"]["name"]
        bound = [p for p in active if (p.get("spec") or {}).get("nodeName") == name]
        result[name] = _node_failures(pod, node, bound)
    return result


def unschedulable_message(failures: dict[str, list[tuple[str, bool]]]) -> str:
    """Upstream's FitError text, including the ``preemption:`` part (1.24+)."""
    total = len(failures)
    if total == 0:
        return "no nodes available to schedule pods"
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for node_reasons in failures.values():
        for text, _ in node_reasons:
            reasons[text] += 1
        resolvable = any(flag for _, flag in node_reasons)
        preemption[_NO_VICTIMS if resolvable else _UNRESOLVABLE_PREEMPTION] += 1
    histogram = ", ".join(sorted(f"{count} {text}" for text, count in reasons.items()))
    victims = ", ".join(sorted(f"{count} {text}" for text, count in preemption.items()))
    return (
        f"0/{total} nodes are available: {histogram}. "
        f"preemption: 0/{total} nodes are available: {victims}."
    )
