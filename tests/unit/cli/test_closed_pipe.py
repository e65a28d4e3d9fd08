"""Text piped into a reader that goes away (``npa … | head -1``) ends quietly, as ``cat`` does.

Each command runs as a real process whose stdout is a pipe nobody reads: the
read end is closed before the child starts, so its first write meets EPIPE
deterministically (a ``head -1`` that exits after the first line races with how
much the child wrote before). The exit status is 141 (128 + SIGPIPE, what a
shell shows for ``cat``), stderr holds no error and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = str(ROOT / "workflows/main/sim2real.yaml")
WORKFLOW = ["workbench", "workflow"]
PLAN_ONLY = ["--plan-only", "--no-preflight-images", "--run-id", "piped-1"]


def _run_into_closed_pipe(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the child's first write is EPIPE
    env = {**os.environ, "NPA_HOME": str(home)}
    env.pop("NPA_DEBUG", None)
    try:
        return subprocess.run(
            [sys.executable, "-m", "npa_infra", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


def _plan(home: Path) -> None:
    """One plan-only run id in the journal, so ``list`` has a row to print."""
    env = {**os.environ, "NPA_HOME": str(home)}
    subprocess.run(
        [sys.executable, "-m", "npa_infra", *WORKFLOW, "submit", SPEC, *PLAN_ONLY],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=True,
    )


@pytest.mark.parametrize(
    "args",
    [
        [*WORKFLOW, "plan-spec", SPEC],
        [*WORKFLOW, "plan-spec", SPEC, "--format", "mermaid"],
        [*WORKFLOW, "plan-spec", SPEC, "--format", "dot"],
        [*WORKFLOW, "plan-spec", SPEC, "--json"],
        [*WORKFLOW, "catalog"],
        [*WORKFLOW, "list"],
        ["--help"],
    ],
    ids=["plan-text", "plan-mermaid", "plan-dot", "plan-json", "catalog", "list", "help"],
)
def test_cli_stdout_reader_gone_exits_141_quietly(args: list[str], tmp_path: Path) -> None:
    if args[-1] == "list":
        _plan(tmp_path)
    done = _run_into_closed_pipe(args, tmp_path)
    assert done.returncode == 141, done.stderr  # ExitCode.CLOSED_PIPE
    assert "Error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr


def test_cli_broken_pipe_elsewhere_is_still_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a closed stdout is quiet: a broken pipe of anything else stays an internal error."""
    from typer.testing import CliRunner

    from npa_infra.cli import main
    from npa_infra.workflow.planning import toolcatalog

    def broken(*_args: object, **_kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(toolcatalog, "list_catalog", broken)
    result = CliRunner().invoke(main.app, [*WORKFLOW, "catalog"])
    assert result.exit_code == 1
    assert "unexpected BrokenPipeError" in result.output
