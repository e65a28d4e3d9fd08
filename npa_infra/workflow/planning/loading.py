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

from npa_infra.catalog.model import Catalog
from npa_infra.errors import SpecError
from npa_infra.spec import parse, validate
from npa_infra.spec import variables as spec_variables
from npa_infra.spec.issues import SpecIssue, doc_ref
from npa_infra.spec.model import Spec
from npa_infra.spec.source import MAX_BYTES, LoadedDocument, load_file, load_text
from npa_infra.workflow.planning import collector, dryrun

__all__ = ["VALIDATE_RUN_ID", "ValidatedSpec", "load_validated", "validate_document"]

VALIDATE_RUN_ID = dryrun.VALIDATE_RUN_ID


@dataclass(frozen=True, slots=True)
class ValidatedSpec:
    spec: Spec
    lines: list[str]
    label: str
    warnings: list[SpecIssue]


def validate_document(
    doc: LoadedDocument, catalog: Catalog, variables: Mapping[str, str], *, strict: bool = False
) -> ValidatedSpec:
    """Every validation phase over a loaded document; raise ``SpecError`` with all issues.

    One pass (issue 18): every phase runs whatever the earlier ones found, and
    the warnings travel with the errors. ``strict`` makes a ``--var`` the spec
    never reads an error instead of a warning.
    """
    result = parse.parse_document(doc)
    c = result.collector
    spec = result.spec
    # keys written twice (source.py) are reported with every other problem, in one pass
    duplicates = list(doc.issues)
    if spec is None:
        raise SpecError([*duplicates, *c.issues], source=doc.label, warnings=c.warnings)
    # before the merge: a --var key counts as read only if the spec itself reads it
    _unread_variables(spec, doc.data, catalog, variables, c, strict=strict)
    if variables:
        spec = spec._replace(config={**spec.config, **variables})
    validate.check_spec(spec, catalog, c)
    dryrun.check(spec, catalog, c, doc.data, doc.lines)
    if c.issues or duplicates:
        raise SpecError([*duplicates, *c.issues], source=doc.label, warnings=c.warnings)
    return ValidatedSpec(spec, doc.lines, doc.label, c.warnings)


def _unread_variables(
    spec: Spec,
    data: object,
    catalog: Catalog,
    variables: Mapping[str, str],
    c: parse.Collector,
    *,
    strict: bool,
) -> None:
    for key, close in spec_variables.unread(spec, data, catalog, variables):
        issue = SpecIssue(
            f"--var {key}",
            f"not read by the spec (no {{{{config.{key}}}}} and no config.{key})",
            f"{close or 'check the key against the spec config'} (see {doc_ref('variables')})",
        )
        (c.issues if strict else c.warnings).append(issue)


def load_validated(
    path: Path | str,
    catalog: Catalog,
    variables: Mapping[str, str] | None = None,
    *,
    text: str | None = None,
    strict: bool = False,
) -> ValidatedSpec:
    """Load ``path`` (or ``text`` labelled by it) and validate it completely."""
    label = str(path)
    with collector.paused():  # linear in the spec's size (collector, issue 19)
        doc = load_text(text, label) if text is not None else load_file(Path(path))
        if isinstance(doc, SpecIssue):
            raise SpecError([doc], source=label, remedy=_file_remedy(doc))
        return validate_document(doc, catalog, variables or {}, strict=strict)


def _file_remedy(issue: SpecIssue) -> str:
    """The next step after a document that did not load: a path, an encoding or the YAML."""
    if not issue.path:  # the file itself: missing, unreadable, not regular, oversize, binary
        return (
            f"pass the path of a regular spec file (UTF-8 YAML, at most {MAX_BYTES >> 20} MiB), "
            "then rerun `npa workbench workflow validate-spec`"
        )
    return "fix the YAML at the listed position, then rerun `npa workbench workflow validate-spec`"
