"""The typed model of an ``npa.workflow/v0.0.1`` spec (dsl.md §1).

Frozen, slotted dataclasses: the model sits on the hot path of every
``validate-spec`` and ``plan-spec``, and building it must stay cheap. Values
that may hold tokens (``parallelCount``, ``loop.max``, trigger numbers,
profiles) keep their raw form; planning resolves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from npa_infra.spec.source import SourceMap

# The shared, read-only default for mapping fields of immutable records.
EMPTY: Mapping[str, Any] = MappingProxyType({})

__all__ = [
    "API_VERSIONS",
    "Artifact",
    "ExecutionMode",
    "Loop",
    "Metadata",
    "RunBlock",
    "Spec",
    "State",
    "Transition",
    "Trigger",
]

API_VERSIONS = ("npa.workflow/v0.0.1", "npa.workflow/v0.0.1-beta")
PREDICATES = ("promote_checkpoint", "loop_back")
Scalar = str | int | float | bool | None


class ExecutionMode(StrEnum):
    PLANNED = "planned"
    RUNTIME = "runtime"


class Artifact(NamedTuple):
    uri: str
    schema: str = ""


class Trigger(NamedTuple):
    uri: str
    poll_seconds: Scalar = 30
    max_polls: Scalar = 0
    min_objects: Scalar = 1


class Loop(NamedTuple):
    max: Scalar = 1
    until: str | None = None


class Transition(NamedTuple):
    goto: str
    when: str | None = None
    if_config: str | None = None


class RunBlock(NamedTuple):
    shell: str = ""
    argv: tuple[str, ...] = ()


class State(NamedTuple):
    name: str
    description: str = ""
    run: RunBlock | None = None
    tool_ref: str = ""
    sequence: tuple[str, ...] = ()
    parallel: tuple[str, ...] = ()
    parallel_count: Scalar = None
    max_concurrency: Scalar = None
    params: Mapping[str, Scalar] = EMPTY
    trigger: Trigger | None = None
    loop: Loop | None = None
    transitions: tuple[Transition, ...] = ()
    next: str = ""
    needs: tuple[str, ...] = ()
    inputs: tuple[Artifact, ...] = ()
    outputs: tuple[Artifact, ...] = ()
    resources: str = "default"
    terminal: bool = False
    writes_decision: bool = False
    multi_node_mode: str = ""

    @property
    def has_work(self) -> bool:
        """A leaf that emits a command (run or toolRef)."""
        return bool(self.tool_ref) or self.run is not None

    @property
    def is_group(self) -> bool:
        return bool(self.sequence) or bool(self.parallel)


class Metadata(NamedTuple):
    name: str = "unnamed"
    description: str = ""
    namespace: str = ""
    labels: Mapping[str, str] = EMPTY
    execution_mode: ExecutionMode | None = None


class Spec(NamedTuple):
    api_version: str
    kind: str
    metadata: Metadata
    config: dict[str, Any]
    run_defaults: dict[str, Any]
    resources: dict[str, dict[str, Any]]
    initial: str
    states: dict[str, State]
    source_map: SourceMap = SourceMap()
    label: str = ""

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def has_transitions(self) -> bool:
        return any(s.transitions for s in self.states.values())
