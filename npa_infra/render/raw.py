"""Raw SkyPilot task YAML given to ``submit`` instead of an npa.workflow spec.

``${K}`` placeholders are substituted from ``--var``; the result is checked
against the SkyPilot 0.12.2 task schema's top-level and resources keys
(skypilot-0.12.md §10). Errors are located ``SpecIssue``s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.source import LoadedDocument, PathKey, json_path, load_text

__all__ = ["TASK_KEYS", "is_workflow_spec", "load_raw_task"]

TASK_KEYS = frozenset(
    [
        "name",
        "workdir",
        "num_nodes",
        "resources",
        "file_mounts",
        "setup",
        "run",
        "envs",
        "secrets",
        "config",
        "volumes",
        "volume_mounts",
        "service",
        "pool",
        "managed_secrets",
        "event_callback",
        "inputs",
        "outputs",
        "file_mounts_mapping",
        "api_server_access",
        "_metadata",
        "execution",
    ]
)
RESOURCE_KEYS = frozenset(
    [
        "infra",
        "cloud",
        "region",
        "zone",
        "cpus",
        "memory",
        "accelerators",
        "instance_type",
        "use_spot",
        "image_id",
        "disk_size",
        "disk_tier",
        "network_tier",
        "ports",
        "labels",
        "priority",
        "job_recovery",
        "autostop",
        "any_of",
        "ordered",
        "accelerator_args",
        "spot_recovery",
    ]
)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_workflow_spec(text: str) -> bool:
    """A workflow spec has a top-level ``apiVersion``, ``kind`` or ``states`` key; a task has none."""
    return re.search(r"^(apiVersion|kind|states)\s*:", text, re.MULTILINE) is not None


def _substitute(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, variables) for v in value]
    return value


def _leftovers(value: Any, path: PathKey) -> list[tuple[PathKey, str]]:
    """``${K}`` placeholders left outside ``run`` and ``setup`` (bash expands those)."""
    if isinstance(value, str):
        return [(path, m.group(0)) for m in _VAR.finditer(value)]
    if isinstance(value, dict):
        found: list[tuple[PathKey, str]] = []
        for k, v in value.items():
            if not path and k in ("run", "setup"):
                continue
            found.extend(_leftovers(v, (*path, str(k))))
        return found
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _leftovers(v, (*path, i))]
    return []


def _chunks(text: str) -> list[tuple[int, str]]:
    """Split at ``---`` lines, keeping each document's first line number (0-based)."""
    chunks: list[tuple[int, str]] = []
    start = 0
    current: list[str] = []
    for lineno, line in enumerate(text.splitlines(keepends=True)):
        if re.match(r"^---\s*$", line):
            chunks.append((start, "".join(current)))
            start, current = lineno + 1, []
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return chunks


def load_raw_task(
    text: str, label: str, variables: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[SpecIssue]]:
    """Parse every document, substitute ``${K}`` from ``variables`` and check it; (docs, issues).

    Values are substituted after parsing, so a value is used verbatim whatever
    YAML syntax it holds. Placeholders left in ``run``/``setup`` are the task's
    own environment, expanded by bash at run time.
    """
    issues: list[SpecIssue] = []
    docs: list[dict[str, Any]] = []
    all_lines = text.splitlines()
    for index, (offset, chunk) in enumerate(_chunks(text)):
        if not chunk.strip():
            continue
        loaded = load_text(chunk, label)
        if isinstance(loaded, SpecIssue):
            issues.append(_shift(loaded, offset))
            continue
        issues.extend(_shift(duplicate, offset) for duplicate in loaded.issues)
        data = loaded.data
        if data is None:
            continue
        if not isinstance(data, dict):
            issues.append(
                SpecIssue(
                    f"$[{index}]", "SkyPilot task document must be a mapping", "", offset + 1, 1
                )
            )
            continue

        def at(
            path: PathKey, key: bool = False, _m: LoadedDocument = loaded, _off: int = offset
        ) -> tuple[int, int]:
            pos = _m.source_map.locate(path, key=key)
            return (pos.line + _off if pos.line else 0, pos.column)

        own_envs = (
            {str(k) for k in (data.get("envs") or {})}
            if isinstance(data.get("envs"), dict)
            else set()
        )
        for path, token in _leftovers(data, ()):
            name = token[2:-1]
            if name in variables:
                continue
            line, col = at(path)
            if 0 < line <= len(all_lines):
                # point at the placeholder itself, not the start of the scalar
                found = all_lines[line - 1].find(token, max(col - 1, 0))
                col = found + 1 if found >= 0 else col
            hint = f"pass --var {name}=VALUE"
            if name in own_envs:
                hint += " (task envs are expanded only inside run and setup)"
            issues.append(
                SpecIssue(
                    json_path(path), f"placeholder {token} has no --var value", hint, line, col
                )
            )
        data = _substitute(data, variables)
        for key in data:
            if key not in TASK_KEYS:
                line, col = at((str(key),), key=True)
                issues.append(
                    SpecIssue(
                        f"$.{key}",
                        f"unknown SkyPilot task key '{key}'",
                        "see the SkyPilot 0.12 task YAML reference",
                        line,
                        col,
                    )
                )
        res = data.get("resources")
        if isinstance(res, dict):
            for key in res:
                if key not in RESOURCE_KEYS:
                    line, col = at(("resources", str(key)), key=True)
                    issues.append(
                        SpecIssue(
                            f"$.resources.{key}",
                            f"unknown resources key '{key}'",
                            "check the SkyPilot resources schema",
                            line,
                            col,
                        )
                    )
        elif res is not None:
            line, col = at(("resources",))
            issues.append(SpecIssue("$.resources", "resources must be a mapping", "", line, col))
        docs.append(data)
    if not docs and not issues:
        issues.append(
            SpecIssue(
                "$", "the file holds no SkyPilot task", "pass a task YAML or an npa.workflow spec"
            )
        )
    return docs, issues


def _shift(issue: SpecIssue, offset: int) -> SpecIssue:
    if not issue.line:
        return issue
    return SpecIssue(
        issue.path, issue.message, issue.hint, issue.line + offset, issue.column, issue.state
    )
