"""Running one external command: the seam every CLI adapter is tested through.

``Runner.run`` takes argv, the complete child environment, optional stdin
text and a timeout, and returns a ``CommandResult``; it never raises for a
non-zero exit. ``SubprocessRunner`` is the real one. A timed-out child is
killed with its whole process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Protocol

from npa_infra.skypilot.models import CommandResult

__all__ = ["Runner", "SubprocessRunner"]


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult: ...


class SubprocessRunner:
    """Runs the command as a child process in its own process group."""

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        try:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(tuple(argv), 127, "", f"{argv[0]}: not found")
        except PermissionError:
            return CommandResult(tuple(argv), 126, "", f"{argv[0]}: permission denied")
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return CommandResult(tuple(argv), proc.returncode, out, err, timed_out=True)
        return CommandResult(tuple(argv), proc.returncode, out, err)
