"""Observing child processes: who a child is, whether it still runs, waiting for it to end.

Linux gives exact answers: ``/proc/<pid>/stat`` has the start time that tells
a child from a later process that reused its pid, the boot id tells a child
from one of an earlier boot, and a pidfd turns "wait until it exits" into an
event. Elsewhere only ``kill(pid, 0)`` is available, so a live pid counts as
the child (never as gone).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from pathlib import Path

from npa_infra.runs.children import ChildIdentity, ChildState

__all__ = ["identify", "observe", "wait_gone"]

_PROC = Path("/proc")
_BOOT_ID = _PROC / "sys/kernel/random/boot_id"


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) of ``pid``, or None when there is no such process."""
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[19])


def identify(pid: int) -> ChildIdentity:
    """The identity of a process this one just started."""
    found = _stat(pid) if _PROC.is_dir() else None
    return ChildIdentity(
        pid=pid,
        start_ticks=found[1] if found else 0,
        boot_id=_boot_id(),
        host=socket.gethostname(),
    )


def observe(child: ChildIdentity) -> ChildState:
    """Whether that very process still runs (a zombie cannot act, so it counts as gone)."""
    if child.host != socket.gethostname():
        return ChildState.UNKNOWN
    if child.boot_id and _boot_id() and child.boot_id != _boot_id():
        return ChildState.GONE
    if _PROC.is_dir() and child.start_ticks:
        try:
            found = _stat(child.pid)
        except (OSError, ValueError, IndexError):
            return ChildState.UNKNOWN
        if found is None or found[1] != child.start_ticks or found[0] in ("Z", "X"):
            return ChildState.GONE
        return ChildState.ALIVE
    try:
        os.kill(child.pid, 0)
    except ProcessLookupError:
        return ChildState.GONE
    except PermissionError:
        return ChildState.ALIVE  # a process with that pid exists; it may be the child
    return ChildState.ALIVE


def wait_gone(child: ChildIdentity, timeout: float) -> ChildState:
    """Wait up to ``timeout`` seconds for the child to exit; the state at the end.

    With a pidfd the wait is an event (the descriptor becomes readable when the
    process exits); a pid that is not ours to open is re-observed once at the end.
    """
    state = observe(child)
    if state is not ChildState.ALIVE:
        return state
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return observe(child)
    try:
        fd = opener(child.pid)
    except OSError:
        return observe(child)
    try:
        if observe(child) is not ChildState.ALIVE:  # the pid may have been reused before open
            return observe(child)
        with contextlib.suppress(InterruptedError):
            select.select([fd], [], [], max(timeout, 0.0))
    finally:
        os.close(fd)
    return observe(child)
