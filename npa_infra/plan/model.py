"""Plan records: steps, the plan, waves, and the plan error.

Every record here is frozen and JSON-shaped by ``to_json`` exactly as
dsl.md §5.3 lays out, so that the same dictionaries feed ``--json`` output,
the fingerprint and (later) the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from npa_infra.spec.source import PathKey

# The shared, read-only default for mapping fields of immutable records.
EMPTY: Mapping[str, Any] = MappingProxyType({})

__all__ = ["Plan", "PlanError", "PlanStep", "Wave"]


class PlanError(Exception):
    """Planning failed at a located field of the spec."""

    def __init__(
        self, path: PathKey, message: str, hint: str = "", *, state: str | None = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.hint = hint
        self.state = state


class PlanStep(NamedTuple):
    state: str
    iteration: int | None
    loop_label: str
    group: str
    argv: tuple[str, ...]
    shell: str
    tool_ref: str
    resources: str
    resources_profile: dict[str, Any]
    inputs: tuple[dict[str, str], ...]
    outputs: tuple[dict[str, str], ...]
    trigger_uri: str = ""

    @property
    def task_name(self) -> str:
        """Unique within a pipeline or JobGroup: ``state`` or ``state-iteration``."""
        return f"{self.state}-{self.iteration}" if self.iteration is not None else self.state

    def summary(self) -> str:
        if self.tool_ref:
            return f"toolRef={self.tool_ref}"
        if self.argv:
            head = " ".join(self.argv[:4])
            return f"argv={head}..." if len(self.argv) > 4 else f"argv={head}"
        return f"shell={len(self.shell)} chars"

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "iteration": self.iteration,
            "loop_label": self.loop_label,
            "group": self.group,
            "argv": list(self.argv),
            "shell": self.shell,
            "tool_ref": self.tool_ref,
            "resources": self.resources,
            "resources_profile": self.resources_profile,
            "inputs": [dict(i) for i in self.inputs],
            "outputs": [dict(o) for o in self.outputs],
        }


@dataclass(frozen=True, slots=True)
class Wave:
    index: int
    kind: str  # "serial" | "parallel"
    group: str
    name: str
    max_concurrency: int
    batches: int
    steps: tuple[PlanStep, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "group": self.group,
            "name": self.name,
            "max_concurrency": self.max_concurrency,
            "batches": self.batches,
            "steps": [
                {
                    "state": s.state,
                    "iteration": s.iteration,
                    "tool_ref": s.tool_ref,
                    "resources": s.resources,
                    "outputs": [o["uri"] for o in s.outputs],
                }
                for s in self.steps
            ],
        }


class Plan(NamedTuple):
    workflow: str
    api_version: str
    initial: str
    run_id: str
    assume_decision: str
    steps: tuple[PlanStep, ...]
    config: Mapping[str, Any] = EMPTY
    group_concurrency: Mapping[str, int] = EMPTY

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "api_version": self.api_version,
            "initial": self.initial,
            "assume_decision": self.assume_decision,
            "steps": [s.to_json() for s in self.steps],
        }
