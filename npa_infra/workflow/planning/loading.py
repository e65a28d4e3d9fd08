"""Load, parse and fully validate a spec file, including tokens and plans.

``load_validated`` runs every phase of dsl.md §4: file, structure, parse,
spec level, per state, profiles, executable states, graph, then the token
dry run (every loop counter 1, ``run.id=validate-run``) and one plan per
decision assumption, which catches state references that are not guaranteed
to have run and non-terminal dead ends. All problems come back as one
``SpecError`` holding every located issue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.errors import SpecError
from npa_infra.plan import context, decisions, planner
from npa_infra.plan.model import PlanError
from npa_infra.spec import parse, tokens, validate
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.model import Spec
from npa_infra.spec.source import LoadedDocument, json_path, load_file, load_text

__all__ = ["ValidatedSpec", "load_validated", "validate_document"]

VALIDATE_RUN_ID = "validate-run"
_ASSUMPTIONS = ("", "loop_back", "promote_checkpoint")


@dataclass(frozen=True, slots=True)
class ValidatedSpec:
    spec: Spec
    lines: list[str]
    label: str
    warnings: list[SpecIssue]


def _issue(spec: Spec, err: PlanError) -> SpecIssue:
    pos = spec.source_map.locate(err.path)
    return SpecIssue(json_path(err.path), err.message, err.hint, pos.line, pos.column, err.state)


def _token_phase(spec: Spec, catalog: Catalog, c: parse.Collector) -> None:
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
    failed = False
    for st in spec.states.values():
        if not st.has_work:
            continue
        try:
            walk.step(st, iteration=None, loop_label="", group="")
            _trigger_numbers(st, walk.state_config(st), c)
        except PlanError as err:
            c.issues.append(_issue(spec, err))
            failed = True
    if failed or c.issues:
        return
    seen: set[tuple[str, str]] = set()
    for assume in _ASSUMPTIONS:
        try:
            planner.build_plan(spec, catalog, run_id=VALIDATE_RUN_ID, assume_decision=assume)
        except PlanError as err:
            issue = _issue(spec, err)
            if assume:
                issue = issue._replace(message=f"{issue.message} (when the decision is {assume})")
            key = (issue.path, err.message)
            if key not in seen:
                seen.add(key)
                c.issues.append(issue)


def _trigger_numbers(st: Any, config: Mapping[str, Any], c: parse.Collector) -> None:
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


def validate_document(
    doc: LoadedDocument, catalog: Catalog, variables: Mapping[str, str]
) -> ValidatedSpec:
    """Every validation phase over a loaded document; raise ``SpecError`` with all issues."""
    result = parse.parse_document(doc)
    c = result.collector
    spec = result.spec
    if spec is None:
        raise SpecError(c.issues, source=doc.label)
    if variables:
        spec = spec._replace(config={**spec.config, **variables})
    validate.check_spec(spec, catalog, c)
    if not c.issues:
        _token_phase(spec, catalog, c)
    if c.issues:
        raise SpecError(c.issues, source=doc.label)
    return ValidatedSpec(spec, doc.lines, doc.label, c.warnings)


def load_validated(
    path: Path | str,
    catalog: Catalog,
    variables: Mapping[str, str] | None = None,
    *,
    text: str | None = None,
) -> ValidatedSpec:
    """Load ``path`` (or ``text`` labelled by it) and validate it completely."""
    label = str(path)
    doc = load_text(text, label) if text is not None else load_file(Path(path))
    if isinstance(doc, SpecIssue):
        raise SpecError([doc], source=label)
    return validate_document(doc, catalog, variables or {})
