"""Ecosystem conventions of the ``npa`` CLI (issue 17), through the typer app.

``--version``, ``-h``, shell completion for bash/zsh/fish, ``python -m
npa_infra``; one exit-code table (usage errors 64, "not proven" keeps 2); an
unexpected error under ``--json`` is one JSON object that never carries the
exception's text.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow.target.services import Services

WORKFLOWS = Path(__file__).resolve().parents[3] / "workflows" / "testing"
LOOP_DECISION = WORKFLOWS / "loop-decision.yaml"
CANARY = "npa-canary-s3cr3t-0f9a"  # a secret an exception's text might carry


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    # "" (falsy) rather than absent, so that the --debug test's os.environ write is undone
    monkeypatch.setenv("NPA_DEBUG", "")
    for name in ("NPA_TOOL_CATALOG", "NPA_REGISTRY", "NPA_SRC_S3_URI"):
        monkeypatch.delenv(name, raising=False)


def npa(*args: object, obj: Services | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], obj=obj, catch_exceptions=False)


# -- --version, -h ----------------------------------------------------------------------
def test_version_flag_prints_package_version_exit_0() -> None:
    result = npa("--version")

    assert result.exit_code == 0
    assert result.stdout == f"npa {metadata.version('npa-infra')}\n"


@pytest.mark.parametrize(
    "command",
    [
        (),
        ("workbench",),
        ("workbench", "workflow"),
        ("workbench", "workflow", "submit"),
        ("skypilot", "status"),
        ("stack", "preview"),
        ("cleanup",),
        ("cluster", "down"),
    ],
    ids=[
        "root",
        "workbench",
        "workflow",
        "submit",
        "skypilot-status",
        "preview",
        "cleanup",
        "down",
    ],
)
def test_short_help_flag_same_as_long_exit_0(command: tuple[str, ...]) -> None:
    short, long = npa(*command, "-h"), npa(*command, "--help")

    assert (short.exit_code, long.exit_code) == (0, 0)
    assert short.stdout == long.stdout and "Usage: " in short.stdout
    assert "-h, --help" in short.stdout


# -- completion -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o default -F _npa_completion npa"),
        ("zsh", "#compdef npa"),
        ("fish", "complete --command npa"),
    ],
    ids=["bash", "zsh", "fish"],
)
def test_show_completion_prints_the_shells_script_exit_0(shell: str, marker: str) -> None:
    result = npa("--show-completion", shell)

    assert result.exit_code == 0, result.stderr
    assert marker in result.stdout
    assert "_NPA_COMPLETE=complete_" + shell in result.stdout


def test_show_completion_unknown_shell_usage_exit_64() -> None:
    result = npa("--show-completion", "tcsh")

    assert result.exit_code == 64
    assert result.stdout == "" and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr


def test_completion_request_of_the_bash_script_answers_subcommands() -> None:
    env = {"_NPA_COMPLETE": "complete_bash", "COMP_WORDS": "npa work", "COMP_CWORD": "1"}

    result = CliRunner().invoke(app, [], env=env, prog_name="npa", catch_exceptions=False)

    assert result.exit_code == 0
    assert result.stdout.split() == ["workbench"]


# -- python -m npa_infra ----------------------------------------------------------------
def test_python_m_npa_infra_help_and_version_exit_0() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "npa_infra", "--help"], capture_output=True, text=True
    )
    version = subprocess.run(
        [sys.executable, "-m", "npa_infra", "--version"], capture_output=True, text=True
    )

    assert helped.returncode == 0, helped.stderr
    assert "workbench" in helped.stdout and "Usage: " in helped.stdout
    assert (version.returncode, version.stdout) == (0, f"npa {metadata.version('npa-infra')}\n")


# -- exit codes -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ("--no-such-flag",),
        ("workbench", "workflow", "status", "--no-such-flag"),
        ("workbench", "workflow", "submit", LOOP_DECISION, "--no-such-flag"),
        ("skypilot", "status", "--no-such-flag"),
        ("stack", "preview", "--no-such-flag"),
        ("cleanup", "--no-such-flag", "--json"),
    ],
    ids=["root", "status", "submit", "skypilot-status", "stack-preview", "cleanup-json"],
)
def test_unknown_flag_usage_exit_64_nothing_on_stdout(argv: tuple[object, ...]) -> None:
    result = npa(*argv)

    assert result.exit_code == 64
    assert result.stdout == ""
    assert "No such option: --no-such-flag" in result.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ("workbench", "workflow", "plan-spec", LOOP_DECISION, "--max-concurrency", "many"),
            "Invalid value for '--max-concurrency'",
        ),
        (("workbench", "workflow", "plan-spec"), "Missing argument"),
        (("workbench", "workflow", "no-such-command"), "No such command"),
        (  # the project's own UsageError (npa_infra.errors): a bad --var
            ("workbench", "workflow", "validate-spec", LOOP_DECISION, "--var", "novalue"),
            "Invalid --var format",
        ),
        (  # mutually exclusive options
            (
                "workbench",
                "workflow",
                "submit",
                LOOP_DECISION,
                "--run-id",
                "a",
                "--resume-run",
                "b",
            ),
            "mutually exclusive",
        ),
    ],
    ids=["bad-value", "missing-argument", "unknown-command", "bad-var", "exclusive"],
)
def test_bad_command_line_usage_exit_64(argv: tuple[object, ...], fragment: str) -> None:
    result = npa(*argv)

    assert result.exit_code == 64
    assert fragment in result.stderr


def test_unproven_verdict_still_exit_2_with_json() -> None:
    # without --infra a Kubernetes step's pull is not proven: exit 2 is a verdict, not usage
    result = npa(
        "workbench",
        "workflow",
        "preflight-images",
        LOOP_DECISION,
        "--json",
        obj=Services(registry=lambda *_: FakeRegistry()),
    )

    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["status"] == "unproven"
    assert {row["status"] for row in payload["rows"]} == {"target_pull_unverified"}


# -- unexpected errors ------------------------------------------------------------------
def _exploding(*_: object) -> FakeRegistry:
    raise RuntimeError(f"registry login failed with token {CANARY}")


def _preflight_exploding(*extra: str) -> Result:
    return npa(
        *extra,
        "workbench",
        "workflow",
        "preflight-images",
        LOOP_DECISION,
        "--json",
        obj=Services(registry=_exploding),
    )


def test_unexpected_error_json_one_object_status_error_no_exception_text_exit_1() -> None:
    result = _preflight_exploding()

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "error"
    error = payload["error"]
    assert error["category"] == "internal"
    # where: the innermost frame of npa's own code (the factory that raised is the test's)
    assert re.fullmatch(r"npa_infra(\.\w+)+:\d+", error["details"]["origin"])
    assert error["message"] == f"unexpected RuntimeError in {error['details']['origin']}"
    assert error["remedy"] == "rerun with --debug and report the traceback"
    assert error["details"]["type"] == "RuntimeError"
    assert CANARY not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: unexpected RuntimeError")


def test_unexpected_error_text_one_line_no_exception_text_exit_1() -> None:
    result = npa(
        "workbench",
        "workflow",
        "preflight-images",
        LOOP_DECISION,
        obj=Services(registry=_exploding),
    )

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        result.stderr.splitlines()[0],
        "Hint: rerun with --debug and report the traceback",
    ]
    assert result.stderr.startswith("Error: unexpected RuntimeError in ")
    assert CANARY not in result.stderr


def test_unexpected_error_debug_traceback_on_stderr_json_still_on_stdout() -> None:
    result = _preflight_exploding("--debug")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["category"] == "internal"
    assert "Traceback (most recent call last)" in result.stderr
    assert CANARY not in result.stdout  # the traceback is on stderr, asked for by --debug


# -- JSON objects with a status ---------------------------------------------------------
def test_preflight_images_json_one_object_status_platform_rows() -> None:
    result = npa(
        "workbench",
        "workflow",
        "preflight-images",
        LOOP_DECISION,
        "--json",
        obj=Services(registry=lambda *_: FakeRegistry()),
    )

    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "platform", "rows"}
    assert payload["rows"] and all({"image", "status", "digest"} <= set(r) for r in payload["rows"])


def test_skypilot_status_json_object_with_status_not_installed_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("NPA_SKYPILOT_BIN", raising=False)
    monkeypatch.setenv("NPA_SKYPILOT_VENV_PATH", str(tmp_path / "no-venv"))

    result = npa("skypilot", "status", "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert (payload["status"], payload["ok"]) == ("not_installed", False)
