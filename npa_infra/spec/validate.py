"""Semantic validation of a parsed spec (dsl.md §4, phases 4-8).

Checks run in the reference order and every independent problem is
reported. Token checks and plan-level checks (phase 9 and the planning
guard) live in ``npa_infra.workflow.planning.loading``, which needs the planner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.spec import numbers, tokens
from npa_infra.spec.model import API_VERSIONS, PREDICATES, Spec, State
from npa_infra.spec.parse import Collector

__all__ = ["check_spec"]

ALLOWED_ASSUMPTIONS = ("promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop")


def _suggest(name: str, options: Iterable[str]) -> str:
    import difflib  # lazy: only invalid specs need suggestions

    close = difflib.get_close_matches(name, list(options), n=1)
    return f"did you mean '{close[0]}'?" if close else ""


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
    _profiles(spec, c)
    for state in spec.states.values():
        _executable(spec, state, catalog, c)
    _graph(spec, c)
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
            _suggest(spec.initial, spec.states) or "name one of the states",
        )


def _ref(
    spec: Spec, c: Collector, path: tuple[Any, ...], target: str, what: str, state: str
) -> None:
    if target not in spec.states:
        c.error(
            path,
            f"{what} unknown state '{target}'",
            _suggest(target, spec.states) or "name a declared state",
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
            _suggest(st.next, spec.states) or "name a declared state",
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
                _suggest(member, spec.states),
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
            c.error(
                mpath,
                f"parallel member '{member}' must not have next or transitions; the group owns the barrier edge",
                "move the edge to the group's next:",
                state=st.name,
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


PROFILE_KEYS = frozenset(
    [
        "cloud",
        "accelerators",
        "cpus",
        "memory",
        "disk_size",
        "use_spot",
        "region",
        "image",
        "num_nodes",
        "kubernetes",
        "deployIfAbsent",
    ]
)
DEPLOY_KEYS = frozenset(
    [
        "clusterName",
        "context",
        "project",
        "skipS3",
        "cpuNodes",
        "cpuPlatform",
        "cpuPreset",
        "gpuNodes",
        "gpuPlatform",
        "gpuPreset",
    ]
)


def _profile_shape(c: Collector, path: tuple[Any, ...], profile: dict[str, Any]) -> None:
    for key in profile:
        if key not in PROFILE_KEYS:
            c.warn(
                (*path, str(key)),
                f"unknown resource profile key '{key}' is ignored",
                f"known keys: {', '.join(sorted(PROFILE_KEYS))}",
            )
    k8s = profile.get("kubernetes")
    if isinstance(k8s, dict):
        for key in k8s:
            if key not in ("pod_config", "provision_timeout"):
                c.warn(
                    (*path, "kubernetes", str(key)),
                    f"kubernetes.{key} is not rendered",
                    "only pod_config and provision_timeout reach the SkyPilot task",
                )
    deploy = profile.get("deployIfAbsent")
    if deploy is None or deploy is True:
        return
    if not isinstance(deploy, dict):
        c.error(
            (*path, "deployIfAbsent"),
            f"deployIfAbsent must be true or a mapping, got {deploy!r}",
            "use deployIfAbsent: true, or a mapping such as {clusterName: x, context: y}",
        )
        return
    unknown = [str(k) for k in deploy if k not in DEPLOY_KEYS]
    if unknown:
        c.error(
            (*path, "deployIfAbsent"),
            "unknown deployIfAbsent field(s): " + ", ".join(f"'{k}'" for k in unknown),
            f"allowed: {', '.join(sorted(DEPLOY_KEYS))}",
            at=(*path, "deployIfAbsent", unknown[0]),
        )


def _profiles(spec: Spec, c: Collector) -> None:
    for name, profile in spec.resources.items():
        path = ("resources", name)
        _profile_shape(c, path, profile)
        acc = profile.get("accelerators")
        counts: list[tuple[Any, ...]] = []
        if isinstance(acc, str) and ":" in acc:
            counts.append(((*path, "accelerators"), acc.rsplit(":", 1)[1]))
        elif isinstance(acc, dict):
            counts.extend(((*path, "accelerators", str(k)), v) for k, v in acc.items())
        for apath, raw in counts:
            if isinstance(raw, str) and "{{" in raw:
                continue
            try:
                n = int(raw)
            except (TypeError, ValueError, OverflowError):
                c.error(
                    apath,
                    f"accelerator count must be an integer, got {raw!r}",
                    "write T:N, e.g. H100:1",
                )
                continue
            if n < 1:
                c.error(
                    apath,
                    f"accelerator count must be >= 1, got {n}",
                    "request at least one GPU, e.g. H100:1",
                )
        if "num_nodes" in profile:
            nn = profile["num_nodes"]
            if isinstance(nn, bool):
                c.error(
                    (*path, "num_nodes"),
                    "num_nodes must be an integer, not a bool",
                    "write num_nodes: 1 (or more, up to 32)",
                )
            elif isinstance(nn, str) and "{{" in nn:
                pass  # resolved per state, with its params (_executable)
            else:
                _check_nodes(c, (*path, "num_nodes"), nn, None)
        k8s = profile.get("kubernetes")
        if k8s is not None and not isinstance(k8s, dict):
            c.error(
                (*path, "kubernetes"),
                "kubernetes must be a mapping with pod_config / provision_timeout",
                "use kubernetes: {pod_config: {...}, provision_timeout: 600}",
            )
        elif (
            isinstance(k8s, dict)
            and "pod_config" in k8s
            and not isinstance(k8s["pod_config"], dict)
        ):
            c.error(
                (*path, "kubernetes", "pod_config"),
                "pod_config must be a mapping (a partial Pod manifest)",
                "write a partial Pod manifest, e.g. {spec: {priorityClassName: x}}",
            )


def _check_nodes(
    c: Collector, path: tuple[Any, ...], value: object, state: str | None
) -> int | None:
    """num_nodes is an integer (or digit string) in 1..32; report and return None otherwise."""
    try:
        n = int(str(value).strip()) if not isinstance(value, (bool, float)) else None
    except ValueError:
        n = None
    if n is None:
        c.error(
            path,
            f"num_nodes must be an integer, got {value!r}",
            "write num_nodes: 1 (or more, up to 32)",
            state=state,
        )
        return None
    if not 1 <= n <= 32:
        c.error(path, f"num_nodes must be in 1..32, got {n}", "use 1 to 32 nodes", state=state)
        return None
    return n


def _num_nodes(spec: Spec, st: State, profile: dict[str, Any], c: Collector) -> int:
    """The profile's num_nodes for this state: tokens resolve with the state's params (dsl.md §1.4)."""
    nn = profile.get("num_nodes", 1)
    if not (isinstance(nn, str) and "{{" in nn):
        return nn if _is_int_form(nn) and 1 <= nn <= 32 else 1
    config = {**spec.config, **st.params}
    try:
        text = tokens.resolve(
            nn, tokens.TokenContext(config=config, run={}, allow_state=False, allow_loop=False)
        )
    except tokens.TokenError:
        return 1  # the token phase reports it at its field
    value = _check_nodes(c, ("resources", st.resources, "num_nodes"), text, st.name)
    return value or 1


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
            _suggest(st.resources, spec.resources) or "declare it under resources:",
            state=st.name,
        )
        return
    profile = spec.resources.get(st.resources, {})
    entry = catalog.get(st.tool_ref) if st.tool_ref else None
    sharded = st.multi_node_mode == "sharded" or (
        entry is not None and entry.multi_node_mode == "sharded"
    )
    nodes = _num_nodes(spec, st, profile, c)
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


def _graph(spec: Spec, c: Collector) -> None:
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
        seen = _reachable(spec)
        for name in spec.states:
            if name not in seen:
                c.error(
                    ("states", name),
                    f"unreachable from initial '{spec.initial}'",
                    "link it with next, sequence, parallel or goto, or delete it",
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


def _edges(st: State) -> list[str]:
    out = [st.next] if st.next else []
    out.extend(tr.goto for tr in st.transitions)
    return out


def _control_cycle(spec: Spec) -> list[str] | None:
    color: dict[str, int] = {}
    for start in spec.states:
        if color.get(start):
            continue
        path: list[str] = [start]
        iters = [iter(_edges(spec.states[start]))]
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
                iters.append(iter(_edges(spec.states[nxt])))
    return None


def _reachable(spec: Spec) -> set[str]:
    seen = {spec.initial}
    todo = [spec.initial]
    while todo:
        st = spec.states[todo.pop()]
        for nxt in (*_edges(st), *st.sequence, *st.parallel):
            if nxt in spec.states and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
