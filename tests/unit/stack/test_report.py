"""The diff report and its PR body: pure functions of events (cli.md §6, pulumi.md §7)."""

from __future__ import annotations

import json

import pytest

from npa_infra.stack import report
from npa_infra.stack.models import preview_exit_code
from npa_infra.stack.report import DiagnosticEvent, StepEvent

URN = "urn:pulumi:dev::npa-infra::kubernetes:core/v1:Secret::pull"


def build(
    events: list[StepEvent | DiagnosticEvent], summary: dict[str, int]
) -> report.PreviewReport:
    return report.build(events, summary, project="npa-infra", stack="dev", backend_url="file:///s")


def test_build_schema_exact_keys() -> None:
    doc = build(
        [StepEvent("update", URN, "kubernetes:core/v1:Secret", ("stringData",))], {"update": 1}
    ).to_json()

    assert list(doc) == [
        "schema",
        "project",
        "stack",
        "backend_url",
        "changes_present",
        "change_summary",
        "steps",
        "diagnostics",
        "output_changes_counted",
        "status",
    ]
    assert doc["schema"] == "npa.stack.preview.v1"
    assert doc["output_changes_counted"] is False
    assert doc["change_summary"] == {"create": 0, "update": 1, "delete": 0, "replace": 0, "same": 0}
    assert doc["steps"] == [
        {
            "op": "update",
            "urn": URN,
            "type": "kubernetes:core/v1:Secret",
            "name": "pull",
            "diff_keys": ["stringData"],
            "replace_keys": [],
            "detailed_diff": {},
        }
    ]
    json.dumps(doc)


@pytest.mark.parametrize(
    ("events", "summary", "present"),
    [
        ([StepEvent("same", URN, "t")], {"same": 1}, False),
        ([StepEvent("read", URN, "t")], {}, False),
        ([StepEvent("refresh", URN, "t")], {"same": 1}, False),
        ([StepEvent("refresh", URN, "t", ("spec",))], {"same": 1}, True),
        ([StepEvent("refresh", URN, "t", gone=True)], {}, True),
        ([StepEvent("delete", URN, "t")], {"delete": 1}, True),
        ([], {"create": 1}, True),
    ],
    ids=[
        "same",
        "read",
        "refresh-clean",
        "refresh-drift",
        "refresh-gone",
        "delete",
        "summary-only",
    ],
)
def test_changes_present_rule(
    events: list[StepEvent | DiagnosticEvent], summary: dict[str, int], present: bool
) -> None:
    assert build(events, summary).changes_present is present


def test_replace_halves_folded() -> None:
    halves = [
        StepEvent(op, URN, "t", ("fingerprint",), ("fingerprint",))
        for op in ("create-replacement", "replace", "delete-replaced")
    ]

    steps = build(halves, {"replace": 1}).steps

    assert [(s.op, s.replace_keys) for s in steps] == [("replace", ["fingerprint"])]


def test_diagnostics_ansi_stripped_debug_dropped() -> None:
    events: list[StepEvent | DiagnosticEvent] = [
        DiagnosticEvent("error", "\x1b[31mforbidden\x1b[0m\n", URN),
        DiagnosticEvent("debug", "noise"),
    ]

    diagnostics = build(events, {}).diagnostics

    assert [(d.severity, d.message, d.urn) for d in diagnostics] == [("error", "forbidden", URN)]


@pytest.mark.parametrize(
    ("present", "detailed", "expect", "code"),
    [
        (False, True, True, 0),
        (True, False, False, 0),
        (True, True, False, 2),
        (True, False, True, 2),
    ],
    ids=["clean", "changes-no-flag", "detailed", "expect-no-changes"],
)
def test_preview_exit_code(present: bool, detailed: bool, expect: bool, code: int) -> None:
    events = [StepEvent("create", URN, "t")] if present else []
    doc = build(events, {})

    assert preview_exit_code(doc, detailed_exitcode=detailed, expect_no_changes=expect) == code


def test_markdown_changes_table_marker_and_note() -> None:
    events = [StepEvent("replace", URN, "kubernetes:core/v1:Secret", keys=("type",))]
    body = report.markdown(build(events, {"replace": 1, "same": 8}))

    lines = body.splitlines()
    assert lines[0] == "<!-- npa-stack-preview npa-infra/dev -->"
    assert (
        "**Changes present:** 0 to create, 0 to update, 1 to replace, 0 to delete, 8 unchanged."
        in body
    )
    assert "<details><summary>1 step(s)</summary>" in body
    assert "| replace | `pull` | `kubernetes:core/v1:Secret` |  | type |" in body
    assert "pulumi/pulumi#5087" in body


def test_markdown_no_changes_line() -> None:
    body = report.markdown(build([], {"same": 9}))

    assert "**No changes.** 9 resource(s) unchanged." in body
    assert "<details>" not in body


def test_markdown_trimmed_to_limit_and_ansi_free() -> None:
    events = [StepEvent("create", f"{URN}{i}", "t\x1b[1m", (f"k{'x' * 300}",)) for i in range(400)]

    body = report.markdown(build(events, {"create": 400}))

    assert len(body) <= report.MARKDOWN_LIMIT + 1
    assert "more step(s) truncated" in body
    assert "\x1b" not in body
    assert body.rstrip().endswith(
        "_Stack output changes are not counted by the engine (pulumi/pulumi#5087)._"
    )
