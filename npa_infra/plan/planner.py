"""Expand a validated spec into a flat plan of steps (dsl.md §5.1-§5.2).

The traversal follows the reference semantics exactly: leaves emit one step
and follow the first matching transition or ``next``; sequences expand their
children (a child follows its own ``next`` only when it has no transitions);
sequence loops reset the decision each iteration and stop early on ``until``;
parallel groups emit their members in order. Unlike the reference, ending at a
non-terminal state with nowhere to go is a located error, and so is a token
that names a state which has not run yet. Pure: no I/O, clock or randomness.

Runtime mode (dsl.md §5.4) replaces the assumed decision with real ones. The
caller passes the decisions known so far, by ``decisions.point_key``; at the
first decision point whose key is unknown the walk stops and the plan is the
prefix up to it, with ``Plan.pending`` naming the point, the writer and the
artifact URI. The walk is deterministic, so adding that decision and planning
again extends the same prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.plan import context, decisions
from npa_infra.plan.model import DecisionPoint, Plan, PlanError, PlanStep
from npa_infra.spec import numbers, tokens
from npa_infra.spec.model import Spec, State
from npa_infra.spec.source import PathKey

__all__ = ["build_plan", "config_truthy", "dry_run_walk", "resolve_assumption", "step_limit"]


def step_limit(spec: Spec) -> int:
    return max(256, 64 * len(spec.states))


def resolve_assumption(spec: Spec, config: Mapping[str, Any], explicit: str = "") -> str:
    """``--assume-decision``, then ``config.plan_assume_decision``, then loop_back when transitions exist."""
    raw = explicit.strip() or tokens.stringify(config.get("plan_assume_decision") or "").strip()
    if not raw and spec.has_transitions:
        raw = "loop_back"
    return decisions.normalize(raw)


class _Pending(Exception):
    """Unwinds the walk at the first decision point whose decision is not given."""

    def __init__(self, point: DecisionPoint) -> None:
        super().__init__(point.key)
        self.point = point


def _checkpoint(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The step's checkpoint declaration (runs/checkpoints.py): ``checkpoint_uri`` counts
    only beside an explicit ``checkpoint_loader``, since specs already use that key for
    model locations that nothing resumes from."""
    loader = str(cfg.get("checkpoint_loader") or "").strip()
    if not loader:
        return {}
    return {
        "checkpoint_uri": str(cfg.get("checkpoint_uri") or "").strip(),
        "checkpoint_loader": loader,
    }


