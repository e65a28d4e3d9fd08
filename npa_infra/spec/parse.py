"""Turn a loaded YAML document into the spec model, collecting located issues.

This covers the reference's phases 1-3 (file, structure, per-field parsing,
dsl.md §4.1). Every problem becomes a ``SpecIssue`` located through the
source map; parsing goes on after a problem so that one run reports every
independent mistake.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from npa_infra.spec import model
from npa_infra.spec.issues import SpecIssue, doc_ref, section_for
from npa_infra.spec.source import LoadedDocument, PathKey, Position, SourceMap, json_path

__all__ = ["Collector", "ParseResult", "parse_document", "suggest", "type_name"]

STATE_FIELDS = {
    "description": "description",
    "run": "run",
    "toolRef": "tool_ref",
    "tool_ref": "tool_ref",
    "sequence": "sequence",
    "parallel": "parallel",
    "parallelCount": "parallel_count",
    "parallel_count": "parallel_count",
    "maxConcurrency": "max_concurrency",
    "max_concurrency": "max_concurrency",
    "params": "params",
    "trigger": "trigger",
    "loop": "loop",
    "transitions": "transitions",
    "next": "next",
    "needs": "needs",
    "inputs": "inputs",
    "outputs": "outputs",
    "resources": "resources",
    "terminal": "terminal",
    "writesDecision": "writes_decision",
    "writes_decision": "writes_decision",
    "multiNodeMode": "multi_node_mode",
    "multi_node_mode": "multi_node_mode",
}
METADATA_FIELDS = ("name", "description", "namespace", "labels", "executionMode")


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "str"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return type(value).__name__


@dataclass(slots=True)
class Collector:
    """Accumulates issues and warnings, locating each by JSON path."""

    source_map: SourceMap
    issues: list[SpecIssue] = field(default_factory=list)
    warnings: list[SpecIssue] = field(default_factory=list)
    # (path, message) of every issue up to ``_indexed`` of the ``_of`` list; phases append
    # to ``issues`` directly too, so ``error`` indexes newcomers first (issue 19: one set
    # lookup per issue instead of a scan of all issues, which was quadratic)
    _seen: set[tuple[str, str]] = field(default_factory=set, init=False, repr=False, compare=False)
    _indexed: int = field(default=0, init=False, repr=False, compare=False)
    _of: list[SpecIssue] | None = field(default=None, init=False, repr=False, compare=False)

    def error(
        self,
        path: PathKey,
        message: str,
        hint: str = "",
        *,
        key: bool = False,
        state: str | None = None,
        at: PathKey | None = None,
        section: str = "",
        position: Position | None = None,
    ) -> None:
        """Record an issue at ``path``; ``at`` locates it at another node (e.g. the offending key).

        ``position``, when known, is the exact place inside the value (a bad token's braces).
        """
        if position is not None:
            pos = position
        elif at is not None:
            pos = self.source_map.locate(at, key=True)
        else:
            pos = self.source_map.locate(path, key=key)
        issue = SpecIssue(
            json_path(path), message, _hint(hint, path, section), pos.line, pos.column, state
        )
        # one pass, each problem once: a rule reached from two phases reports once
        if self._is_new(issue.path, message):
            self.issues.append(issue)

    def _is_new(self, path: str, message: str) -> bool:
        """Whether no issue so far has this path and message."""
        if self._of is not self.issues or self._indexed > len(self.issues):
            self._seen, self._indexed, self._of = set(), 0, self.issues  # replaced: index anew
        for i in range(self._indexed, len(self.issues)):
            old = self.issues[i]
            self._seen.add((old.path, old.message))
        self._indexed = len(self.issues)
        return (path, message) not in self._seen

    def warn(
        self,
        path: PathKey,
        message: str,
        hint: str = "",
        *,
        state: str | None = None,
        section: str = "",
    ) -> None:
        pos = self.source_map.locate(path, key=True)
        text = _hint(hint, path, section)
        self.warnings.append(SpecIssue(json_path(path), message, text, pos.line, pos.column, state))


def _hint(hint: str, path: PathKey, section: str) -> str:
    # dsl.md §4.2: every error carries a one-line hint; issue 18: it names the
    # section of docs/spec-format.md that explains the field
    text = hint or "check this field against the npa.workflow/v0.0.1 format"
    return f"{text} (see {doc_ref(section or section_for(path))})"


def suggest(name: str, options: Iterable[str]) -> str:
    """``did you mean 'x'?`` for the closest option, or empty."""
    import difflib  # lazy: only invalid specs need suggestions

    close = difflib.get_close_matches(name, list(options), n=1)
    return f"did you mean '{close[0]}'?" if close else ""


@dataclass(slots=True)
class ParseResult:
    spec: model.Spec | None
    collector: Collector


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _str_list(c: Collector, value: object, path: PathKey, what: str, state: str) -> tuple[str, ...]:
    if isinstance(value, str):
        c.error(
            path,
            f"{what} must be a list of state names, got str",
            f"write {what}: [{value}]",
            state=state,
        )
        return ()
    if not isinstance(value, list):
        c.error(path, f"{what} must be a list of state names, got {type_name(value)}", state=state)
        return ()
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            c.error(
                (*path, i),
                f"{what} entries must be state names, got {type_name(item)}",
                "list state names as strings",
                state=state,
            )
            item = ""  # a placeholder keeps later entries at their index as written
        out.append(item)
    return tuple(out)


def _artifacts(
    c: Collector, value: object, path: PathKey, state: str
) -> tuple[model.Artifact, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        c.error(
            path,
            f"expected list of {{uri, schema}}, got {type_name(value)}",
            "write a list of {uri: s3://…, schema: name}",
            state=state,
        )
        return ()
    out = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            out.append(model.Artifact(uri=item))
            continue
        if not isinstance(item, dict):
            c.error(
                (*path, i),
                f"expected object with 'uri', got {type_name(item)}",
                "write {uri: s3://…, schema: name}",
                state=state,
            )
            out.append(model.Artifact(uri=""))  # placeholder: keeps indexes as written
            continue
        uri = item.get("uri")
        if not isinstance(uri, str):
            c.error((*path, i), "artifact needs a string 'uri'", "add uri: s3://…", state=state)
            out.append(model.Artifact(uri=""))
            continue
        for key in item:
            if key not in ("uri", "schema"):
                c.warn(
                    (*path, i, str(key)),
                    f"unknown artifact key '{key}' is ignored",
                    suggest(str(key), ("uri", "schema")) or "an artifact has uri and schema",
                    state=state,
                )
        out.append(model.Artifact(uri=uri, schema=_as_text(item.get("schema"))))
    return tuple(out)


def _number_form(c: Collector, value: object, path: PathKey, state: str) -> model.Scalar:
    """int, digit string, ``config.k`` or a whole ``{{config.k}}`` (checked later)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        c.error(
            path,
            f"expected an integer or config reference, got {type_name(value)}",
            'use an integer, "3", config.KEY or {{config.KEY}}',
            state=state,
        )
        return None
    return value


def _parse_run(c: Collector, raw: object, path: PathKey, state: str) -> model.RunBlock | None:
    if not isinstance(raw, dict):
        c.error(
            path,
            f"run must be a mapping, got {type_name(raw)}",
            "use run: {argv: [...]} or run: {shell: '...'}",
            state=state,
        )
        return None
    shell_raw, argv_raw = raw.get("shell"), raw.get("argv")
    for key in raw:
        if key not in ("shell", "argv"):
            c.warn(
                (*path, str(key)),
                f"unknown run key '{key}' is ignored",
                suggest(str(key), ("shell", "argv")) or "run has argv or shell",
                state=state,
            )
    if argv_raw is not None and shell_raw is not None:
        # issue 18: argv would win and the shell silently dropped
        c.error(
            (*path, "shell"),
            "run.argv and run.shell are mutually exclusive (argv would win and shell be dropped)",
            "keep one: argv (an exec list) or shell (a bash string)",
            key=True,
            state=state,
        )
    argv: tuple[str, ...] = ()
    if argv_raw is not None:
        if not isinstance(argv_raw, list) or not all(_is_scalar(a) for a in argv_raw):
            c.error(
                (*path, "argv"),
                "run.argv must be a list of strings",
                "write argv as a YAML list of strings",
                state=state,
            )
        else:
            argv = tuple(_as_text(a) for a in argv_raw)
    shell = ""
    if shell_raw is not None:
        if not isinstance(shell_raw, str):
            c.error(
                (*path, "shell"),
                f"run.shell must be a string, got {type_name(shell_raw)}",
                "write shell as one bash string",
                state=state,
            )
        else:
            shell = shell_raw
    if not argv and not shell.strip():
        c.error(
            path,
            "empty run block",
            "give run.argv (a list) or run.shell (a bash string)",
            state=state,
        )
        return None
    return model.RunBlock(shell="" if argv else shell, argv=argv)


def _parse_trigger(c: Collector, raw: object, path: PathKey, state: str) -> model.Trigger | None:
    if not isinstance(raw, dict):
        c.error(
            path,
            f"trigger must be a mapping, got {type_name(raw)}",
            "use trigger: {uri: s3://bucket/prefix/, pollSeconds: 30}",
            state=state,
        )
        return None
    uri = raw.get("uri")
    if not isinstance(uri, str) or not uri:
        c.error(
            path, "trigger.uri is required", "add trigger.uri: s3://bucket/prefix/", state=state
        )
        uri = ""
    values: dict[str, model.Scalar] = {}
    for key, default, minimum in (("pollSeconds", 30, 1), ("maxPolls", 0, 0), ("minObjects", 1, 1)):
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            c.error(
                (*path, key),
                f"trigger.{key} must be an integer, got {type_name(v)}",
                "write an integer or a {{config.KEY}} token",
                state=state,
            )
            v = default
        elif isinstance(v, int) and v < minimum:
            c.error(
                (*path, key),
                f"trigger.{key} must be >= {minimum}, got {v}",
                "raise the value to the minimum shown",
                state=state,
            )
        values[key] = v
    return model.Trigger(uri, values["pollSeconds"], values["maxPolls"], values["minObjects"])


def _parse_loop(c: Collector, raw: object, path: PathKey, state: str) -> model.Loop | None:
    if not isinstance(raw, dict):
        c.error(
            path,
            f"loop must be a mapping, got {type_name(raw)}",
            "use loop: {max: 3, until: promote_checkpoint}",
            state=state,
        )
        return None
    max_value = _number_form(c, raw.get("max", 1), (*path, "max"), state)
    until = raw.get("until")
    if until is not None and not isinstance(until, str):
        c.error(
            (*path, "until"),
            f"loop.until must be a predicate name, got {type_name(until)}",
            "use promote_checkpoint or loop_back",
            state=state,
        )
        until = None
    return model.Loop(max=max_value if max_value is not None else 1, until=until)


def _parse_transitions(
    c: Collector, raw: object, path: PathKey, state: str
) -> tuple[model.Transition, ...]:
    if not isinstance(raw, list):
        c.error(
            path,
            f"transitions must be a list, got {type_name(raw)}",
            "write transitions as a list of {goto, when}",
            state=state,
        )
        return ()
    out = []
    for i, item in enumerate(raw):
        ipath = (*path, i)
        if not isinstance(item, dict):
            c.error(
                ipath,
                f"transition must be a mapping, got {type_name(item)}",
                "write each transition as {goto: STATE, when: PREDICATE}",
                state=state,
            )
            out.append(model.Transition(goto=""))  # placeholder: indexes stay as written
            continue
        for key in item:
            if key not in ("goto", "when", "if"):
                c.warn(
                    (*ipath, str(key)),
                    f"unknown transition key '{key}' is ignored",
                    suggest(str(key), ("goto", "when", "if")) or "a transition has goto, when, if",
                    state=state,
                )
        goto = item.get("goto")
        if not isinstance(goto, str) or not goto:
            c.error(ipath, "transition needs goto", "add goto: <state name>", state=state)
            goto = ""
        when, cond = item.get("when"), item.get("if")
        if when is not None and not isinstance(when, str):
            c.error(
                (*ipath, "when"),
                "transition.when must be a predicate name",
                "use promote_checkpoint or loop_back",
                state=state,
            )
            when = None
        if cond is not None and not isinstance(cond, str):
            c.error(
                (*ipath, "if"),
                "transition.if must be 'config.KEY'",
                "write if: config.KEY",
                state=state,
            )
            cond = None
        out.append(model.Transition(goto=goto, when=when, if_config=cond))
    return tuple(out)


def _parse_params(c: Collector, raw: object, path: PathKey, state: str) -> dict[str, model.Scalar]:
    if not isinstance(raw, dict):
        c.error(
            path,
            f"params must be a mapping, got {type_name(raw)}",
            "use params: {key: value}, a config overlay for this state",
            state=state,
        )
        return {}
    out: dict[str, model.Scalar] = {}
    for key, value in raw.items():
        if not _is_scalar(value):
            c.error(
                (*path, str(key)),
                f"params values must be scalars, got {type_name(value)}",
                "use a string, number or boolean; params cannot nest",
                state=state,
            )
            continue
        out[str(key)] = value
    return out


def _parse_state(c: Collector, name: str, raw: dict[str, Any]) -> model.State:
    base: PathKey = ("states", name)
    kw: dict[str, Any] = {}
    for key, value in raw.items():
        attr = STATE_FIELDS.get(str(key))
        path = (*base, str(key))
        if attr is None:
            c.warn(
                path,
                f"unknown state key '{key}' is ignored",
                suggest(str(key), STATE_FIELDS) or "remove it or check its spelling",
                state=name,
            )
            continue
        if attr in ("description",):
            kw[attr] = _as_text(value)
        elif attr == "run":
            kw["run"] = _parse_run(c, value, path, name)
        elif attr in ("tool_ref", "next", "resources", "multi_node_mode"):
            if not isinstance(value, str):
                c.error(
                    path,
                    f"expected str, got {type_name(value)}",
                    "write a string value",
                    state=name,
                )
                continue
            if attr == "multi_node_mode" and value != "sharded":
                c.error(
                    path,
                    f"multiNodeMode must be 'sharded', got '{value}'",
                    "remove it or set multiNodeMode: sharded",
                    state=name,
                )
                continue
            kw[attr] = value
        elif attr in ("sequence", "parallel"):
            kw[attr] = _str_list(c, value, path, attr, name)
        elif attr == "needs":
            kw[attr] = (
                (value,) if isinstance(value, str) else _str_list(c, value, path, "needs", name)
            )
        elif attr in ("parallel_count", "max_concurrency"):
            kw[attr] = _number_form(c, value, path, name)
        elif attr == "params":
            kw[attr] = _parse_params(c, value, path, name)
        elif attr == "trigger":
            kw[attr] = _parse_trigger(c, value, path, name)
        elif attr == "loop":
            kw[attr] = _parse_loop(c, value, path, name)
        elif attr == "transitions":
            kw[attr] = _parse_transitions(c, value, path, name)
        elif attr in ("inputs", "outputs"):
            kw[attr] = _artifacts(c, value, path, name)
        elif attr in ("terminal", "writes_decision"):
            if not isinstance(value, bool):
                c.error(
                    path,
                    f"expected true or false, got {type_name(value)}",
                    "write true or false",
                    state=name,
                )
                continue
            kw[attr] = value
    if "tool_ref" in kw and kw.get("run") is not None:
        # issue 18: toolRef would win and the run block silently dropped
        run_key = "run"
        c.error(
            (*base, run_key),
            "toolRef and run are mutually exclusive (toolRef would win and run be dropped)",
            "keep one: toolRef (a catalog tool) or run (your own command)",
            key=True,
            state=name,
        )
    return model.State(name=name, **{k: v for k, v in kw.items() if v is not None})


def _parse_metadata(c: Collector, raw: object) -> model.Metadata:
    if raw is None:
        return model.Metadata()
    if not isinstance(raw, dict):
        c.error(("metadata",), f"expected object, got {type_name(raw)}")
        return model.Metadata()
    unknown = [str(k) for k in raw if k not in METADATA_FIELDS]
    if unknown:
        c.error(
            ("metadata",),
            "unknown field(s): " + ", ".join(f"'{k}'" for k in unknown),
            f"allowed: {', '.join(METADATA_FIELDS)}",
            at=("metadata", unknown[0]),
        )
    name = raw.get("name")
    if name is None:
        c.error(
            ("metadata",), "missing required field 'name'", "add metadata.name: <workflow name>"
        )
        name = "unnamed"
    elif not isinstance(name, str) or not name:
        c.error(
            ("metadata", "name"),
            f"expected non-empty str, got {type_name(name)}",
            "give the workflow a name",
        )
        name = "unnamed"
    mode_raw = raw.get("executionMode")
    mode = None
    if mode_raw is not None:
        try:
            mode = model.ExecutionMode(mode_raw) if isinstance(mode_raw, str) else None
        except ValueError:
            mode = None
        if mode is None:
            c.error(
                ("metadata", "executionMode"),
                f"unknown executionMode {mode_raw!r}",
                "use executionMode: runtime (or planned, or remove the key)",
            )
    labels_raw = raw.get("labels") or {}
    labels = (
        {str(k): _as_text(v) for k, v in labels_raw.items()} if isinstance(labels_raw, dict) else {}
    )
    if not isinstance(labels_raw, dict):
        c.error(("metadata", "labels"), f"expected object, got {type_name(labels_raw)}")
    return model.Metadata(
        name=name,
        description=_as_text(raw.get("description")),
        namespace=_as_text(raw.get("namespace")),
        labels=labels,
        execution_mode=mode,
    )


def _mapping_field(c: Collector, data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        c.error(
            (key,),
            f"expected object, got {type_name(value)}",
            "write this as a mapping of key: value",
        )
        return {}
    return {str(k): v for k, v in value.items()}


def parse_document(doc: LoadedDocument) -> ParseResult:
    """Structure and field parsing; returns a model only when the shape allows one."""
    c = Collector(doc.source_map)
    data = doc.data
    if not isinstance(data, dict):
        c.error(
            (),
            f"spec must be a mapping, got {type_name(data)}",
            "a spec starts with apiVersion:, kind: and states:",
        )
        return ParseResult(None, c)
    for required in ("apiVersion", "kind", "states"):
        if required not in data:
            c.error((), f"missing required field '{required}'", f"add top-level '{required}:'")
    api_version = data.get("apiVersion")
    if "apiVersion" in data and not isinstance(api_version, str):
        c.error(
            ("apiVersion",), f"expected str, got {type_name(api_version)}", "write a string value"
        )
    kind = data.get("kind")
    if "kind" in data and kind != "Workflow":
        c.error(("kind",), f"expected 'Workflow', got {kind!r}", "set kind: Workflow")
    metadata = _parse_metadata(c, data.get("metadata"))
    config = _mapping_field(c, data, "config")
    run_defaults = _mapping_field(c, data, "run")
    resources_raw = _mapping_field(c, data, "resources")
    resources: dict[str, dict[str, Any]] = {}
    for pname, profile in resources_raw.items():
        if not isinstance(profile, dict):
            c.error(("resources", pname), f"expected object, got {type_name(profile)}")
            continue
        resources[pname] = profile
    states_raw = data.get("states")
    states: dict[str, model.State] = {}
    if "states" in data:
        if not isinstance(states_raw, dict):
            c.error(
                ("states",),
                f"expected object, got {type_name(states_raw)}",
                "states is a mapping of name → state",
            )
        elif not states_raw:
            c.error(("states",), "states must not be empty", "declare at least one state")
        else:
            for sname, sraw in states_raw.items():
                if not isinstance(sname, str) or not sname:
                    c.error(
                        ("states",),
                        f"state names must be strings, got {type_name(sname)}",
                        "use text keys under states:",
                    )
                    continue
                if not isinstance(sraw, dict):
                    c.error(
                        ("states", sname), f"expected object, got {type_name(sraw)}", state=sname
                    )
                    continue
                states[sname] = _parse_state(c, sname, sraw)
    initial = data.get("initial")
    if initial is not None and not isinstance(initial, str):
        c.error(("initial",), f"expected str, got {type_name(initial)}", "write a string value")
        initial = None
    # Keep going after field-level problems so later phases report independent
    # mistakes too; without states (or with a broken top level) there is nothing to check.
    top_level_broken = any(i.path in ("$", "$.states", "$.apiVersion") for i in c.issues)
    if not states or top_level_broken:
        return ParseResult(None, c)
    spec = model.Spec(
        api_version=str(api_version),
        kind=str(kind),
        metadata=metadata,
        config=config,
        run_defaults=run_defaults,
        resources=resources,
        initial=initial if initial is not None else next(iter(states)),
        states=states,
        source_map=doc.source_map,
        label=doc.label,
    )
    return ParseResult(spec, c)
