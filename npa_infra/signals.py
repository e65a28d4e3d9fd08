"""Termination signals become interrupts, so every command stops the way Ctrl-C stops it.

By default SIGTERM and SIGHUP end Python at once: no ``finally`` runs, no
interrupted record is written, and a child may be left acting. ``install``
turns the first of them into ``Terminated``, a ``KeyboardInterrupt``, so the
code that makes Ctrl-C durable (the launch driver's interrupted record, the
runner killing its child, the lock release) handles them too. Later signals
are remembered but not raised again, so that cleanup is not cut short; SIGKILL
remains for a process that must stop now. The command then exits with
128 + the signal number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["HANDLED", "Terminated", "exit_code", "install", "received"]

HANDLED = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handle(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    if len(_received) == 1:
        raise Terminated(signum)


def install() -> None:
    """Handle SIGTERM and SIGHUP as interrupts (main thread only, as Python requires)."""
    for number in HANDLED:
        signal.signal(number, _handle)


def received() -> int | None:
    """The first termination signal this process got, if any."""
    return _received[0] if _received else None


def exit_code(default: int = 130) -> int:
    """128 + the first termination signal, else ``default`` (an interrupt: 130)."""
    first = received()
    return 128 + first if first is not None else default
