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
from npa_infra.spec.source import load_text

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
    return re.search(r"^apiVersion:\s*['\"]?npa\.workflow/", text, re.MULTILINE) is not None


def load_raw_task(
    text: str, label: str, variables: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[SpecIssue]]:
    """Substitute ``${K}`` from ``variables`` and check every document; returns (docs, issues)."""
    issues: list[SpecIssue] = []
    lines = text.splitlines()
    for lineno, line in enumerate(lines, start=1):
        if line.lstrip().startswith("#"):
            continue
        for match in _VAR.finditer(line):
            if match.group(1) not in variables:
                issues.append(
                    SpecIssue(
                        "$",
                        f"placeholder ${{{match.group(1)}}} has no --var value",
                        f"pass --var {match.group(1)}=VALUE",
                        lineno,
                        match.start() + 1,
                    )
                )
    substituted = _VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), text)
    docs: list[dict[str, Any]] = []
    for index, chunk in enumerate(re.split(r"^---\s*$", substituted, flags=re.MULTILINE)):
        if not chunk.strip():
            continue
        loaded = load_text(chunk, label)
        if isinstance(loaded, SpecIssue):
            issues.append(loaded)
            continue
        data = loaded.data
        if not isinstance(data, dict):
            issues.append(SpecIssue(f"$[{index}]", "SkyPilot task document must be a mapping"))
            continue
        for key in data:
            if key not in TASK_KEYS:
                pos = loaded.source_map.locate((str(key),), key=True)
                issues.append(
                    SpecIssue(
                        f"$.{key}",
                        f"unknown SkyPilot task key '{key}'",
                        "see the SkyPilot 0.12 task YAML reference",
                        pos.line,
                        pos.column,
                    )
                )
        res = data.get("resources")
        if isinstance(res, dict):
            for key in res:
                if key not in RESOURCE_KEYS:
                    pos = loaded.source_map.locate(("resources", str(key)), key=True)
                    issues.append(
                        SpecIssue(
                            f"$.resources.{key}",
                            f"unknown resources key '{key}'",
                            "check the SkyPilot resources schema",
                            pos.line,
                            pos.column,
                        )
                    )
        elif res is not None:
            issues.append(SpecIssue("$.resources", "resources must be a mapping"))
        docs.append(data)
    if not docs and not issues:
        issues.append(
            SpecIssue(
                "$", "the file holds no SkyPilot task", "pass a task YAML or an npa.workflow spec"
            )
        )
    return docs, issues
