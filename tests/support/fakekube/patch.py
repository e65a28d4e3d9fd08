"""PATCH bodies: JSON merge (RFC 7386), strategic merge and JSON patch (RFC 6902).

Strategic merge follows the built-in types' patch strategies for the lists
the double's objects carry (conditions by ``type``, container statuses and
containers by ``name``, taints by ``key``...), honours ``null`` deletion and
the ``$patch: delete|replace`` directives; every other list is replaced.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.fakekube.errors import ApiError

__all__ = ["CONTENT_TYPES", "apply_patch"]

CONTENT_TYPES = (
    "application/strategic-merge-patch+json",
    "application/merge-patch+json",
    "application/json-patch+json",
)

# List field name -> merge key, for lists whose patchStrategy is "merge".
_MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "containers": "name",
    "initContainers": "name",
    "imagePullSecrets": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "taints": "key",
    "addresses": "type",
    "ownerReferences": "uid",
    "secrets": "name",
}
# Lists of scalars with patchStrategy "merge".
_SCALAR_MERGE = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    key = _MERGE_KEYS.get(field)
    if field in _SCALAR_MERGE:
        return list(target) + [item for item in patch if item not in target]
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [item for item in copy.deepcopy(patch) if item != {"$patch": "replace"}]
    if {"$patch": "replace"} in patch:
        return [copy.deepcopy(item) for item in patch if item != {"$patch": "replace"}]
    result = copy.deepcopy(target)
    for item in patch:
        directive = item.get("$patch")
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item.get(key)
            ),
            None,
        )
        if directive == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    """A strategic-merge patch, restricted to the strategies of the built-in types used here."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, [], value)
        else:
            result[key] = strategic_merge(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    current = doc
    for part in parts[:-1]:
        current = current[int(part)] if isinstance(current, list) else current[part]
    return current


def json_patch(target: Any, operations: list[Any]) -> Any:
    """RFC 6902 ``add``, ``remove``, ``replace``, ``test``, ``copy`` and ``move``."""
    doc = copy.deepcopy(target)
    for op in operations:
        try:
            kind = op["op"]
            parts = _pointer(op["path"])
            if kind in ("copy", "move"):
                source = _pointer(op["from"])
                value: Any = copy.deepcopy(_get(doc, source))
                if kind == "move":
                    doc = _remove(doc, source)
                doc = _add(doc, parts, value)
            elif kind == "add":
                doc = _add(doc, parts, copy.deepcopy(op["value"]))
            elif kind == "remove":
                doc = _remove(doc, parts)
            elif kind == "replace":
                doc = _remove(doc, parts)
                doc = _add(doc, parts, copy.deepcopy(op["value"]))
            elif kind == "test":
                if _get(doc, parts) != op["value"]:
                    raise ApiError(
                        422,
                        "Invalid",
                        f"the server rejected our request due to an error in our request: test failed at {op['path']}",
                    )
            else:
                raise ApiError(400, "BadRequest", f"Unexpected kind: {kind}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: {exc}",
            ) from exc
    return doc


def _get(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, list):
        parent.pop(int(last))
    else:
        del parent[last]
    return doc


def apply_patch(target: dict[str, Any], body: Any, content_type: str) -> dict[str, Any]:
    """Apply a PATCH body of the given content type; 415 for apply-patch and unknown types."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json-patch+json":
        if not isinstance(body, list):
            raise ApiError(400, "BadRequest", "json patch must be a list of operations")
        result = json_patch(target, body)
    elif kind == "application/merge-patch+json":
        result = merge_patch(target, body)
    elif kind == "application/strategic-merge-patch+json":
        result = strategic_merge(target, body)
    else:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: {', '.join(CONTENT_TYPES)}",
        )
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "the patch did not produce an object")
    return result