@dataclass(slots=True)
class Walk:
    spec: Spec
    catalog: Catalog
    config: dict[str, Any]
    run: dict[str, Any]
    assume: str
    limit: int
    decision: str = ""
    steps: list[PlanStep] = field(default_factory=list)
    state_outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)
    group_concurrency: dict[str, int] = field(default_factory=dict)
    # runtime mode (dsl.md §5.4); ``known`` is None in one-shot mode
    known: Mapping[str, str] | None = None
    used: list[tuple[str, str]] = field(default_factory=list)
    reads: int = 0
    active_loops: list[tuple[str, int]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    sites: dict[str, tuple[int, str]] = field(default_factory=dict)

    # -- token helpers -------------------------------------------------
    def state_config(self, state: State) -> dict[str, Any]:
        if not state.params:
            return self.config
        overlay = dict(self.config)
        ctx = self._ctx(self.config)
        for key, value in state.params.items():
            if isinstance(value, str):
                overlay[key] = self._resolve(
                    value, ctx, ("states", state.name, "params", key), state
                )
            else:
                overlay[key] = value
        return overlay

    def _ctx(self, config: Mapping[str, Any]) -> tokens.TokenContext:
        return tokens.TokenContext(
            config=config,
            run=self.run,
            state_outputs=self.state_outputs,
            loop_iterations=self.loops,
        )

    def _resolve(self, text: str, ctx: tokens.TokenContext, path: PathKey, state: State) -> str:
        try:
            return tokens.resolve(text, ctx)
        except tokens.TokenError as exc:
            raise PlanError(path, exc.message, _token_hint(exc), state=state.name) from None

    def _deep(self, value: Any, ctx: tokens.TokenContext, path: PathKey, state: State) -> Any:
        if isinstance(value, str):
            return self._resolve(value, ctx, path, state)
        if isinstance(value, dict):
            return {k: self._deep(v, ctx, (*path, str(k)), state) for k, v in value.items()}
        if isinstance(value, list):
            return [self._deep(v, ctx, (*path, i), state) for i, v in enumerate(value)]
        return value

    # -- step construction ---------------------------------------------
    def step(self, state: State, *, iteration: int | None, loop_label: str, group: str) -> None:
        if len(self.steps) >= self.limit:
            raise PlanError(
                ("states", state.name),
                "plan exceeded step limit; check for unbounded control-flow cycles",
                f"the limit is {self.limit} steps; lower loop.max or break the cycle",
                state=state.name,
            )
        cfg = self.state_config(state)
        ctx = self._ctx(cfg)
        base: PathKey = ("states", state.name)
        argv: tuple[str, ...] = ()
        shell = ""
        if state.tool_ref:
            entry = self.catalog.get(state.tool_ref)
            template = entry.argv_template if entry else ()
            resolved = [self._resolve(t, ctx, (*base, "toolRef"), state) for t in template]
            argv = tuple(_omit_empty_flags(resolved, entry.omit_flags_when_empty if entry else ()))
        elif state.run is not None:
            if state.run.argv:
                argv = tuple(
                    self._resolve(a, ctx, (*base, "run", "argv", i), state)
                    for i, a in enumerate(state.run.argv)
                )
            else:
                shell = self._resolve(state.run.shell, ctx, (*base, "run", "shell"), state)
        outputs = tuple(
            {
                "uri": self._resolve(a.uri, ctx, (*base, "outputs", i, "uri"), state),
                "schema": a.schema,
            }
            for i, a in enumerate(state.outputs)
            if a.uri
        )
        inputs = tuple(
            {
                "uri": self._resolve(a.uri, ctx, (*base, "inputs", i, "uri"), state),
                "schema": a.schema,
            }
            for i, a in enumerate(state.inputs)
            if a.uri
        )
        trigger_uri = ""
        if state.trigger is not None:
            trigger_uri = self._resolve(state.trigger.uri, ctx, (*base, "trigger", "uri"), state)
        raw_profile = (
            self.spec.resources.get(state.resources) or self.spec.resources.get("default") or {}
        )
        profile = self._deep(raw_profile, ctx, ("resources", state.resources), state)
        self.steps.append(
            PlanStep(
                state=state.name,
                iteration=iteration,
                loop_label=loop_label,
                group=group,
                argv=argv,
                shell=shell,
                tool_ref=state.tool_ref,
                resources=state.resources,
                resources_profile=profile,
                inputs=inputs,
                outputs=outputs,
                trigger_uri=trigger_uri,
                **_checkpoint(cfg),
                loops=tuple(self.active_loops),
            )
        )
        if self.known is not None and (state.transitions or state.writes_decision):
            # resolved now, with this step's params and loop counters (dsl.md §3)
            self.sites[state.name] = (len(self.steps) - 1, decisions.decision_uri(outputs, cfg))
        if outputs:
            record = {f"output_{i}": o["uri"] for i, o in enumerate(outputs, start=1)}
            record["uri"] = outputs[0]["uri"]
            self.state_outputs[state.name] = record

    # -- traversal -----------------------------------------------------
    def loop_max(self, state: State) -> int:
        assert state.loop is not None
        try:
            return numbers.resolve_int(state.loop.max, self.config)
        except ValueError as exc:
            raise PlanError(
                ("states", state.name, "loop", "max"), str(exc), state=state.name
            ) from None

    def transition(self, state: State) -> str:
        for tr in state.transitions:
            if tr.if_config and not config_truthy(tr.if_config, self.config):
                continue
            if tr.when is None or decisions.evaluate(tr.when, self.decision):
                return tr.goto
        return ""

    def expand(
        self, name: str, *, loop_label: str = "", follow: bool = True, depth: int = 0
    ) -> None:
        """Expand ``name`` and everything its ``next``/transition chain reaches."""
        if depth > len(self.spec.states) + 1:
            raise PlanError(("states", name), "sequence nesting forms a cycle", state=name)
        current = name
        while current:
            state = self.spec.states[current]
            current = self._expand_one(state, loop_label, follow, depth)
            # only the entry state of a sequence child carries the child's settings
            loop_label, follow = "", True

    def _expand_one(self, state: State, loop_label: str, follow: bool, depth: int) -> str:
        # Only chains entered from the top level must end at a terminal state; a
        # chain that starts inside a sequence returns to that sequence (reference).
        top = depth == 0
        if state.parallel:
            self.group_concurrency[state.name] = self._group_concurrency(state)
            for member in state.parallel:
                self.step(
                    self.spec.states[member],
                    iteration=None,
                    loop_label=state.name,
                    group=state.name,
                )
            return self._group_next(state, top)
        if state.sequence:
            if state.loop is not None:
                for i in range(1, self.loop_max(state) + 1):
                    self.loops[state.name] = i
                    self.decision = ""
                    self.active_loops.append((state.name, i))
                    reads = self.reads
                    for child in state.sequence:
                        self.expand(child, loop_label=state.name, follow=False, depth=depth + 1)
                    self._end_iteration(state, reads)
                    self.active_loops.pop()
                    if state.loop.until and decisions.evaluate(state.loop.until, self.decision):
                        break
                return self._group_next(state, top)
            for child in state.sequence:
                self.expand(child, loop_label=state.name, follow=False, depth=depth + 1)
            return self._group_next(state, top)
        if state.loop is not None:
            for i in range(1, self.loop_max(state) + 1):
                self.loops[state.name] = i
                self.step(state, iteration=i, loop_label=loop_label, group="")
                # Leaf loops never read storage (dsl.md §5.4): at runtime the decision
                # in force stays, else the assumed one; one-shot it is always assumed.
                self.decision = (
                    self.assume if self.known is None else (self.decision or self.assume)
                )
                if state.loop.until and decisions.evaluate(state.loop.until, self.decision):
                    break
            if state.terminal:
                return ""
            return self.transition(state) or state.next or self._dead_end(state, top)
        self.step(state, iteration=None, loop_label=loop_label, group="")
        if state.terminal:
            return ""
        if state.transitions:
            if self.known is None:
                self.decision = self.assume
            else:
                # dsl.md §5.4: after any leaf that has transitions the driver reads
                self._take(state, state.name)
        if follow:
            return self.transition(state) or state.next or self._dead_end(state, top)
        return "" if state.transitions else state.next

    def _end_iteration(self, state: State, reads: int) -> None:
        """The decision in force after one iteration of sequence loop ``state``."""
        if self.known is None:
            self.decision = self.assume
            return
        # dsl.md §5.4: read the last writesDecision child, unless a read already
        # happened during this iteration (nested points count). Like the
        # reference, no decision at all leaves the assumed one.
        writer = _last_writer(self.spec, state)
        if writer and self.reads == reads:
            self._take(state, writer)
        self.decision = self.decision or self.assume

    def _take(self, state: State, writer: str) -> None:
        """Runtime mode: use the given decision for this point, or stop the walk here."""
        assert self.known is not None
        self.reads += 1
        occurrence = 1
        key = decisions.point_key(state.name, self.active_loops)
        while key in self.keys:
            occurrence += 1
            key = decisions.point_key(state.name, self.active_loops, occurrence)
        self.keys.add(key)
        if key not in self.known:
            # validation makes every writer a state with work, so it has a step
            index, uri = self.sites.get(writer, (len(self.steps) - 1, ""))
            raise _Pending(DecisionPoint(key, state.name, writer, uri, index))
        value = decisions.normalize(self.known[key])
        self.used.append((key, value))
        # an empty decision leaves the assumed one, as in the reference driver
        self.decision = value or self.assume

    def _group_next(self, state: State, top: bool) -> str:
        if state.next or state.terminal:
            return state.next
        return self._dead_end(state, top)

    def _dead_end(self, state: State, top: bool) -> str:
        # npa-infra is stricter (dsl.md §4.2 planning guard): a non-terminal
        # state reached at top level must lead somewhere.
        if not top:
            return ""
        if state.transitions:
            raise PlanError(
                ("states", state.name, "transitions"),
                f"no transition matches decision {self.decision or '(none)'!r} and there is no next",
                "add a transition without 'when' or a next: as the fallback",
                state=state.name,
            )
        raise PlanError(
            ("states", state.name),
            "plan ends at a non-terminal state",
            "add next: <state>, or mark the state terminal: true",
            state=state.name,
        )

    def _group_concurrency(self, state: State) -> int:
        members = len(state.parallel)
        if state.max_concurrency is None:
            return members
        try:
            value = numbers.resolve_int(state.max_concurrency, self.config)
        except ValueError as exc:
            raise PlanError(
                ("states", state.name, "maxConcurrency"), str(exc), state=state.name
            ) from None
        return max(1, min(value, members))


def dry_run_walk(spec: Spec, catalog: Catalog, config: dict[str, Any], run: dict[str, Any]) -> Walk:
    """A walk that can step any state out of order (the token dry run of dsl.md §4).

    Every loop counter is 1 and every declared output has a placeholder URI,
    so ``step`` resolves any state's tokens without running the states before it.
    """
    walk = Walk(spec, catalog, config, run, "", limit=10**9)
    walk.loops = {name: 1 for name, st in spec.states.items() if st.loop is not None}
    walk.state_outputs = {
        name: {
            "uri": f"s3://validate/{name}/output_1",
            **{
                f"output_{i}": f"s3://validate/{name}/output_{i}"
                for i in range(1, len(st.outputs) + 1)
            },
        }
        for name, st in spec.states.items()
        if st.outputs
    }
    return walk


def _last_writer(spec: Spec, state: State) -> str:
    """The last ``writesDecision`` child of sequence ``state``, or empty (dsl.md §5.4)."""
    for child in reversed(state.sequence):
        candidate = spec.states.get(child)
        if candidate is not None and candidate.writes_decision:
            return child
    return ""


def config_truthy(ref: str, config: Mapping[str, Any]) -> bool:
    """Whether a transition's ``if_config`` reference is truthy in ``config``."""
    key = ref.strip()
    if key.startswith("{{") and key.endswith("}}"):
        key = key[2:-2].strip()
    key = key.removeprefix("config.")
    return bool(config.get(key))


def _omit_empty_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    if not flags:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in flags and i + 1 < len(argv) and not argv[i + 1].strip():
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _token_hint(exc: tokens.TokenError) -> str:
    if exc.scope == "state":
        return "reference only states that run earlier on every path, by their declared outputs"
    if exc.scope == "loop":
        return "loop tokens name an enclosing or earlier loop state"
    if exc.scope == "config":
        return "define the key under config:, in params, or pass --var KEY=VALUE"
    return "check the token spelling"


def build_plan(
    spec: Spec,
    catalog: Catalog,
    *,
    run_id: str,
    assume_decision: str = "",
    variables: Mapping[str, str] | None = None,
    decisions: Mapping[str, str] | None = None,
) -> Plan:
    """Plan ``spec``; with ``decisions``, plan at runtime up to the first unknown decision.

    ``decisions`` is None for one-shot planning (the assumed decision
    everywhere). A mapping, even empty, selects runtime mode (dsl.md §5.4):
    each decision point takes the decision under its key, and the walk stops
    at the first key that is missing, returning that prefix with ``pending``.

    Raises:
        PlanError: located at the offending field, in either mode.
    """
    config, run = context.build_scope(spec, catalog, run_id=run_id, variables=variables or {})
    assume = resolve_assumption(spec, config, assume_decision)
    walk = Walk(spec, catalog, config, run, assume, step_limit(spec), known=decisions)
    pending: DecisionPoint | None = None
    try:
        walk.expand(spec.initial)
    except _Pending as stop:
        pending = stop.point
    return Plan(
        workflow=spec.name,
        api_version=spec.api_version,
        initial=spec.initial,
        run_id=run_id,
        assume_decision=assume,
        steps=tuple(walk.steps),
        config=config,
        group_concurrency=walk.group_concurrency,
        pending=pending,
        decisions_used=tuple(walk.used),
    )
