"""The control-flow graph of a spec: needs cycles, terminals, next/goto cycles, reachability.

Phase 8 of dsl.md §4.1. Only ``next`` and ``goto`` edges form control-flow
cycles (``loop`` is the only legal repetition); reachability follows every
edge, including ``sequence`` and ``parallel`` containment.
"""

from __future__ import annotations

from npa_infra.spec.model import Spec, State
from npa_infra.spec.parse import Collector

__all__ = ["check_graph", "edges", "reachable"]


def check_graph(spec: Spec, c: Collector) -> None:
    """Append every phase-8 (graph) issue of ``spec`` to ``c``."""
    color: dict[str, int] = {}
    for name in spec.states:
        if color.get(name) is None:
            hit = _iterative_cycle(spec, name, color)
            if hit:
                c.error(
                    ("states", hit, "needs"),
                    f"cycle detected in needs among states (at {hit})",
                    "needs must form a DAG",
                    state=hit,
                )
                break
    if not any(s.terminal for s in spec.states.values()):
        c.error(
            ("states",),
            "workflow must declare at least one terminal: true state",
            "mark the final state terminal: true",
        )
    cycle = _control_cycle(spec)
    if cycle:
        c.error(
            ("states", cycle[0]),
            "unbounded control-flow cycle detected: " + " -> ".join(cycle),
            "use loop: {max: N} for repetition; next/goto edges must not form a cycle",
            state=cycle[0],
        )
    # reachability (npa-infra is stricter)
    if spec.initial in spec.states:
        seen = reachable(spec)
        for name in spec.states:
            if name not in seen:
                c.error(
                    ("states", name),
                    f"unreachable from initial '{spec.initial}'",
                    "link it with next, sequence, parallel or goto, or delete it",
                    key=True,  # issue 18: at the state's key, not its first field
                    state=name,
                )


def _iterative_cycle(spec: Spec, start: str, color: dict[str, int]) -> str | None:
    stack: list[tuple[str, int]] = [(start, 0)]
    color[start] = 1
    while stack:
        name, idx = stack[-1]
        needs = [n for n in spec.states[name].needs if n in spec.states]
        if idx < len(needs):
            stack[-1] = (name, idx + 1)
            nxt = needs[idx]
            if color.get(nxt) == 1:
                return nxt
            if color.get(nxt) is None:
                color[nxt] = 1
                stack.append((nxt, 0))
        else:
            color[name] = 2
            stack.pop()
    return None


def edges(st: State) -> list[str]:
    out = [st.next] if st.next else []
    out.extend(tr.goto for tr in st.transitions if tr.goto)
    return out


def _control_cycle(spec: Spec) -> list[str] | None:
    color: dict[str, int] = {}
    for start in spec.states:
        if color.get(start):
            continue
        path: list[str] = [start]
        iters = [iter(edges(spec.states[start]))]
        color[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path[-1]] = 2
                path.pop()
                iters.pop()
                continue
            if nxt not in spec.states:
                continue
            if color.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if not color.get(nxt):
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(edges(spec.states[nxt])))
    return None


def reachable(spec: Spec) -> set[str]:
    seen = {spec.initial}
    todo = [spec.initial]
    while todo:
        st = spec.states[todo.pop()]
        for nxt in (*edges(st), *st.sequence, *st.parallel):
            if nxt in spec.states and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
