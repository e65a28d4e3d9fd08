"""The console entry point pauses the GC only while importing, then runs the CLI."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from npa_infra.cli import entry, main


def test_entry_run_reenables_gc_and_calls_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(main, "run", lambda: seen.append(gc.isenabled()))
    try:
        entry.run()
    finally:
        gc.unfreeze()
    assert seen == [True]
    assert gc.isenabled()


def test_entry_console_help_exits_zero() -> None:
    code = "import sys; sys.argv = ['npa', '--help']; from npa_infra.cli.entry import run; run()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0
    assert "workbench" in done.stdout
