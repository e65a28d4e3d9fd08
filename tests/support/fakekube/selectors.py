"""Label and field selectors, parsed and matched as the API server does (kubernetes.md §10.3).

Label selectors support equality (``k=v``, ``k==v``), ``k!=v``, set-based
``k in (a,b)`` and ``k notin (a,b)``, existence ``k`` and ``!k``. Field
selectors support ``=``, ``==`` and ``!=`` on the fields each resource allows;
an unsupported field is a 400, exactly like the real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.fakekube.errors import ApiError

__all__ = ["FieldSelector", "LabelSelector", "match_label_selector_spec"]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(in|notin)\s*\((.*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")

# Fields each resource accepts in fieldSelector (besides metadata.name and metadata.namespace).
_FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "nodes": frozenset({"spec.unschedulable"}),
    "secrets": frozenset({"type"}),
    "namespaces": frozenset({"status.phase"}),
}


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" match objects without the key, as upstream does.
        return not present or value not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in (p.strip() for p in parts) if part]


def _bad(kind: str, text: str, why: str) -> ApiError:
    return ApiError(400, "BadRequest", f'unable to parse requirement: {kind} "{text}": {why}')


class LabelSelector:
    """A parsed ``labelSelector`` query value."""

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self._requirements = [self._parse(part) for part in _split_top_level(self.text)]

    @staticmethod
    def _parse(part: str) -> _Requirement:
        eq = _EQ_RE.match(part)
        if eq:
            key, op, value = eq.groups()
            return _Requirement(key, "!=" if op == "!=" else "=", (value,))
        found = _SET_RE.match(part)
        if not found:
            raise _bad("label selector", part, "invalid syntax")
        bang, key, op, values = found.groups()
        if op:
            if bang:
                raise _bad("label selector", part, "'!' only applies to existence")
            items = tuple(v.strip() for v in values.split(",") if v.strip())
            if not items:
                raise _bad(
                    "label selector", part, "for 'in', 'notin' operators, values set can't be empty"
                )
            return _Requirement(key, op, items)
        return _Requirement(key, "!exists" if bang else "exists", ())

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self._requirements)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, Mapping) and path == "source":
        return str(current.get("component", ""))
    return str(current)


class FieldSelector:
    """A parsed ``fieldSelector`` query value for one resource."""

    def __init__(self, text: str | None, resource: str) -> None:
        self.text = text or ""
        self._terms: list[tuple[str, bool, str]] = []
        allowed = _FIELDS.get(resource, frozenset()) | {"metadata.name", "metadata.namespace"}
        for part in _split_top_level(self.text):
            found = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
            if not found:
                raise _bad("field selector", part, "invalid syntax")
            field, op, value = found.groups()
            if field not in allowed:
                raise ApiError(400, "BadRequest", f'field label not supported: "{field}"')
            self._terms.append((field, op == "!=", value))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, f) == v) != negate for f, negate, v in self._terms)


def match_label_selector_spec(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None
) -> bool:
    """Match a structured ``LabelSelector`` (``matchLabels`` + ``matchExpressions``)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops: dict[str, Callable[[str, list[str]], bool]] = {
        "In": lambda k, vs: k in labels and labels[k] in vs,
        "NotIn": lambda k, vs: k not in labels or labels[k] not in vs,
        "Exists": lambda k, vs: k in labels,
        "DoesNotExist": lambda k, vs: k not in labels,
    }
    for expr in selector.get("matchExpressions") or []:
        check = ops.get(expr.get("operator", ""))
        if check is None or not check(expr.get("key", ""), list(expr.get("values") or [])):
            return False
    return True
