"""Running one external command: the seam every CLI adapter is tested through.

``Runner.run`` takes argv, the complete child environment, optional stdin
text and a timeout, and returns a ``CommandResult``; it never raises for a
non-zero exit. ``SubprocessRunner`` is the real one. With ``on_line`` it
reads the child's stdout and stderr as they arrive and hands over each
complete line (without its line ending) the moment it is read, so a launch's
output can be shown live; the result still holds the whole output.

No child acts unnoticed (faults.md, process death with a live child):

- Every child dies with npa. It runs in its own session (a terminal's Ctrl-C
  reaches npa, which decides), with the parent-death signal set to SIGKILL
  where ``setpriv`` exists, so a SIGKILLed npa takes its child along. When npa
  itself is interrupted (SIGINT, or SIGTERM/SIGHUP turned into an interrupt by
  ``npa_infra.signals``) while it waits, the child's whole process group is
  killed and reaped before the interrupt goes on.
- A child that may create something (``on_started`` given: the launch) starts
  gated: a shell holds it, reading its stdin (a pipe), until the parent has
  made its identity durable and writes the release; the command then runs with
  stdin closed. If npa dies before that, the gate reads end-of-file and the
  command never runs (exit ``GATE_CLOSED``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from npa_infra.errors import InvariantError
from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot import children
from npa_infra.skypilot.models import CommandResult

__all__ = ["GATE_CLOSED", "Runner", "SubprocessRunner"]

GATE_CLOSED = 125  # the gate's exit code when its parent died before releasing it
# Reads one line from the gate (its stdin), then becomes the command with stdin closed.
_GATE = 'IFS= read -r _ || exit 125; exec "$@" </dev/null'


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult: ...


def _prefix() -> list[str]:
    setpriv = _setpriv(os.environ.get("PATH", ""))
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


@functools.lru_cache(maxsize=4)
def _setpriv(search_path: str) -> str | None:
    """``setpriv`` on this PATH, looked up once per PATH, not once per ``sky`` call."""
    return shutil.which("setpriv", path=search_path)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


class SubprocessRunner:
    """Runs the command as a child process in its own session; see the module docstring."""

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult:
        command = list(argv)
        gate_read = gate_write = -1
        launched = [*_prefix(), *command]
        child_stdin: int = subprocess.PIPE if stdin is not None else subprocess.DEVNULL
        if on_started is not None:
            if stdin is not None:
                raise InvariantError("a gated command reads its gate on stdin: it takes no input")
            gate_read, gate_write = os.pipe()
            child_stdin = gate_read
            launched = [*_prefix(), "/bin/sh", "-c", _GATE, "npa-gate", *command]
        try:
            proc = subprocess.Popen(
                launched,
                env=dict(env),
                cwd=cwd,
                stdin=child_stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(tuple(argv), 127, "", f"{argv[0]}: not found")
        except PermissionError:
            return CommandResult(tuple(argv), 126, "", f"{argv[0]}: permission denied")
        finally:
            if gate_read >= 0:
                os.close(gate_read)
        try:
            if on_started is not None:
                try:
                    on_started(children.identify(proc.pid))  # durable before the child may act
                    os.write(gate_write, b"go\n")
                finally:
                    os.close(gate_write)
            if on_line is not None:
                out, err, timed_out = _stream(proc, stdin, timeout, on_line)
                return CommandResult(tuple(argv), proc.returncode, out, err, timed_out=timed_out)
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return CommandResult(tuple(argv), proc.returncode, out, err, timed_out=True)
        except BaseException:
            # interrupted (or the identity could not be recorded): the child must not outlive us
            _kill_group(proc)
            proc.wait()
            raise
        return CommandResult(tuple(argv), proc.returncode, out, err)


_LINE_END = re.compile(r"\r\n|\r|\n")


class _Lines:
    """One pipe's bytes: complete lines as they arrive, and the whole text at the end."""

    def __init__(self) -> None:
        self.data = bytearray()
        self._sent = 0  # bytes already handed over as lines

    def feed(self, chunk: bytes) -> list[str]:
        self.data += chunk
        pending = bytes(self.data[self._sent :])
        # a trailing \r may be the first half of \r\n: wait for the next byte
        scan = pending[:-1] if pending.endswith(b"\r") else pending
        end = max(scan.rfind(b"\n"), scan.rfind(b"\r"))
        if end < 0:
            return []
        self._sent += end + 1
        return _LINE_END.split(_decode(pending[: end + 1]))[:-1]

    def close(self) -> list[str]:
        rest = _decode(bytes(self.data[self._sent :]))
        self._sent = len(self.data)
        lines = _LINE_END.split(rest) if rest else []
        return lines[:-1] if lines and not lines[-1] else lines  # a last line ended by \r

    def text(self) -> str:
        return _LINE_END.sub("\n", _decode(bytes(self.data)))  # universal newlines, as text mode


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _stream(
    proc: subprocess.Popen[str],
    stdin: str | None,
    timeout: float | None,
    on_line: Callable[[str], None],
) -> tuple[str, str, bool]:
    """Read both pipes as output arrives, calling ``on_line`` per complete line.

    Returns (stdout, stderr, timed_out). Past ``timeout`` the child's group is
    killed and what it wrote is still read to the end. ``on_line`` runs on this
    thread, so an interrupt or its own error reaches ``run``, which kills the child.
    """
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin)  # small answers to prompts only: written before reading
            proc.stdin.close()
    pipes = {proc.stdout.fileno(): _Lines(), proc.stderr.fileno(): _Lines()}
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in pipes:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = selector.select(wait)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                timed_out, deadline = True, None
                _kill_group(proc)
                continue
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                lines = pipes[key.fd].feed(chunk) if chunk else pipes[key.fd].close()
                if not chunk:
                    selector.unregister(key.fd)
                for line in lines:
                    on_line(line)
    proc.wait()
    out, err = (lines.text() for lines in pipes.values())
    return out, err, timed_out
