"""Located validation issues and how they are printed.

A ``SpecIssue`` is one problem with a spec: the JSON path of the offending
node, its file position (1-based line and column), the state it belongs to,
what is wrong and a one-line hint. Positions come from the loader's source map.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DOC", "SECTIONS", "SpecIssue", "doc_ref", "format_issue", "issue_json", "section_for"]

# Hints point at the section of the user-facing format reference that explains the field.
DOC = "docs/spec-format.md"
SECTIONS = (
    "states",
    "steps",
    "resources",
    "tokens",
    "transitions",
    "decisions",
    "loops",
    "parallel-groups",
    "artifacts",
    "runtime-mode",
    "variables",
)
_STATE_KEY_SECTION = {
    "run": "steps",
    "toolRef": "steps",
    "tool_ref": "steps",
    "resources": "resources",
    "transitions": "transitions",
    "writesDecision": "decisions",
    "writes_decision": "decisions",
    "loop": "loops",
    "sequence": "loops",
    "parallel": "parallel-groups",
    "parallelCount": "parallel-groups",
    "parallel_count": "parallel-groups",
    "maxConcurrency": "parallel-groups",
    "max_concurrency": "parallel-groups",
    "inputs": "artifacts",
    "outputs": "artifacts",
    "trigger": "runtime-mode",
    "params": "variables",
}


def doc_ref(section: str) -> str:
    """``docs/spec-format.md#<section>``: where a hint sends the reader."""
    return f"{DOC}#{section}"


def section_for(path: tuple[str | int, ...]) -> str:
    """The section of the format reference that documents the node at ``path``."""
    if not path:
        return "states"
    head = path[0]
    if head == "resources":
        return "resources"
    if head in ("config", "run"):
        return "variables"
    if head == "metadata":
        return "runtime-mode" if "executionMode" in path else "states"
    if head == "states" and len(path) >= 3:
        return _STATE_KEY_SECTION.get(str(path[2]), "states")
    return "states"


class SpecIssue(NamedTuple):
    """One located validation problem."""

    path: str
    message: str
    hint: str = ""
    line: int = 0
    column: int = 0
    state: str | None = None

    def headline(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def format_issue(issue: SpecIssue, file_label: str, lines: list[str] | None) -> str:
    """Render one issue as a readable block: location, source line, caret, hint."""
    where = file_label
    if issue.line:
        where = f"{file_label}:{issue.line}:{issue.column}"
    out = [f"{where}: {issue.headline()}"]
    if lines and 0 < issue.line <= len(lines):
        source = lines[issue.line - 1].rstrip("\n").expandtabs(1)
        if len(source) > 200:
            source = source[:200] + "…"
        out.append(f"  {issue.line:>4} | {source}")
        caret_col = max(issue.column, 1)
        out.append("       | " + " " * min(caret_col - 1, 200) + "^")
    if issue.hint:
        out.append(f"  hint: {issue.hint}")
    return "\n".join(out)


def issue_json(issue: SpecIssue) -> dict[str, object]:
    """The stable JSON shape of one issue (cli.md §1.1)."""
    return {
        "path": issue.path,
        "state": issue.state,
        "line": issue.line,
        "column": issue.column,
        "message": issue.message,
        "hint": issue.hint,
    }
