"""``workflow logs`` and ``workflow list``: usage errors and the answers without a journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "npa-home"
    monkeypatch.setenv("NPA_HOME", str(home))
    return home


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["workbench", "workflow", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("logs",), "Missing argument 'RUN_ID'"),
        (("logs", "r-1", "--wave", "-1"), "--wave"),
        (("logs", "r-1", "--attempt", "0"), "--attempt"),
        (("list", "r-1"), "unexpected extra argument"),
    ],
    ids=["no-run", "negative-wave", "attempt-zero", "list-extra-argument"],
)
def test_logs_and_list_bad_arguments_are_usage_errors_without_json(
    args: tuple[str, ...], text: str
) -> None:
    code, stdout, stderr = _invoke(*args, "--json")
    assert code != 0
    assert stdout == ""
    assert text in stderr and "Usage:" in stderr


def test_logs_without_journal_unknown_run_exit_1(_home: Path) -> None:
    code, stdout, _ = _invoke("logs", "r-1", "--json")
    assert (code, json.loads(stdout)["status"]) == (1, "not_found")
    assert not _home.exists()  # reading never creates the home


def test_list_without_journal_empty_object_exit_0() -> None:
    code, stdout, _ = _invoke("list", "--json")
    assert (code, json.loads(stdout)["runs"]) == (0, [])
