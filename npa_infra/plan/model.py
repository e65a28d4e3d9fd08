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

__all__ = ["DecisionPoint", "Plan", "PlanError", "PlanStep", "Wave"]


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
    # Checkpoint recovery (runtime-reference.md §3), from the step's effective config:
    # where its application checkpoints, and the loader it declares to resume from there.
    checkpoint_uri: str = ""
    checkpoint_loader: str = ""
    # The enclosing sequence loops with their iteration, outermost first (for the text
    # plan's ``loop rounds#2``); kept out of ``to_json`` so the fingerprint is unchanged.
    loops: tuple[tuple[str, int], ...] = ()

    @property
    def task_name(self) -> str:
        """Unique within a pipeline or JobGroup: ``state`` or ``state-iteration``."""
        return f"{self.state}-{self.iteration}" if self.iteration is not None else self.state

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


@dataclass(frozen=True, slots=True)
class DecisionPoint:
    """A runtime decision the plan needs but was not given (dsl.md §5.4 "Decisions").

    ``key`` names the executed occurrence (``decisions.point_key``); ``state``
    is the state whose decision it is (a leaf with transitions, or a sequence
    loop at the end of an iteration); ``writer_state`` writes the artifact
    (the leaf itself, or the loop's last ``writesDecision`` child); ``uri`` is
    the writer's resolved decision URI (dsl.md §3; empty when it has none);
    ``step_index`` is the index in ``Plan.steps`` of the writer's step, so the
    artifact can be read once the wave holding that step has succeeded.
    """

    key: str
    state: str
    writer_state: str
    uri: str
    step_index: int

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "state": self.state,
            "writer_state": self.writer_state,
            "uri": self.uri,
            "step_index": self.step_index,
        }


class Plan(NamedTuple):
    """The flat plan. In runtime mode it may be a prefix that stops at ``pending``.

    ``decisions_used`` lists the ``(key, normalised decision)`` pairs that the
    walk took from the given decisions, in walk order.
    """

    workflow: str
    api_version: str
    initial: str
    run_id: str
    assume_decision: str
    steps: tuple[PlanStep, ...]
    config: Mapping[str, Any] = EMPTY
    group_concurrency: Mapping[str, int] = EMPTY
    pending: DecisionPoint | None = None
    decisions_used: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "workflow": self.workflow,
            "api_version": self.api_version,
            "initial": self.initial,
            "assume_decision": self.assume_decision,
            "steps": [s.to_json() for s in self.steps],
        }
        # Runtime-only keys appear only when set, so one-shot JSON and the
        # fingerprint stay exactly as dsl.md §5.3 lays them out.
        if self.decisions_used:
            body["decisions_used"] = [
                {"key": key, "decision": value} for key, value in self.decisions_used
            ]
        if self.pending is not None:
            body["pending"] = self.pending.to_json()
        return body
