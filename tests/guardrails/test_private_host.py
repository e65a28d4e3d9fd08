"""The private host the real-SkyPilot tests run their servers in (issue 31).

A server that detaches inside (its own session, its parent gone, as SkyPilot's
API server and its request-queue manager do) binds the namespace's own fixed
ports while this machine's are held, is seen as ours by the namespace's port
check, and ends with the host. The leftover check names a ``sky`` process that
outlives a test by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.skypilot import port
from npa_infra.skypilot.runner import SubprocessRunner
from tests.support.heldports import HeldPorts
from tests.support.privatehost import PrivateHost, PrivateHostError, leftover_sky_processes

# Detaches twice, binds both fixed ports, says so, and waits to be killed.
SERVER = textwrap.dedent(
    """\
    import os, socket, sys, time
    if os.fork():
        sys.exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    held = [socket.create_server(("127.0.0.1", n)) for n in (46580, 50011)]
    print("bound", flush=True)
    time.sleep(3600)
    """
)


@pytest.fixture
def host() -> Iterator[PrivateHost]:
    try:
        made = PrivateHost.start()
    except PrivateHostError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    try:
        yield made
    finally:
        made.close()


def _net(pid: int | str) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_private_host_detached_server_binds_own_fixed_ports_and_ends_with_the_host(
    host: PrivateHost, held_ports: HeldPorts, tmp_path: Path
) -> None:
    env = {"HOME": str(tmp_path / "home"), "SKYPILOT_USER_ID": "npa-private1", "PATH": "/usr/bin"}
    started = subprocess.Popen(
        host.wrap([sys.executable, "-c", SERVER]), env=env, stdout=subprocess.PIPE, text=True
    )
    assert started.stdout is not None
    assert started.stdout.readline().strip() == "bound"  # though this machine's ports are held
    started.wait(timeout=60)  # its parent is gone: the server lives on, detached, inside

    inside = [p for p in host.processes() if "time.sleep(3600)" in p.argv]
    assert len(inside) == 1
    server = inside[0].pid
    found = host.port_check(port.API_PORT, env)
    assert (found.ownership, found.pid) == (port.Ownership.OURS, server)
    assert host.port_check(port.EXTRA_PORT, env).ownership is port.Ownership.OURS
    assert port.check_port(port.API_PORT, env).pid != server  # this machine's: the held one

    host.close()

    assert not Path(f"/proc/{server}").exists()
    assert host.processes() == []


def test_private_host_runner_runs_sky_inside_with_the_callers_argv(host: PrivateHost) -> None:
    argv = ["sh", "-c", "readlink /proc/self/ns/net"]
    runner = host.runner(SubprocessRunner(), only=lambda a: a[0] == "sh")

    inside = runner.run(argv, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    outside = runner.run(["readlink", "/proc/self/ns/net"], env={"PATH": "/usr/bin:/bin"})

    assert inside.argv == tuple(argv)
    assert inside.stdout.strip() == _net(host.init) != _net("self")
    assert outside.stdout.strip() == _net("self")


def test_private_host_relay_reaches_this_machines_port(host: PrivateHost) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    number = server.getsockname()[1]

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(64).upper())

    threading.Thread(target=answer, daemon=True).start()
    host.relay(number)
    client = (
        "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])));"
        "s.sendall(b'ping'); s.shutdown(socket.SHUT_WR); print(s.recv(64).decode())"
    )

    done = host.run([sys.executable, "-c", client, str(number)], timeout=60)

    assert (done.returncode, done.stdout.strip()) == (0, "PING"), done.stderr
    server.close()


def test_leftover_sky_processes_names_a_detached_sky_under_the_root_only(tmp_path: Path) -> None:
    sky = [sys.executable, "-c", "import time; time.sleep(3600)", "sky", "api", "start"]
    mine = subprocess.Popen(sky, env={"HOME": str(tmp_path / "h")})
    other = subprocess.Popen(sky, env={"HOME": "/elsewhere"})
    try:
        found = leftover_sky_processes(tmp_path)
    finally:
        for proc in (mine, other):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    assert [p.pid for p in found] == [mine.pid]
    assert found[0].describe().startswith(f"pid {mine.pid} (")
