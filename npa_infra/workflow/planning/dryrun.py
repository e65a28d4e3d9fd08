"""The token and dataflow phases of validation (dsl.md §2.3, §4.1 phase 9, issue 18).

One pass, every problem: each field's tokens are checked one by one (three
bad tokens in one field are three issues), malformed ``{{ }}`` are located
in every substituted string, profile fields that held tokens are checked as
SkyPilot parses them once resolved for each state, two members of one
parallel group writing one output URI are an error, and then one plan per
decision assumption catches state references not guaranteed to have run and
non-terminal dead ends. The plan runs only when the graph is sound: a plan of
a spec with an unknown edge would report consequences, not causes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.plan import context, decisions, planner
from npa_infra.plan.model import PlanError
from npa_infra.spec import resources, scalarpos, tokens
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.model import Spec, State
from npa_infra.spec.parse import Collector, suggest
from npa_infra.spec.source import PathKey, Position, SourceMap, json_path

__all__ = ["VALIDATE_RUN_ID", "check"]

VALIDATE_RUN_ID = "validate-run"
_ASSUMPTIONS = ("", "loop_back", "promote_checkpoint")
# fields whose errors leave the control-flow graph unknown: no plan is attempted then
_GRAPH_FIELDS = frozenset(
    [
        "next",
        "transitions",
        "sequence",
        "parallel",
        "loop",
        "needs",
        "parallelCount",
        "maxConcurrency",
        "parallel_count",
        "max_concurrency",
    ]
)
_TOKEN_HINTS = {
    "state": "reference only states that run earlier on every path, by their declared outputs",
    "loop": "loop tokens name an enclosing or earlier loop state",
    "config": "define the key under config:, in params, or pass --var KEY=VALUE",
}
# the parts of a state the planner substitutes tokens into
_STATE_FIELDS = ("run", "inputs", "outputs", "trigger", "params")


def _issue(spec: Spec, err: PlanError) -> SpecIssue:
    pos = spec.source_map.locate(err.path)
    return SpecIssue(json_path(err.path), err.message, err.hint, pos.line, pos.column, err.state)


def _graph_sound(issues: list[SpecIssue]) -> bool:
    for issue in issues:
        parts = issue.path.replace("[", ".[").split(".")
        if issue.path in ("$", "$.states", "$.initial", "$.apiVersion") or issue.path == "":
            return False
        if len(parts) == 3 and parts[1] == "states":
            return False  # a state-level problem (nesting, a cycle, an empty state)
        if len(parts) >= 4 and parts[1] == "states" and parts[3] in _GRAPH_FIELDS:
            return False
    return True


def _strings(value: object, path: PathKey) -> Iterator[tuple[PathKey, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def _substituted(data: object) -> Iterator[tuple[PathKey, str]]:
    """Every string of the document that the planner substitutes tokens into."""
    if not isinstance(data, dict):
        return
    for top in ("config", "run", "resources"):
        yield from _strings(data.get(top), (top,))
    states = data.get("states")
    if isinstance(states, dict):
        for name, raw in states.items():
            if isinstance(raw, dict):
                for key in _STATE_FIELDS:
                    if key in raw:
                        yield from _strings(raw[key], ("states", str(name), key))


@dataclass(frozen=True, slots=True)
class _Locator:
    """The line and column of an offset inside a field's value (issue 18: at the token)."""

    data: object
    lines: Sequence[str]
    source_map: SourceMap

    def at(self, path: PathKey, text: str, offset: int | None) -> Position | None:
        # only a value that is this text in the source (a catalog's argv is not) maps
        start = self.source_map.values.get(path)
        if offset is None or start is None or _raw(self.data, path) != text:
            return None
        return scalarpos.locate(self.lines, start, text, offset)


def _raw(data: object, path: PathKey) -> object:
    node = data
    for part in path:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _malformed(data: object, c: Collector, where: _Locator) -> None:
    for path, text in _substituted(data):
        state = str(path[1]) if path[0] == "states" else None
        for at, message in tokens.malformed(text):
            c.error(
                path,
                message,
                "write tokens as {{ scope.key }}; close every '{{' with '}}'",
                state=state,
                section="tokens",
                position=where.at(path, text, at),
            )


def _token_message(spec: Spec, exc: tokens.TokenError) -> tuple[str, str]:
    """The message and hint of one bad token, with a did-you-mean for state names."""
    if exc.scope == "state" and "has not run before this point" in exc.message:
        name = exc.token.strip("{} ").split("|")[0].strip().removeprefix("state.")
        name = name.rpartition(".")[0]
        if name not in spec.states:
            hint = suggest(name, spec.states) or "name a declared state"
            return f"token {exc.token}: no state named '{name}'", hint
        return (
            f"token {exc.token}: state '{name}' declares no outputs",
            f"add outputs: [{{uri: …}}] to state '{name}'",
        )
    if "unknown transform" in exc.message:
        return exc.message, "write {{ scope.key|base64 }}, or drop the transform"
    return exc.message, _TOKEN_HINTS.get(exc.scope, "check the token spelling")


def _state_fields(st: State, catalog: Catalog) -> Iterator[tuple[PathKey, str]]:
    base: PathKey = ("states", st.name)
    if st.tool_ref:
        entry = catalog.get(st.tool_ref)
        for text in entry.argv_template if entry else ():
            yield (*base, "toolRef"), text
    elif st.run is not None:
        if st.run.argv:
            for i, arg in enumerate(st.run.argv):
                yield (*base, "run", "argv", i), arg
        else:
            yield (*base, "run", "shell"), st.run.shell
    for kind, artifacts in (("outputs", st.outputs), ("inputs", st.inputs)):
        for i, art in enumerate(artifacts):
            if art.uri:
                yield (*base, kind, i, "uri"), art.uri
    if st.trigger is not None:
        yield (*base, "trigger", "uri"), st.trigger.uri


