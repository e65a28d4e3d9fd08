"""Run the simulator in the test's own process: a ``Runner`` for the real ``SkyCli``.

A simulated call through the wrapper costs a Python start (about 90 ms);
property-based tests make hundreds of calls, so this runner calls
``skysim.main.main`` directly instead, with the child's environment swapped
into ``os.environ`` and its streams captured, under a lock (one call at a
time, as ``os.environ`` is process-wide). The simulator's code, state file,
faults and the Kubernetes double are exactly those of the subprocess path.

``before`` is called with each argv (without the binary) before the call
runs: tests assert invariants against the simulator's state at the instant
of, say, every ``jobs launch``.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot.models import CommandResult

__all__ = ["InProcessRunner"]

_LOCK = threading.Lock()


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class InProcessRunner:
    """``Runner.run`` by calling the simulator's ``main`` (never a real ``sky``)."""

    def __init__(self, before: Callable[[list[str]], None] | None = None) -> None:
        self.before = before
        self.calls: list[list[str]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,  # no child: nothing to record
        on_line: Callable[[str], None] | None = None,  # handed every line once the call ends
        on_wait: Callable[[float], None] | None = None,  # never waited for: never called
    ) -> CommandResult:
        from tests.support.skysim import main

        args = [str(a) for a in argv[1:]]
        if self.before is not None:
            self.before(args)
        self.calls.append(args)
        out, err = io.StringIO(), io.StringIO()
        with (
            _LOCK,
            _environment(env),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            _stdin(stdin),
        ):
            code = main.main(args)
        if on_line is not None:
            for line in (out.getvalue() + err.getvalue()).splitlines():
                on_line(line)
        return CommandResult(tuple(argv), code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _stdin(text: str | None) -> Iterator[None]:
    import sys

    saved = sys.stdin
    sys.stdin = io.StringIO(text or "")
    try:
        yield
    finally:
        sys.stdin = saved
