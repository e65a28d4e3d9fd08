"""A private host for one real SkyPilot API server: its own network and PID namespace (issue 31).

SkyPilot's local API server binds the fixed 127.0.0.1:46580 and 50011, and when
its main process stops its request-queue manager and workers stay behind
(team-mode.md §6.1), so a polite ``sky api stop`` proves nothing. A
``PrivateHost`` is ``unshare --net --pid --fork --mount-proc`` around a holder
that brings its loopback up and then waits on its stdin:

- every command runs inside through ``nsenter`` into the holder's network, PID
  and mount namespaces (the mount namespace carries the namespace's own
  ``/proc``, so the server's process bookkeeping sees its own PIDs), so a server
  that ``sky`` auto-starts binds the namespace's own ports and is one of its
  processes;
- ``close()`` SIGKILLs the namespace's init, and the kernel kills every other
  process of the namespace; it then proves that none is left (no process on this
  host has the namespace's PID inode) and fails naming the PIDs if one is;
- if the test process dies instead, the holder reads end-of-file on its stdin
  and exits, which ends the namespace the same way (``--kill-child`` also kills
  it when ``unshare`` itself is killed).

``relay(port)`` makes a loopback TCP port of this host reachable at the same
address inside (a Kubernetes double, say): the listening socket is created in the
namespace by this thread for the moment of the bind (``setns``, network only), and
each connection is piped to this host's port.

``leftover_sky_processes`` finds ``sky`` processes of this PID namespace whose
HOME lies under a directory, for the check that no test leaves one behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot import port
from npa_infra.skypilot.models import CommandResult
from npa_infra.skypilot.runner import Runner

__all__ = [
    "HostProcess",
    "NamespacedRunner",
    "PrivateHost",
    "PrivateHostError",
    "leftover_sky_processes",
    "missing_tools",
]

_CLONE_NEWNET = 0x40000000
# Loopback up, then "ready"; the holder ends when its stdin (a pipe from this process) closes.
_HOLD = "ip link set lo up && echo ready && exec cat >/dev/null"
_UNSHARE = ("unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child")
_TOOLS = {"unshare": "util-linux", "nsenter": "util-linux", "ip": "iproute2"}
_PROC = Path("/proc")


class PrivateHostError(RuntimeError):
    """The namespaces could not be made here (no privilege, or a tool is missing)."""


class HostProcess(NamedTuple):
    pid: int
    argv: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.argv[:160]})"


def missing_tools() -> list[str]:
    """The tools a private host needs that this machine lacks, with their Debian package."""
    return [f"{tool} ({package})" for tool, package in _TOOLS.items() if not shutil.which(tool)]


def _argv(pid: int) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"


def _namespace(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(_PROC / str(pid) / "ns" / kind)
    except OSError:
        return None


def _processes_in(pid_namespace: str) -> list[HostProcess]:
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and _namespace(entry.name, "pid") == pid_namespace:
            found.append(HostProcess(int(entry.name), _argv(int(entry.name))))
    return found


def _home(pid: int) -> str | None:
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"HOME="):
            return item[5:].decode(errors="replace")
    return None


def leftover_sky_processes(root: Path) -> list[HostProcess]:
    """Processes of this PID namespace running SkyPilot with HOME under ``root``."""
    own = _namespace("self", "pid")
    found = []
    for process in _processes_in(own) if own else []:
        home = _home(process.pid)
        if process.pid == os.getpid() or home is None:
            continue
        if Path(home).is_relative_to(root) and "sky" in process.argv:
            found.append(process)
    return found


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


class _Relay:
    """A listener inside the namespace whose every connection is piped to this host's port."""

    def __init__(self, server: socket.socket, target: int) -> None:
        self._server = server
        self._target = target
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                inside, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                outside = socket.create_connection(("127.0.0.1", self._target), timeout=30)
            except OSError:
                inside.close()
                continue
            outside.settimeout(None)
            for source, sink in ((inside, outside), (outside, inside)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=10)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class PrivateHost:
    """One private network and PID namespace, its loopback up (module docstring)."""

    def __init__(self, holder: subprocess.Popen[str], init: int) -> None:
        self._holder = holder
        self.init = init  # this host's PID of the namespace's init
        self.pid_namespace = _namespace(init, "pid") or ""
        self._relays: list[_Relay] = []

    @classmethod
    def start(cls) -> PrivateHost:
        """Make the namespaces and wait until the holder says its loopback is up.

        Raises:
            PrivateHostError: a tool is missing or ``unshare`` is refused here.
        """
        if missing := missing_tools():
            raise PrivateHostError(f"missing {', '.join(missing)}: install them (apt-get)")
        holder = subprocess.Popen(
            [*_UNSHARE, "sh", "-c", _HOLD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stderr is not None
        if holder.stdout.readline().strip() != "ready":  # blocks until the holder answers
            holder.kill()
            _, err = holder.communicate(timeout=30)
            raise PrivateHostError(f"unshare --net --pid refused here: {err.strip()[:300]}")
        children = _PROC / str(holder.pid) / "task" / str(holder.pid) / "children"
        return cls(holder, int(children.read_text().split()[0]))

    # -- running inside ----------------------------------------------------------------------
    def wrap(self, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """``argv`` run inside the namespaces, in ``cwd`` (default: this process's)."""
        where = cwd or os.getcwd()
        return [
            "nsenter",
            f"--target={self.init}",
            "--net",
            "--pid",
            "--mount",
            f"--wd={where}",
            "--",
            *argv,
        ]

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside and wait for it."""
        return subprocess.run(
            self.wrap(argv),
            env=None if env is None else dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def runner(
        self, inner: Runner, only: Callable[[Sequence[str]], bool] | None = None
    ) -> NamespacedRunner:
        """``inner`` with each command (or each ``only`` selects) run inside."""
        return NamespacedRunner(self, inner, only)

    def port_check(self, number: int, expected: Mapping[str, str]) -> port.PortCheck:
        """``port.check_port`` on the namespace's own listening tables."""
        return port.check_port(number, expected, net=_PROC / str(self.init) / "net")

    def relay(self, number: int) -> None:
        """Make this host's 127.0.0.1:``number`` reachable inside at the same address."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(_PROC / str(self.init) / "ns" / "net", os.O_RDONLY)
        try:
            _setns(target)
            try:
                server = socket.create_server(("127.0.0.1", number))
            finally:
                _setns(own)
        finally:
            os.close(own)
            os.close(target)
        self._relays.append(_Relay(server, number))

    # -- the end -------------------------------------------------------------------------------
    def processes(self) -> list[HostProcess]:
        """Every process of the namespace, by this host's PID."""
        return _processes_in(self.pid_namespace) if self.pid_namespace else []

    def close(self) -> None:
        """End every process of the namespace; fail naming any that is still there after.

        Raises:
            AssertionError: a process of the namespace outlived its init.
        """
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.init, signal.SIGKILL)
        try:
            self._holder.communicate(timeout=60)  # unshare returns once its init is reaped
        except subprocess.TimeoutExpired:
            self._holder.kill()
            self._holder.communicate(timeout=30)
        for relay in self._relays:
            relay.close()
        left = self.processes()
        for process in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        assert not left, "processes of the private host outlived it: " + "; ".join(
            p.describe() for p in left
        )


class NamespacedRunner:
    """A ``Runner`` that runs commands inside a ``PrivateHost`` (all, or those ``only`` picks)."""

    def __init__(
        self,
        host: PrivateHost,
        inner: Runner,
        only: Callable[[Sequence[str]], bool] | None = None,
    ) -> None:
        self.host = host
        self.inner = inner
        self._only = only

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
        inside = self._only is None or self._only(argv)
        command = self.host.wrap(argv, cwd) if inside else list(argv)
        extras: dict[str, Callable[..., None]] = {}  # only what is asked for, as SkyCli passes
        if on_started is not None:
            extras["on_started"] = on_started
        if on_line is not None:
            extras["on_line"] = on_line
        result = self.inner.run(command, env=env, cwd=cwd, stdin=stdin, timeout=timeout, **extras)
        return result._replace(argv=tuple(argv))  # the command as the caller asked for it
