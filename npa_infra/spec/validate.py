"""Semantic validation of a parsed spec (dsl.md §4, phases 4-8).

Checks run in the reference order and every independent problem is
reported. Token checks and plan-level checks (phase 9 and the planning
guard) live in ``npa_infra.workflow.planning.loading``, which needs the planner.
"""

from __future__ import annotations

from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.spec import graph, numbers, resources
from npa_infra.spec.model import API_VERSIONS, PREDICATES, Spec, State
from npa_infra.spec.parse import Collector, suggest
from npa_infra.spec.resources import DEPLOY_KEYS, PROFILE_KEYS

__all__ = ["DEPLOY_KEYS", "PROFILE_KEYS", "check_spec"]

ALLOWED_ASSUMPTIONS = ("promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop")


def _is_int_form(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_spec(spec: Spec, catalog: Catalog, c: Collector) -> None:
    """Append every phase 4-8 issue of ``spec`` to ``c`` (plus the phase-2 decision check)."""
    _assumed_decision(spec, c)
    _spec_level(spec, c)
    for state in spec.states.values():
        _references(spec, state, c)
        _parallel(spec, state, c)
        _trigger_and_work(spec, state, catalog, c)
        _loop_bound(spec, state, c)
    resources.check_profiles(spec, c)
    for state in spec.states.values():
        _executable(spec, state, catalog, c)
    graph.check_graph(spec, c)
    _nesting(spec, c)


MAX_NESTING = 64


def _assumed_decision(spec: Spec, c: Collector) -> None:
    # dsl.md §4.2: a bad config.plan_assume_decision is a phase-2 error; token-valued
    # ones are checked once config resolves (workflow.planning.loading).
    value = spec.config.get("plan_assume_decision")
    literal = isinstance(value, str) and value.strip() and "{{" not in value
    if literal and str(value).strip() not in ALLOWED_ASSUMPTIONS:
        c.error(
            ("config", "plan_assume_decision"),
            f"unknown decision {value!r}",
            f"use one of: {', '.join(ALLOWED_ASSUMPTIONS)}",
        )


def _nesting(spec: Spec, c: Collector) -> None:
    """Containment (sequence/parallel) must be acyclic and at most MAX_NESTING deep."""
    depth: dict[str, int] = {}
    for root in spec.states:
        if root in depth:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        trail: list[str] = []
        on_trail: set[str] = set()
        while stack:
            name, idx = stack[-1]
            st = spec.states[name]
            if idx == 0:
                trail.append(name)
                on_trail.add(name)
            children = [
                ch for ch in (*st.sequence, *st.parallel) if ch in spec.states and ch != name
            ]
            if idx < len(children):
                stack[-1] = (name, idx + 1)
                child = children[idx]
                if child in on_trail:
                    cycle = [*trail[trail.index(child) :], child]
                    c.error(
                        ("states", child),
                        "sequence nesting forms a cycle: " + " -> ".join(cycle),
                        "a state cannot contain, directly or indirectly, itself",
                        state=child,
                    )
                    return
                if child not in depth:
                    stack.append((child, 0))
                continue
            stack.pop()
            trail.pop()
            on_trail.discard(name)
            depth[name] = 1 + max((depth.get(ch, 0) for ch in children), default=0)
            if depth[name] > MAX_NESTING:
                c.error(
                    ("states", name),
                    f"sequence nesting is deeper than {MAX_NESTING} levels",
                    "flatten the workflow: chain states with next instead of nesting",
                    state=name,
                )
                return


def _spec_level(spec: Spec, c: Collector) -> None:
    if spec.api_version not in API_VERSIONS:
        c.error(
            ("apiVersion",),
            f"unsupported apiVersion '{spec.api_version}' (expected one of {list(API_VERSIONS)})",
            f"set apiVersion: {API_VERSIONS[0]}",
        )
    if spec.initial not in spec.states:
        c.error(
            ("initial",),
            f"initial state '{spec.initial}' is not defined",
            suggest(spec.initial, spec.states) or "name one of the states",
        )


def _ref(
    spec: Spec, c: Collector, path: tuple[Any, ...], target: str, what: str, state: str
) -> None:
    if target and target not in spec.states:  # empty: a malformed entry, reported by parse
        c.error(
            path,
            f"{what} unknown state '{target}'",
            suggest(target, spec.states) or "name a declared state",
            state=state,
        )


def _references(spec: Spec, st: State, c: Collector) -> None:
    base = ("states", st.name)
    if st.loop is not None and st.loop.until is not None and st.loop.until not in PREDICATES:
        c.error(
            (*base, "loop", "until"),
            f"unknown loop.until predicate '{st.loop.until}'",
            f"use one of: {', '.join(PREDICATES)}",
            state=st.name,
        )
    for i, tr in enumerate(st.transitions):
        if tr.when is not None and tr.when not in PREDICATES:
            c.error(
                (*base, "transitions", i, "when"),
                f"unknown transition.when predicate '{tr.when}'",
                f"use one of: {', '.join(PREDICATES)}",
                state=st.name,
            )
        _ref(spec, c, (*base, "transitions", i, "goto"), tr.goto, "transition goto", st.name)
        if tr.if_config is not None and not tr.if_config.strip().removeprefix("config.").strip():
            c.error(
                (*base, "transitions", i, "if"),
                "transition.if must name a config key",
                "write if: config.KEY",
                state=st.name,
            )
    for i, need in enumerate(st.needs):
        _ref(spec, c, (*base, "needs", i), need, "needs", st.name)
    for i, child in enumerate(st.sequence):
        _ref(spec, c, (*base, "sequence", i), child, "sequence entry", st.name)
        if child == st.name:
            c.error(
                (*base, "sequence", i),
                "a sequence cannot contain itself",
                "list other states in the sequence",
                state=st.name,
            )
    if st.next and st.next not in spec.states:
        # npa-infra is stricter: the reference crashes later with KeyError
        c.error(
            (*base, "next"),
            f"unknown state '{st.next}'",
            suggest(st.next, spec.states) or "name a declared state",
            state=st.name,
        )


def _parallel(spec: Spec, st: State, c: Collector) -> None:
    base = ("states", st.name)
    if not st.parallel:
        for key, value in (
            ("parallelCount", st.parallel_count),
            ("maxConcurrency", st.max_concurrency),
        ):
            if value is not None:
                c.error(
                    (*base, key),
                    f"{key} is allowed only together with parallel",
                    "remove it, or make this state a parallel group",
                    state=st.name,
                )
        return
    if st.sequence:
        c.error(
            (*base, "parallel"),
            "a state cannot have both sequence and parallel",
            "split it into a sequence whose child is the parallel group",
            state=st.name,
        )
    if st.loop is not None:
        c.error(
            (*base, "loop"),
            "loop is not allowed on a parallel group",
            "wrap the group in a sequence that carries the loop",
            state=st.name,
        )
    if st.run is not None or st.tool_ref:
        c.error(
            (*base, "parallel"),
            "a parallel group cannot have run or toolRef",
            "move the work into member states",
            state=st.name,
        )
    seen: set[str] = set()
    for i, member in enumerate(st.parallel):
        mpath = (*base, "parallel", i)
        if not member:
            continue
        if member in seen:
            c.error(
                mpath,
                f"duplicate parallel member '{member}'",
                "list each member once",
                state=st.name,
            )
            continue
        seen.add(member)
        if member == st.name:
            c.error(
                mpath,
                "a parallel group cannot contain itself",
                "list the member leaf states, not the group",
                state=st.name,
            )
            continue
        m = spec.states.get(member)
        if m is None:
            c.error(
                mpath,
                f"parallel member unknown state '{member}'",
                suggest(member, spec.states),
                state=st.name,
            )
            continue
        if m.sequence or m.parallel or m.loop is not None:
            c.error(
                mpath,
                f"parallel member '{member}' must be a leaf (no sequence, parallel or loop)",
                "make the member a plain run/toolRef state; loop the group from an enclosing sequence",
                state=st.name,
            )
        if m.next or m.transitions:
            # issue 18: at the member's own next:/transitions:, the key a person deletes
            edge = "next" if m.next else "transitions"
            c.error(
                ("states", member, edge),
                f"parallel member '{member}' of group '{st.name}' must not have next or transitions; "
                "the group owns the barrier edge",
                "move the edge to the group's next:",
                key=True,
                state=member,
            )
        if m.terminal:
            c.error(
                mpath,
                f"parallel member '{member}' must not be terminal",
                "remove terminal: true from the member; the group's next continues the workflow",
                state=st.name,
            )
    if st.parallel_count is not None:
        try:
            count = _int(spec, st.parallel_count)
        except ValueError as exc:
            c.error((*base, "parallelCount"), str(exc), state=st.name)
        else:
            if count != len(st.parallel):
                c.error(
                    (*base, "parallelCount"),
                    f"parallelCount resolves to {count}, but the group declares {len(st.parallel)} members; "
                    "v0.0.1 groups are explicit",
                    "declare one member state per shard, or change the count",
                    state=st.name,
                )
    if st.max_concurrency is not None:
        try:
            mc = _int(spec, st.max_concurrency)
        except ValueError as exc:
            c.error((*base, "maxConcurrency"), str(exc), state=st.name)
        else:
            if not 1 <= mc <= 64:
                c.error(
                    (*base, "maxConcurrency"),
                    f"maxConcurrency must be in 1..64, got {mc}",
                    "use a value from 1 to 64",
                    state=st.name,
                )


def _int(spec: Spec, value: object) -> int:
    return numbers.resolve_int(value, spec.config)


def _trigger_and_work(spec: Spec, st: State, catalog: Catalog, c: Collector) -> None:
    base = ("states", st.name)
    if st.trigger is not None and not st.has_work:
        c.error(
            (*base, "trigger"),
            "a state with a trigger also needs run or toolRef",
            "add the work the trigger starts (run or toolRef)",
            state=st.name,
        )
    if st.tool_ref and catalog.get(st.tool_ref) is None:
        import difflib

        close = difflib.get_close_matches(st.tool_ref, catalog.names(), n=3)
        known = ", ".join(close) if close else ", ".join(catalog.names()[:5]) + ", …"
        c.error(
            (*base, "toolRef"),
            f"unknown toolRef '{st.tool_ref}' (known: {known})",
            "pick a tool from the catalog, or pass --catalog FILE / NPA_TOOL_CATALOG",
            state=st.name,
        )
    if not (st.has_work or st.sequence or st.parallel or st.transitions or st.next or st.terminal):
        c.error(
            base,
            "state does nothing: it needs run, toolRef, sequence, parallel, transitions, next or terminal",
            "give the state work or an edge",
            state=st.name,
        )
    if st.loop is not None and not (st.has_work or st.sequence or st.parallel):
        # issue 18: a loop with no body plans empty steps that fail only at submit
        c.error(
            (*base, "loop"),
            "loop has no body: the state has no sequence, run or toolRef",
            "give the loop a sequence: [states…] to repeat, or run/toolRef to repeat one step",
            key=True,
            state=st.name,
        )
    if st.terminal and not (st.has_work or st.sequence or st.parallel):
        c.error(
            base,
            "terminal state has no work",
            "add run or toolRef to the terminal state",
            state=st.name,
        )


def _loop_bound(spec: Spec, st: State, c: Collector) -> None:
    if st.loop is None:
        return
    try:
        value = _int(spec, st.loop.max)
    except ValueError as exc:
        c.error(
            ("states", st.name, "loop", "max"),
            str(exc),
            "use an integer or config.KEY",
            state=st.name,
        )
        return
    if value < 1:
        c.error(
            ("states", st.name, "loop", "max"),
            f"loop.max must be >= 1, got {value}",
            "use loop.max: 1 or more",
            state=st.name,
        )


def _executable(spec: Spec, st: State, catalog: Catalog, c: Collector) -> None:
    if not st.has_work:
        if st.writes_decision:
            c.error(
                ("states", st.name, "writesDecision"),
                "writesDecision is set on a state without work",
                "move writesDecision to the leaf that writes the decision artifact",
                state=st.name,
            )
        return
    base = ("states", st.name)
    if st.resources not in spec.resources and st.resources != "default":
        c.error(
            (*base, "resources"),
            f"unknown resource profile '{st.resources}'",
            suggest(st.resources, spec.resources) or "declare it under resources:",
            state=st.name,
        )
        return
    profile = spec.resources.get(st.resources, {})
    entry = catalog.get(st.tool_ref) if st.tool_ref else None
    sharded = st.multi_node_mode == "sharded" or (
        entry is not None and entry.multi_node_mode == "sharded"
    )
    nodes = resources.num_nodes(spec, st, profile, c)
    if nodes > 1 and not sharded:
        c.error(
            (*base, "resources"),
            f"profile '{st.resources}' asks for num_nodes {nodes} but state is not declared sharded; "
            "identical workers could duplicate or race output writers",
            "set multiNodeMode: sharded on the state, or use num_nodes: 1",
            state=st.name,
        )
    if entry is not None and nodes > 1 and entry.shard_activation_config:
        key = entry.shard_activation_config
        if not str(spec.config.get(key, entry.config_defaults.get(key, ""))).strip():
            c.error(
                (*base, "toolRef"),
                f"tool '{entry.name}' runs {nodes} shards but config.{key} is empty, so every shard would do the same work",
                f"set config.{key}, or use num_nodes: 1",
                state=st.name,
            )
    if st.writes_decision:
        has_uri = any("decision" in a.schema.lower() for a in st.outputs)
        cfg_uri = st.params.get("decision_uri") or spec.config.get("decision_uri")
        if not has_uri and not (isinstance(cfg_uri, str) and cfg_uri.strip()):
            c.error(
                (*base, "writesDecision"),
                "no decision URI (declare an output whose schema contains 'decision' or set config.decision_uri)",
                "add an output with schema: <name>.decision.v1",
                state=st.name,
            )
