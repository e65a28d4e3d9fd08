"""Engine events into the stack diff report, and its pull-request body (cli.md §6, pulumi.md §7).

Pure: the runner converts the SDK's events into ``StepEvent`` /
``DiagnosticEvent`` values; ``build`` turns them and the engine's change
summary into the ``npa.stack.preview.v1`` document; ``markdown`` renders the
same document as a PR comment. Nothing here parses the engine's text output.

Rules (pulumi.md §7.1):

- a step is any resource event whose op is not ``same`` or ``read``; a
  ``refresh`` step counts only when it found drift (diffs, or the resource is
  gone); the ``create-replacement``/``delete-replaced`` halves of a replacement
  are folded into its ``replace`` step;
- ``changes_present`` is true when a step remains, or the summary counts a
  create, update, delete or replace;
- stack-output changes are not counted by the engine (pulumi#5087), which the
  report says in ``output_changes_counted: false``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = [
    "MARKDOWN_LIMIT",
    "PREVIEW_SCHEMA",
    "ChangeSummary",
    "Diagnostic",
    "DiagnosticEvent",
    "PreviewReport",
    "Step",
    "StepEvent",
    "build",
    "markdown",
    "strip_ansi",
]

PREVIEW_SCHEMA: Literal["npa.stack.preview.v1"] = "npa.stack.preview.v1"
MARKDOWN_LIMIT = 64_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_QUIET_OPS = frozenset({"same", "read"})
_REPLACE_HALVES = frozenset({"create-replacement", "delete-replaced", "discard-replaced"})
_COUNTED = ("create", "update", "delete", "replace")


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One resource step as the engine reported it (``resourcePreEvent`` or ``resOutputsEvent``)."""

    op: str
    urn: str
    type: str
    diffs: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # the properties that force a replacement
    detailed_diff: Mapping[str, str] = field(default_factory=dict)  # path -> diff kind
    gone: bool = False  # a refresh found the resource deleted out of band


@dataclass(frozen=True, slots=True)
class DiagnosticEvent:
    severity: str
    message: str
    urn: str | None = None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Step(_Model):
    op: str
    urn: str
    type: str
    name: str
    diff_keys: list[str]
    replace_keys: list[str]
    detailed_diff: dict[str, str]


class Diagnostic(_Model):
    severity: str
    message: str
    urn: str | None = None


class ChangeSummary(_Model):
    create: int = 0
    update: int = 0
    delete: int = 0
    replace: int = 0
    same: int = 0


class PreviewReport(_Model):
    """``npa stack preview --json`` (cli.md §6)."""

    schema_: Literal["npa.stack.preview.v1"] = Field("npa.stack.preview.v1", alias="schema")
    project: str
    stack: str
    backend_url: str
    changes_present: bool
    change_summary: ChangeSummary
    steps: list[Step]
    diagnostics: list[Diagnostic]
    output_changes_counted: Literal[False] = False

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed-field form
    @property
    def status(self) -> Literal["changes", "no_changes"]:
        """Every ``--json`` object has a ``status`` (issue 17): what the preview found."""
        return "changes" if self.changes_present else "no_changes"

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if "::" in urn else urn


def _drifted(event: StepEvent) -> bool:
    return bool(event.diffs or event.detailed_diff or event.gone)


def _steps(events: Sequence[StepEvent]) -> list[Step]:
    replaced = {e.urn for e in events if e.op == "replace"}
    chosen: dict[str, StepEvent] = {}
    for event in events:
        if event.op in _QUIET_OPS:
            continue
        if event.op in _REPLACE_HALVES and event.urn in replaced:
            continue
        if event.op == "refresh" and not _drifted(event):
            continue
        chosen.setdefault(event.urn, event)  # a step's outputs event repeats its pre event
    return [
        Step(
            op=e.op,
            urn=e.urn,
            type=e.type,
            name=_name(e.urn),
            diff_keys=sorted(set(e.diffs)),
            replace_keys=sorted(set(e.keys)),
            detailed_diff=dict(sorted(e.detailed_diff.items())),
        )
        for e in chosen.values()
    ]


def _summary(counts: Mapping[str, int]) -> ChangeSummary:
    return ChangeSummary(**{k: int(counts.get(k, 0)) for k in (*_COUNTED, "same")})


def build(
    events: Iterable[StepEvent | DiagnosticEvent],
    change_summary: Mapping[str, int],
    *,
    project: str,
    stack: str,
    backend_url: str,
) -> PreviewReport:
    """The report of one preview (or refresh preview), from its events and summary."""
    listed = list(events)
    steps = _steps([e for e in listed if isinstance(e, StepEvent)])
    diagnostics = [
        Diagnostic(severity=d.severity, message=strip_ansi(d.message).strip(), urn=d.urn or None)
        for d in listed
        if isinstance(d, DiagnosticEvent) and d.severity != "debug" and d.message.strip()
    ]
    summary = _summary(change_summary)
    counted = any(getattr(summary, k) for k in _COUNTED)
    return PreviewReport(
        schema=PREVIEW_SCHEMA,
        project=project,
        stack=stack,
        backend_url=backend_url,
        changes_present=bool(steps) or counted,
        change_summary=summary,
        steps=steps,
        diagnostics=diagnostics,
    )


def _cell(text: str) -> str:
    return strip_ansi(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: PreviewReport, *, title: str = "Pulumi preview") -> str:
    """A PR-comment body: a headline, the summary, the steps in ``<details>``; at most 64,000 chars.

    The first line is a stable HTML marker so a CI job can replace its previous
    comment instead of adding one per push (pulumi.md §7.2).
    """
    s = report.change_summary
    head = [
        f"<!-- npa-stack-preview {report.project}/{report.stack} -->",
        f"### {title}: `{report.project}/{report.stack}`",
        "",
    ]
    if report.changes_present:
        head.append(
            f"**Changes present:** {s.create} to create, {s.update} to update, "
            f"{s.replace} to replace, {s.delete} to delete, {s.same} unchanged."
        )
    else:
        head.append(f"**No changes.** {s.same} resource(s) unchanged.")
    tail = [
        "",
        "_Stack output changes are not counted by the engine (pulumi/pulumi#5087)._",
    ]
    errors = [d for d in report.diagnostics if d.severity in ("error", "warning")]
    if errors:
        tail[:0] = ["", "**Diagnostics:**", ""] + [
            f"- {d.severity}: {_cell(d.message)[:500]}" for d in errors
        ]
    rows = [
        f"| {st.op} | `{_cell(st.name)}` | `{_cell(st.type)}` | "
        f"{_cell(', '.join(st.diff_keys or sorted(st.detailed_diff)))} | "
        f"{_cell(', '.join(st.replace_keys))} |"
        for st in report.steps
    ]
    body = head + tail
    if rows:
        table = [
            "",
            f"<details><summary>{len(rows)} step(s)</summary>",
            "",
            "| op | resource | type | changed | replace because |",
            "|---|---|---|---|---|",
        ]
        budget = MARKDOWN_LIMIT - len("\n".join(head + tail)) - 200
        kept: list[str] = []
        for row in rows:
            if sum(len(r) + 1 for r in kept) + len(row) > budget:
                kept.append(f"| … | {len(rows) - len(kept)} more step(s) truncated | | | |")
                break
            kept.append(row)
        body = head + table + kept + ["", "</details>"] + tail
    return "\n".join(body)[:MARKDOWN_LIMIT] + "\n"
