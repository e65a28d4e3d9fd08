"""The few task-YAML keys the simulator reads, without PyYAML (skypilot-0.12.md §2.5, §10).

Importing PyYAML costs about a third of a simulated call, and a launch needs
only ``name``, ``execution``, ``num_nodes``, ``resources.accelerators`` /
``resources.cpus``, ``resources.image_id`` for job pods (``kubepods``), and the
task's ``_metadata`` scalars, which ``jobs queue -v`` shows as ``metadata``. So
this reader splits ``---`` documents and scans top-level ``key: value`` lines,
the ``resources`` mapping in block or flow style and the ``_metadata`` mapping's
scalars. Everything else (``run: |`` blocks, ``envs``, ``config``) is skipped;
it never raises.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

__all__ = ["read_documents"]

_KEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*)\s*:(?:\s+(.*?))?\s*$")
_FLOW_PAIR = re.compile(r"([A-Za-z_][\w.-]*)\s*:\s*([^,{}]+)")
_RESOURCE_KEYS = ("accelerators", "cpus", "memory", "infra", "cloud", "image_id")


def _scalar(text: str | None) -> str:
    value = (text or "").split(" #", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


def _flow(text: str) -> dict[str, str]:
    """``{accelerators: H100:8, cpus: 4+}`` or ``{accelerators: {H100: 8}}``."""
    nested = re.search(r"accelerators\s*:\s*\{\s*([^:}]+?)\s*:\s*([^}]+?)\s*\}", text)
    out = {k: _scalar(v) for k, v in _FLOW_PAIR.findall(text) if k in _RESOURCE_KEYS}
    if nested:
        out["accelerators"] = f"{_scalar(nested.group(1))}:{_scalar(nested.group(2))}"
    return out


def read_documents(text: str) -> list[dict[str, Any]]:
    """One dict per non-empty document: top-level scalars, plus ``resources`` and
    ``_metadata`` (its scalars, block style) as dicts."""
    docs: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    resources: dict[str, str] | None = None
    metadata: dict[str, str] | None = None
    pending: str | None = None  # a resources key whose value is a nested mapping
    for line in [*text.splitlines(), "---"]:
        if line.rstrip() == "---" or line.startswith("--- "):
            if current:
                docs.append(current)
            current, resources, metadata, pending = {}, None, None, None
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY.match(line)
        indented = line[:1].isspace()
        if not indented:
            resources, metadata, pending = None, None, None
            if match is None:
                continue
            key, value = match.group(2), match.group(3) or ""
            if key == "resources":
                resources = _flow(value) if value.startswith("{") else {}
                current["resources"] = resources
            elif key == "_metadata":
                metadata = current["_metadata"] = {}
            else:
                current[key] = _scalar(value)
            continue
        if metadata is not None and match is not None and match.group(3):
            metadata[match.group(2)] = _scalar(match.group(3))
            continue
        if resources is None or match is None:
            continue
        key, value = match.group(2), _scalar(match.group(3))
        if pending is not None and key not in _RESOURCE_KEYS:
            resources[pending] = f"{key}:{value}"  # accelerators: {H100: 8} in block style
            pending = None
        elif key in _RESOURCE_KEYS:
            if value.startswith("{"):
                resources.update(_flow(f"{key}: {value}"))
            elif value:
                resources[key] = value
            else:
                pending = key
    return docs
