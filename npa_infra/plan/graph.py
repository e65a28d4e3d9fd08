"""The state machine of a spec as a small graph, for ``plan-spec --format mermaid|dot``.

``build`` turns a validated ``Spec`` (and, with ``--waves``, its waves) into
nodes, edges and nested clusters; ``graphtext`` prints that model as Mermaid
or DOT. The model follows the planner's reading of the spec (dsl.md §5):

- every state is one node; a pseudo ``start`` node points at ``initial`` and
  every terminal state points at a pseudo ``end`` node;
- a leaf's ``next`` and ``transitions`` are edges (a transition is labelled
  with its ``when`` decision and ``if`` config flag, a fallback ``next``
  beside transitions with ``otherwise``); a leaf with transitions is a
  decision node;
- a sequence or parallel group is a cluster holding its own (header) node and
  its children, nested as the spec nests them: the header enters the first
  child (or forks to every member), children follow in order, a loop's last
  child goes back to the header (a loop back-edge) and a loop leaves from its
  header, a parallel group leaves from every member (the fan-in), and a plain
  sequence from its last child;
- with waves, each node that runs lists the indexes of the waves it runs in.

Ids are derived from state names (``s_`` + the name with every character
outside ``[A-Za-z0-9_]`` replaced, de-duplicated), so they are valid in both
formats and never collide with the pseudo nodes (``n_start``, ``n_end``) or a
Mermaid keyword. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from npa_infra.plan.model import Wave
from npa_infra.spec import numbers
from npa_infra.spec.model import Spec, State

__all__ = ["END", "START", "Cluster", "Edge", "EdgeKind", "Graph", "Node", "NodeKind", "build"]

START = "n_start"
END = "n_end"
# A state shown in more waves than this lists the first few and the count.
_MAX_WAVES_SHOWN = 4


class NodeKind(StrEnum):
    START = "start"
    END = "end"
    TASK = "task"
    DECISION = "decision"
    SEQUENCE = "sequence"
    LOOP = "loop"
    PARALLEL = "parallel"


class EdgeKind(StrEnum):
    START = "start"
    NEXT = "next"
    TRANSITION = "transition"
    ENTER = "enter"
    ORDER = "order"
    FORK = "fork"
    LOOP_BACK = "loop_back"
    END = "end"


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: NodeKind
    label: tuple[str, ...]  # lines, first the state name
    state: str = ""  # empty for the pseudo nodes


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    kind: EdgeKind
    label: str = ""


@dataclass(frozen=True, slots=True)
class Cluster:
    id: str
    label: str
    kind: NodeKind  # SEQUENCE, LOOP or PARALLEL
    nodes: tuple[str, ...]  # node ids directly inside, the header first
    clusters: tuple[Cluster, ...] = ()


@dataclass(frozen=True, slots=True)
class Graph:
    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...]

    def node(self, node_id: str) -> Node:
        """The node with ``node_id``; KeyError when there is none."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