def _state_tokens(
    spec: Spec, st: State, walk: planner.Walk, c: Collector, where: _Locator
) -> tuple[bool, list[str | None]]:
    """Report every bad token of one state: (no bad token, each output URI or None)."""
    before = len(c.issues)
    try:
        config = walk.state_config(st)
    except PlanError as err:
        c.issues.append(_issue(spec, err))
        config = {**walk.config, **st.params}
    ctx = tokens.TokenContext(
        config=config, run=walk.run, state_outputs=walk.state_outputs, loop_iterations=walk.loops
    )
    fields = list(_state_fields(st, walk.catalog))
    raw_profile = spec.resources.get(st.resources) or spec.resources.get("default") or {}
    fields.extend(_strings(raw_profile, ("resources", st.resources)))
    for path, text in fields:
        for exc in tokens.problems(text, ctx):
            message, hint = _token_message(spec, exc)
            position = where.at(path, text, exc.offset)
            c.error(path, message, hint, state=st.name, section="tokens", position=position)
    uris: list[str | None] = []
    for art in st.outputs:
        try:
            uris.append(tokens.resolve(art.uri, ctx) if art.uri else None)
        except tokens.TokenError:
            uris.append(None)  # reported above
    return len(c.issues) == before, uris


def _trigger_numbers(st: State, config: Mapping[str, Any], c: Collector) -> None:
    trig = st.trigger
    if trig is None:
        return
    for key, value, minimum in (
        ("pollSeconds", trig.poll_seconds, 1),
        ("maxPolls", trig.max_polls, 0),
        ("minObjects", trig.min_objects, 1),
    ):
        if isinstance(value, int):
            continue
        text = value if isinstance(value, str) else ""
        try:
            resolved = int(tokens.resolve(text, tokens.TokenContext(config=config, run={})).strip())
        except (tokens.TokenError, ValueError):
            c.error(
                ("states", st.name, "trigger", key),
                f"trigger.{key} must resolve to an integer, got {value!r}",
                state=st.name,
            )
            continue
        if resolved < minimum:
            c.error(
                ("states", st.name, "trigger", key),
                f"trigger.{key} must be >= {minimum}, got {resolved}",
                state=st.name,
            )


def _writers(spec: Spec, outputs: Mapping[str, list[str | None]], c: Collector) -> None:
    """Two members of one parallel group must not write one output URI (issue 18)."""
    for group in spec.states.values():
        owner: dict[str, str] = {}
        for member in dict.fromkeys(group.parallel):
            for i, uri in enumerate(outputs.get(member, [])):
                if uri is None:
                    continue
                first = owner.setdefault(uri, member)
                if first != member:
                    c.error(
                        ("states", member, "outputs", i, "uri"),
                        f"output {uri} is also written by '{first}' in parallel group "
                        f"'{group.name}'; concurrent writers would overwrite each other",
                        "give each member its own output URI (e.g. add the member name)",
                        state=member,
                        section="parallel-groups",
                    )


def _plans(spec: Spec, catalog: Catalog, c: Collector) -> None:
    for assume in _ASSUMPTIONS:
        try:
            planner.build_plan(spec, catalog, run_id=VALIDATE_RUN_ID, assume_decision=assume)
        except PlanError as err:
            issue = _issue(spec, err)
            if any(i.path == issue.path for i in c.issues):
                continue  # the field's own problem is reported already
            if assume:
                issue = issue._replace(message=f"{issue.message} (when the decision is {assume})")
            c.issues.append(issue)


def check(
    spec: Spec, catalog: Catalog, c: Collector, data: object, lines: Sequence[str] = ()
) -> None:
    """Append every token and dataflow issue of ``spec`` (loaded from ``data``) to ``c``.

    ``lines`` (the source) place a bad token at its own column, not the value's start.
    """
    plan = _graph_sound(c.issues)
    where = _Locator(data, lines, c.source_map)
    _malformed(data, c, where)
    try:
        config, run = context.build_scope(spec, catalog, run_id=VALIDATE_RUN_ID, variables={})
    except PlanError as err:
        c.issues.append(_issue(spec, err))
        return
    assumption = config.get("plan_assume_decision")
    if assumption not in (None, "") and not decisions.is_allowed_assumption(
        tokens.stringify(assumption)
    ):
        c.error(
            ("config", "plan_assume_decision"),
            f"unknown decision {assumption!r}",
            f"use one of: {', '.join(decisions.ALLOWED_ASSUMPTIONS)}",
        )
        return
    walk = planner.dry_run_walk(spec, catalog, config, run)
    outputs: dict[str, list[str | None]] = {}
    for st in spec.states.values():
        if not st.has_work:
            continue
        clean, outputs[st.name] = _state_tokens(spec, st, walk, c, where)
        if not clean:
            continue
        try:
            walk.step(st, iteration=None, loop_label="", group="")
        except PlanError as err:
            c.issues.append(_issue(spec, err))
            continue
        step = walk.steps[-1]
        _trigger_numbers(st, walk.state_config(st), c)
        raw = spec.resources.get(st.resources) or {}
        resources.check_resolved(c, st.resources, raw, step.resources_profile, st.name)
    _writers(spec, outputs, c)
    if plan:
        _plans(spec, catalog, c)
