"""Every test runs beside an unrelated listener on 127.0.0.1:46580 and 50011 (issue 31).

SkyPilot's local API server uses those two fixed ports, and another tool's server
may hold them on any machine the suite runs on. No test may depend on them being
free: a test of the drift gate's port rule injects what the ports show
(``Services.api_ports``, ``port_check=``), and the real-SkyPilot tests run their
server in a private network namespace (``privatehost``). To prove it for the
whole suite at once, this session-wide fixture starts a process that is nothing
of ours (its own HOME, no SkyPilot user id) listening on both ports for as long
as the tests run, so a test that still reads the machine's own ports fails
whatever the machine it runs on. The listener binds with ``SO_REUSEPORT``, so two
test sessions on one machine each hold both ports for as long as each runs (a session
never relies on another's listener, which may end first). A port held by a process
that does not share it (a real SkyPilot server) stays as it is: that is an unrelated
listener too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from npa_infra.skypilot import port

__all__ = ["PORTS", "UNRELATED_HOME", "HeldPorts", "held_ports"]

UNRELATED_HOME = "/nonexistent/npa-tests-unrelated-listener"
PORTS = (port.API_PORT, port.EXTRA_PORT)

# Binds what it can, says which, then holds them until its stdin closes.
_LISTENER = textwrap.dedent(
    """\
    import socket, sys
    held = []
    for number in map(int, sys.argv[1:]):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # another session's too
        try:
            sock.bind(("127.0.0.1", number))
        except OSError:
            continue
        sock.listen()
        held.append((number, sock))
    print(" ".join(str(number) for number, _ in held), flush=True)
    sys.stdin.read()
    """
)


class HeldPorts(NamedTuple):
    pid: int  # the unrelated listener
    bound: tuple[int, ...]  # the ports it bound; the others were already held


@pytest.fixture(scope="session", autouse=True)
def held_ports() -> Iterator[HeldPorts]:
    """An unrelated process listening on 46580 and 50011 during the whole session."""
    listener = subprocess.Popen(
        [sys.executable, "-c", _LISTENER, *map(str, PORTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"HOME": UNRELATED_HOME, "PATH": "/usr/bin:/bin"},
    )
    assert listener.stdout is not None and listener.stdin is not None
    bound = tuple(int(n) for n in listener.stdout.readline().split())  # waits for the binds
    try:
        yield HeldPorts(listener.pid, bound)
    finally:
        listener.stdin.close()
        listener.wait(timeout=30)