def _ids(names: Iterable[str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        ids[name] = candidate
    return ids


def _count(value: object, config: Mapping[str, Any]) -> str:
    try:
        return str(numbers.resolve_int(value, config))
    except ValueError:
        return str(value)


def _kind(state: State) -> NodeKind:
    if state.parallel:
        return NodeKind.PARALLEL
    if state.sequence:
        return NodeKind.LOOP if state.loop is not None else NodeKind.SEQUENCE
    return NodeKind.DECISION if state.transitions else NodeKind.TASK


def _loop_text(state: State, config: Mapping[str, Any]) -> str:
    assert state.loop is not None
    text = f"loop max {_count(state.loop.max, config)}"
    return text + f" until {state.loop.until}" if state.loop.until else text


def _detail(state: State, config: Mapping[str, Any]) -> list[str]:
    if state.parallel:
        text = f"parallel x{len(state.parallel)}"
        if state.max_concurrency is not None:
            text += f", at most {_count(state.max_concurrency, config)} at once"
        return [text]
    if state.sequence:
        return [_loop_text(state, config) if state.loop is not None else "sequence"]
    lines = [state.tool_ref or ("run argv" if state.run and state.run.argv else "run shell")]
    if state.loop is not None:
        lines.append(_loop_text(state, config))
    if state.trigger is not None:
        lines.append("waits for trigger")
    if state.writes_decision:
        lines.append("writes decision")
    return lines


def _waves_text(indexes: Sequence[int]) -> str:
    shown = ", ".join(f"{i:02d}" for i in indexes[:_MAX_WAVES_SHOWN])
    if len(indexes) > _MAX_WAVES_SHOWN:
        shown += f", ... ({len(indexes)} waves)"
    return ("wave " if len(indexes) == 1 else "waves ") + shown


def _wave_index(waves: Sequence[Wave]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for wave in waves:
        names = [s.state for s in wave.steps] + ([wave.group] if wave.group else [])
        for name in names:
            seen = found.setdefault(name, [])
            if not seen or seen[-1] != wave.index:
                seen.append(wave.index)
    return found


def _transition_label(goto_when: str | None, if_config: str | None) -> str:
    parts = [p for p in (goto_when, f"if {if_config}" if if_config else None) if p]
    return " and ".join(parts) or "otherwise"


class _Builder:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.ids = _ids(spec.states)
        self.edges: list[Edge] = []
        self.claimed: set[str] = set()

    def add(self, source: str, target: str, kind: EdgeKind, label: str = "") -> None:
        edge = Edge(source, target, kind, label)
        if edge not in self.edges:
            self.edges.append(edge)

    def exits(self, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """The nodes control leaves ``name`` from (see the module docstring)."""
        state = self.spec.states[name]
        if name in seen or not state.is_group or state.loop is not None:
            return [self.ids[name]]
        children = state.parallel or state.sequence[-1:]
        out: list[str] = []
        for child in children:
            if child in self.spec.states:
                out.extend(e for e in self.exits(child, seen | {name}) if e not in out)
        return out or [self.ids[name]]

    def outgoing(self, name: str, state: State) -> None:
        # a sequence loop leaves from its header once its iterations are done
        done = "done" if state.sequence and state.loop is not None else ""
        for src in self.exits(name):
            for tr in state.transitions:
                if tr.goto in self.ids:
                    label = _transition_label(tr.when, tr.if_config)
                    self.add(src, self.ids[tr.goto], EdgeKind.TRANSITION, label)
            if state.next in self.ids:
                label = "otherwise" if state.transitions else done
                self.add(src, self.ids[state.next], EdgeKind.NEXT, label)
            if state.terminal:
                self.add(src, END, EdgeKind.END, done)

    def inside(self, name: str, state: State) -> None:
        me = self.ids[name]
        children = [c for c in (state.parallel or state.sequence) if c in self.ids]
        if state.parallel:
            for child in children:
                self.add(me, self.ids[child], EdgeKind.FORK)
        elif children:
            self.add(me, self.ids[children[0]], EdgeKind.ENTER)
            for prev, child in itertools.pairwise(children):
                for src in self.exits(prev):
                    self.add(src, self.ids[child], EdgeKind.ORDER)
            if state.loop is not None:
                for src in self.exits(children[-1]):
                    self.add(src, me, EdgeKind.LOOP_BACK, "next iteration")
        if not state.is_group and state.loop is not None:
            self.add(me, me, EdgeKind.LOOP_BACK, "next iteration")

    def cluster(self, name: str) -> Cluster:
        self.claimed.add(name)
        state = self.spec.states[name]
        nodes = [self.ids[name]]
        nested: list[Cluster] = []
        for child in state.parallel or state.sequence:
            if child not in self.ids or child in self.claimed:
                continue
            if self.spec.states[child].is_group:
                nested.append(self.cluster(child))
            else:
                self.claimed.add(child)
                nodes.append(self.ids[child])
        return Cluster("c_" + self.ids[name][2:], name, _kind(state), tuple(nodes), tuple(nested))

    def clusters(self) -> list[Cluster]:
        states = self.spec.states
        children = {c for s in states.values() for c in (*s.sequence, *s.parallel)}
        # outermost groups first; then any group only reachable through a cycle
        order = [n for n, s in states.items() if s.is_group and n not in children]
        order += [n for n, s in states.items() if s.is_group and n in children]
        return [self.cluster(n) for n in order if n not in self.claimed]


def build(
    spec: Spec, *, config: Mapping[str, Any] | None = None, waves: Sequence[Wave] | None = None
) -> Graph:
    """The graph of ``spec``'s state machine.

    ``config`` (the plan's effective config, else the spec's) resolves loop
    bounds and concurrency written as config references; ``waves`` adds the
    wave indexes to each node that runs.
    """
    builder = _Builder(spec)
    scope = spec.config if config is None else config
    in_waves = _wave_index(waves or ())
    nodes = [Node(START, NodeKind.START, ("start",))]
    for name, state in spec.states.items():
        label = [name, *_detail(state, scope)]
        if name in in_waves:
            label.append(_waves_text(in_waves[name]))
        nodes.append(Node(builder.ids[name], _kind(state), tuple(label), name))
    if spec.initial in builder.ids:
        builder.add(START, builder.ids[spec.initial], EdgeKind.START)
    for name, state in spec.states.items():
        builder.inside(name, state)
        builder.outgoing(name, state)
    nodes.append(Node(END, NodeKind.END, ("end",)))
    clusters = builder.clusters()
    return Graph(spec.name, tuple(nodes), tuple(builder.edges), tuple(clusters))
