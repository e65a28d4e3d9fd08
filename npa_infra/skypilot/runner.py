"""Running one external command: the seam every CLI adapter is tested through.

``Runner.run`` takes argv, the complete child environment, optional stdin
text and a timeout, and returns a ``CommandResult``; it never raises for a
non-zero exit. ``SubprocessRunner`` is the real one. It reads the child's
stdout and stderr as they arrive; with ``on_line`` it hands over each complete
line (without its line ending) the moment it is read, so a launch's output can
be shown live.

npa's memory does not grow with what a child prints (issue 24): each pipe keeps
its first ``HEAD_BYTES`` and a bounded tail (``STREAM_TAIL_BYTES`` when the
lines are streamed to ``on_line``, which keeps them; ``WHOLE_TAIL_BYTES`` when
the output is the answer, as a queue's JSON is), and a line longer than
``LINE_BYTES`` is handed over in parts. A result that lost bytes says so
(``CommandResult.truncated``), so an answer that must be whole (a queue read)
is never parsed from a part of it. With ``on_wait``, a child that has printed
nothing for a second is reported (``on_wait(elapsed)``) then, and every
``WAIT_EVERY`` seconds after, until it ends or its timeout kills it.

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

__all__ = [
    "GATE_CLOSED",
    "HEAD_BYTES",
    "LINE_BYTES",
    "STREAM_TAIL_BYTES",
    "WAIT_EVERY",
    "WHOLE_TAIL_BYTES",
    "Runner",
    "SubprocessRunner",
]

GATE_CLOSED = 125  # the gate's exit code when its parent died before releasing it
HEAD_BYTES = 256 * 1024  # the start of each pipe (a launch's request id comes early)
STREAM_TAIL_BYTES = 1024 * 1024  # streamed output: enough for classification and errors
WHOLE_TAIL_BYTES = 32 * 1024 * 1024  # an answer read whole (queue JSON); past it, truncated
LINE_BYTES = 64 * 1024  # a longer line is handed to on_line in parts
WAIT_FIRST = 1.0  # a silent child is reported after this long...
WAIT_EVERY = 15.0  # ...and then this often
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
        on_wait: Callable[[float], None] | None = None,
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
        on_wait: Callable[[float], None] | None = None,
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
            tail = STREAM_TAIL_BYTES if on_line is not None else WHOLE_TAIL_BYTES
            pipes = (_Lines(tail=tail), _Lines(tail=tail))
            timed_out = _stream(proc, stdin, timeout, pipes, on_line, on_wait)
        except BaseException:
            # interrupted (or the identity could not be recorded): the child must not outlive us
            _kill_group(proc)
            proc.wait()
            raise
        out, err = (pipe.text() for pipe in pipes)
        return CommandResult(
            tuple(argv),
            proc.returncode,
            out,
            err,
            timed_out=timed_out,
            truncated=any(pipe.dropped for pipe in pipes),
        )


_LINE_END = re.compile(r"\r\n|\r|\n")


class _Lines:
    """One pipe's bytes: complete lines as they arrive; its start and a bounded tail kept."""

    def __init__(self, *, head: int = HEAD_BYTES, tail: int = STREAM_TAIL_BYTES) -> None:
        self._head_limit, self._tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()  # what follows the head, trimmed to the last ``tail`` bytes
        self.dropped = 0  # bytes between head and tail that were not kept
        self._partial = bytearray()  # the line not yet ended

    def feed(self, chunk: bytes) -> list[str]:
        self._keep(chunk)
        self._partial += chunk
        # a trailing \r may be the first half of \r\n: wait for the next byte
        scan = self._partial[:-1] if self._partial.endswith(b"\r") else self._partial
        end = max(scan.rfind(b"\n"), scan.rfind(b"\r"))
        lines: list[str] = []
        if end >= 0:
            lines = _LINE_END.split(_decode(bytes(self._partial[: end + 1])))[:-1]
            del self._partial[: end + 1]
        while len(self._partial) > LINE_BYTES:  # a line without end: hand it over in parts
            lines.append(_decode(bytes(self._partial[:LINE_BYTES])))
            del self._partial[:LINE_BYTES]
        return lines

    def close(self) -> list[str]:
        rest = _decode(bytes(self._partial))
        self._partial.clear()
        lines = _LINE_END.split(rest) if rest else []
        return lines[:-1] if lines and not lines[-1] else lines  # a last line ended by \r

    def text(self) -> str:
        """What was kept, universal newlines (as text mode); a gap is marked on its own line."""
        self._trim(self._tail_limit)
        if not self.dropped:
            return _LINE_END.sub("\n", _decode(bytes(self.head + self.tail)))
        tail = bytes(self.tail)
        cut = min((i for i in (tail.find(b"\n"), tail.find(b"\r")) if i >= 0), default=-1)
        gap = f"\n[npa kept only the start and the end: {self.dropped} bytes omitted]\n"
        kept = _decode(bytes(self.head)) + gap + _decode(tail[cut + 1 :])
        return _LINE_END.sub("\n", kept)

    def _keep(self, chunk: bytes) -> None:
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self._tail_limit:  # trimmed in batches: amortised copying
            self._trim(self._tail_limit)

    def _trim(self, limit: int) -> None:
        excess = len(self.tail) - limit
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _stream(
    proc: subprocess.Popen[str],
    stdin: str | None,
    timeout: float | None,
    pipes: tuple[_Lines, _Lines],
    on_line: Callable[[str], None] | None,
    on_wait: Callable[[float], None] | None,
) -> bool:
    """Read both pipes (stdout, stderr) as output arrives, into ``pipes``; True if timed out.

    Each complete line goes to ``on_line`` (when given) as it is read. Past
    ``timeout`` the child's group is killed and what it wrote is still read to
    the end. A second without output is reported to ``on_wait`` (then every
    ``WAIT_EVERY`` seconds). The callbacks run on this thread, so an interrupt
    or their own error reaches ``run``, which kills the child.
    """
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin)  # small answers to prompts only: written before reading
            proc.stdin.close()
    readers = {proc.stdout.fileno(): pipes[0], proc.stderr.fileno(): pipes[1]}
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    next_report = started + WAIT_FIRST if on_wait is not None else None
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in readers:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            wakes = [t for t in (deadline, next_report) if t is not None]
            ready = selector.select(max(min(wakes) - now, 0.0) if wakes else None)
            now = time.monotonic()
            if not ready and deadline is not None and now >= deadline:
                timed_out, deadline = True, None
                _kill_group(proc)
                continue
            if ready and next_report is not None:
                next_report = now + WAIT_FIRST  # output arrived: not silent
            elif on_wait is not None and next_report is not None and now >= next_report:
                on_wait(now - started)
                next_report = now + WAIT_EVERY
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                lines = readers[key.fd].feed(chunk) if chunk else readers[key.fd].close()
                if not chunk:
                    selector.unregister(key.fd)
                if on_line is not None:
                    for line in lines:
                        on_line(line)
    proc.wait()
    return timed_out
