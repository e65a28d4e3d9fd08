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
    assert json.loads(stdout) == {"runs": [], "queue_state": "not_read"}


def test_status_all_no_journal_text_says_nothing_in_progress() -> None:
    code, stdout, _ = _invoke("--all", "--stack", "dev")
    assert code == 0
    assert "no run in progress" in stdout


@pytest.mark.parametrize(
    ("codes", "worst"),
    [((), 0), ((0, 0), 0), ((0, 4), 4), ((4, 3), 3), ((3, 2), 2), ((2, 1, 0), 1)],
    ids=["none", "all_ok", "not_submitted", "partial", "unverified", "failed"],
)
def test_worst_exit_code_ranks_1_then_2_3_4_0(codes: tuple[int, ...], worst: int) -> None:
    assert runstatus.worst_exit_code(codes) == worst


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (("nobody-1", "--watch", "--json"), 1, "NOT_FOUND"),
        (("--all", "--watch", "--json"), 0, None),
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
