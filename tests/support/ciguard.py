"""Run a command and fail if it leaves a listening process behind (issue 31): ``.ci/run``'s guard.

``python3 tests/support/ciguard.py -- make test`` makes itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the command starts stays its
descendant even after its parent exits or it starts a session of its own (as
SkyPilot's API server and its request-queue manager do). When the command ends,
each descendant still alive is listed; one that listens on a TCP port fails the
run, named by PID, port and command line. Every leftover is then killed and
reaped, so the machine is left as it was found.

Standard library only: ``.ci/run`` starts it before ``make test`` has built the
venv. Exit status: the command's own when it failed, else 1 when it left a
listener, else 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER = 36


class Leftover(NamedTuple):
    pid: int
    argv: str
    ports: tuple[int, ...]  # the TCP ports it listens on

    def describe(self) -> str:
        where = f" listening on {', '.join(map(str, self.ports))}" if self.ports else ""
        return f"pid {self.pid}{where}: {self.argv[:200]}"


def _parent(pid: int) -> int | None:
    """The parent of a living process; None for a zombie (nothing left but its exit status)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces: the fields follow the last ')'
    state, parent = stat.rsplit(")", 1)[1].split()[:2]
    return None if state == "Z" else int(parent)


def descendants(root: int) -> list[int]:
    """Every living process whose chain of parents reaches ``root`` (not ``root`` itself)."""
    parents = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (parent := _parent(int(entry.name))) is not None:
            parents[int(entry.name)] = parent
    found = []
    for pid in parents:
        seen, current = set(), parents.get(pid)
        while current is not None and current not in seen and current != root:
            seen.add(current)
            current = parents.get(current)
        if current == root and pid != root:
            found.append(pid)
    return sorted(found)


def _listening(pid: int) -> dict[str, int]:
    """Socket inode -> port of every TCP listener in ``pid``'s network namespace."""
    found: dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) >= 10 and fields[3] == "0A":  # 0A: LISTEN
                found[fields[9]] = int(fields[1].rpartition(":")[2], 16)
    return found


def _ports(pid: int) -> tuple[int, ...]:
    tables = _listening(pid)
    ports = set()
    try:
        for fd in (PROC / str(pid) / "fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in tables:
                    ports.add(tables[link[8:-1]])
    except OSError:
        pass
    return tuple(sorted(ports))


def _argv(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"


def leftovers(root: int) -> list[Leftover]:
    """The living descendants of ``root``, each with the TCP ports it listens on."""
    return [Leftover(pid, _argv(pid), _ports(pid)) for pid in descendants(root)]


def _end() -> None:
    """Kill every descendant and reap each one that was handed to this subreaper."""
    while True:
        for pid in descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)  # a killed process ends promptly; no child left ends the loop
        except ChildProcessError:
            return


def main(argv: Sequence[str]) -> int:
    command = list(argv[1:] if argv and argv[0] == "--" else argv)
    if not command:
        print("usage: ciguard.py -- COMMAND [ARG...]", file=sys.stderr)
        return 64
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("ciguard: cannot become a child subreaper", file=sys.stderr)
        return 1
    code = subprocess.call(command)
    found = leftovers(os.getpid())
    listeners = [item for item in found if item.ports]
    for item in found:
        kind = "a listening process" if item.ports else "a process"
        print(f"ciguard: {kind} outlived `{' '.join(command)}`: {item.describe()}", file=sys.stderr)
    _end()
    if code:
        return code
    if listeners:
        print(
            f"ciguard: {len(listeners)} process(es) started by the run still listened "
            "when it ended (killed now); the test that started each must end it",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
