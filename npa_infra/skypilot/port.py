"""Who owns the fixed local API server ports (skypilot-0.12.md §7.3).

A SkyPilot client auto-starts, or silently reuses, a local API server on
127.0.0.1:46580 (and 50011). A server started under another HOME has another
user, database and kubeconfig, so before the first ``sky`` call npa finds the
listening process through /proc and compares its HOME and SKYPILOT_USER_ID
with the isolated directory's. Unknown ownership fails closed.

``PortChecker`` is the observation's seam: the drift gate, ``npa skypilot
status`` and the bootstrap self-test take one, and ``Services.api_ports`` holds
the real one (``check_port``), so a test injects what the ports show instead of
reading the machine's own. ``check_port(net=...)`` reads another network
namespace's listening tables (``/proc/<pid>/net``) while the owner is still
found among this host's processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

__all__ = ["API_PORT", "EXTRA_PORT", "Ownership", "PortCheck", "PortChecker", "check_port"]

API_PORT = 46580
EXTRA_PORT = 50011


class Ownership(StrEnum):
    FREE = "free"  # nothing listens: the first call starts our own server
    OURS = "ours"  # the listener runs with our HOME and user id
    FOREIGN = "foreign"  # another HOME or user id: refuse
    UNKNOWN = "unknown"  # a listener we cannot attribute: refuse


class PortCheck(NamedTuple):
    port: int
    ownership: Ownership
    pid: int | None = None
    home: str | None = None
    user_id: str | None = None

    @property
    def safe(self) -> bool:
        return self.ownership in (Ownership.FREE, Ownership.OURS)


def _listening_inodes(port: int, net: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (net / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A = LISTEN
                continue
            _addr, _, port_hex = fields[1].rpartition(":")
            if int(port_hex, 16) == port:
                inodes.add(fields[9])
    return inodes


def _owner(inodes: set[str], proc: Path) -> int | None:
    targets = {f"socket:[{inode}]" for inode in inodes}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in targets:
                    return int(entry.name)
        except OSError:
            continue
    return None


def _environ(pid: int, proc: Path) -> dict[str, str] | None:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def check_port(
    port: int,
    expected: Mapping[str, str],
    *,
    proc: Path = Path("/proc"),
    net: Path | None = None,
) -> PortCheck:
    """Compare the listener on ``port`` with the expected HOME and SKYPILOT_USER_ID.

    ``net`` is the directory of the listening tables (default ``proc/net``: this
    process's network namespace); the owner is looked up among ``proc``'s processes.
    """
    inodes = _listening_inodes(port, proc / "net" if net is None else net)
    if not inodes:
        return PortCheck(port, Ownership.FREE)
    pid = _owner(inodes, proc)
    if pid is None:
        return PortCheck(port, Ownership.UNKNOWN)
    environ = _environ(pid, proc)
    if environ is None:
        return PortCheck(port, Ownership.UNKNOWN, pid)
    home, user = environ.get("HOME"), environ.get("SKYPILOT_USER_ID")
    ours = home == expected.get("HOME") and user == expected.get("SKYPILOT_USER_ID")
    return PortCheck(port, Ownership.OURS if ours else Ownership.FOREIGN, pid, home, user)


# (port, the environment a listener must have to be ours) -> what listens there
PortChecker = Callable[[int, Mapping[str, str]], PortCheck]
