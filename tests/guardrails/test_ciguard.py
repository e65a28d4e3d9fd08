"""``.ci/run``'s guard (issue 31): a run that leaves a listening process behind fails, naming it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

GUARD = Path(__file__).resolve().parents[1] / "support" / "ciguard.py"

# Detaches twice (a session of its own, its parent gone), says where it is, then waits. The
# command ends only once the detached process has bound its port and said so (a pipe), so the
# guard looks at a listener, not at one still starting.
DAEMON = textwrap.dedent(
    """\
    import os, socket, sys, time
    ready, done = os.pipe()
    if os.fork():
        os.close(done)
        os.read(ready, 1)
        sys.exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    server = socket.create_server(("127.0.0.1", 0)) if sys.argv[1] == "listen" else None
    port = server.getsockname()[1] if server else 0
    print(os.getpid(), port, flush=True)
    os.write(done, b"x")
    time.sleep(3600)
    """
)


def _guard(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GUARD), "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ciguard_detached_listener_left_behind_fails_naming_pid_and_port_then_killed() -> None:
    result = _guard(sys.executable, "-c", DAEMON, "listen")

    pid, port = map(int, result.stdout.split())
    assert result.returncode == 1
    assert "a listening process outlived" in result.stderr
    assert f"pid {pid} listening on {port}:" in result.stderr
    assert not _alive(pid)


def test_ciguard_detached_quiet_process_is_named_and_killed_but_passes() -> None:
    result = _guard(sys.executable, "-c", DAEMON, "quiet")

    pid, _ = map(int, result.stdout.split())
    assert result.returncode == 0
    assert "a process outlived" in result.stderr and f"pid {pid}:" in result.stderr
    assert not _alive(pid)


def test_ciguard_failing_command_keeps_its_exit_status() -> None:
    assert _guard("sh", "-c", "exit 3").returncode == 3


def test_ciguard_clean_command_passes_silently() -> None:
    result = _guard("sh", "-c", "sleep 0.01 & wait")

    assert (result.returncode, result.stderr) == (0, "")
