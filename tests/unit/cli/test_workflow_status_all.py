"""``workflow status --all``: usage errors, the empty-journal JSON shape, the exit-code rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.workflow.operations import runstatus


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["workbench", "workflow", "status", *args], catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))


@pytest.mark.parametrize(
    "args",
    [(), ("run-1", "--all"), ("--stack", "s"), ("--json",)],
    ids=["neither", "both", "stack_alone", "json_neither"],
)
def test_status_all_bad_arguments_usage_error_exit_64_no_json(args: tuple[str, ...]) -> None:
    code, stdout, stderr = _invoke(*args)
    assert code == 64
    assert stdout == ""
    assert "exactly one of RUN_ID or --all" in stderr


def test_status_all_no_journal_json_empty_runs_exit_0() -> None:
    code, stdout, _ = _invoke("--all", "--json")
    assert code == 0
    assert json.loads(stdout) == {"status": "ok", "runs": [], "queue_state": "not_read"}


def test_status_all_no_journal_text_says_nothing_in_progress() -> None:
    code, stdout, _ = _invoke("--all", "--stack", "dev")
    assert code == 0
    assert "no run in progress" in stdout


@pytest.mark.parametrize(
    ("codes", "worst"),
    [((), 0), ((0, 0), 0), ((0, 2), 2), ((2, 0, 2), 2), ((2, 1, 0), 1), ((0, 1), 1)],
    ids=["none", "all_ok", "unproven", "unproven_twice", "failed_first", "failed"],
)
def test_worst_exit_code_ranks_1_then_2_then_0(codes: tuple[int, ...], worst: int) -> None:
    assert runstatus.worst_exit_code(codes) == worst


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("PARTIAL", 2),
        ("DEGRADED", 2),
        ("VERIFICATION_UNAVAILABLE", 2),
        ("ROLLED_BACK", 0),
        ("PLANNED", 0),
        ("RECOVERY_REQUIRED", 2),
        ("RUNNING", 0),
        ("FAILED_SETUP", 1),
        ("NOT_FOUND", 1),
    ],
    ids=["partial", "degraded", "unverified", "rolled_back", "planned", "recovery_required",
         "running", "failed", "not_found"],
)  # fmt: skip
def test_status_exit_code_one_table_not_proven_2_never_3_or_4(status: str, code: int) -> None:
    # issue 17: 3 is "no Pulumi engine" on every command, so status keeps to 0, 1 and 2
    assert runstatus.exit_code_for(status) == code


@pytest.mark.parametrize(
    ("statuses", "code", "label"),
    [
        ((), 0, "ok"),
        (("RUNNING", "PLANNED"), 0, "ok"),
        (("RUNNING", "PARTIAL"), 2, "unproven"),
        (("RECOVERY_REQUIRED", "RUNNING"), 2, "unproven"),
        (("PARTIAL", "CANCELLED"), 1, "failed"),
    ],
    ids=["none", "all_ok", "partial", "recovery_required", "cancelled"],
)
def test_all_status_report_status_field_follows_exit_code(
    statuses: tuple[str, ...], code: int, label: str
) -> None:
    report = runstatus.AllStatusReport(
        runs=[runstatus.StatusReport(f"r{i}", None, s, None, None) for i, s in enumerate(statuses)]
    )

    assert (report.exit_code, report.to_json()["status"]) == (code, label)


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (("nobody-1", "--watch", "--json"), 1, "NOT_FOUND"),
        (("--all", "--watch", "--json"), 0, "ok"),
    ],
    ids=["unknown_run", "all_no_journal"],
)
def test_status_watch_json_nothing_in_progress_prints_one_document(
    args: tuple[str, ...], code: int, status: str | None
) -> None:
    exit_code, stdout, stderr = _invoke(*args)
    assert exit_code == code
    payload = json.loads(stdout)  # one document, never one per refresh
    assert payload.get("status") == status
    assert stderr == ""
