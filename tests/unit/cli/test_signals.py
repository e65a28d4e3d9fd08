"""SIGINT, SIGTERM and SIGHUP stop ``npa`` the same way, with 128 + the signal as exit code."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# The real console entry (main.run) around a command that blocks until interrupted: a
# stand-in for a submit waiting on its launch, whose interrupt handler writes its record.
SCRIPT = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {str(ROOT)!r})
    from npa_infra.cli import main

    def command(obj=None):  # as the Typer app is called: with the root context's object
        try:
            print("ready", flush=True)
            sys.stdin.read()
        except KeyboardInterrupt:
            print("interrupted record written", flush=True)
            raise SystemExit(130)  # what an InterruptedRunError exits with

    main.app = command
    main.run()
    """
)


def _started(script: str) -> subprocess.Popen[str]:
    """The script running, once it says its signal handlers are installed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.mark.parametrize(
    ("how", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["int", "term", "hup"],
)
def test_signal_stops_npa_with_a_durable_record_and_its_exit_code(
    how: signal.Signals, code: int
) -> None:
    proc = _started(SCRIPT)
    proc.send_signal(how)
    # stdin stays open until the child has exited: an EOF must not race the signal
    assert proc.wait(timeout=60) == code
    out, _ = proc.communicate()
    assert "interrupted record written" in out


def test_a_second_termination_signal_does_not_cut_the_cleanup_short() -> None:
    script = SCRIPT.replace(
        'print("interrupted record written", flush=True)',
        'print("cleaning", flush=True); import os, signal; '
        'os.kill(os.getpid(), signal.SIGTERM); print("interrupted record written", flush=True)',
    )
    proc = _started(script)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143  # stdin open until then: no EOF races the signal
    out, _ = proc.communicate()
    assert "interrupted record written" in out
