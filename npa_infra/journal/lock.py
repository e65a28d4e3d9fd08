"""The per-run lock: at most one npa process works on a run at a time.

Two submits of the same run, racing, must never both launch. Before a
command touches a run it takes an exclusive, non-blocking ``flock`` on
``$NPA_HOME/locks/<stack or default>/<run_id>.lock`` (runtime-reference.md
§1 "Lock": directories 0700, file 0600, symlinks refused). The kernel drops
a ``flock`` when its holder dies, however it dies, so a crashed command
never leaves the run locked; that is why the lock file is never deleted
(deleting it would let a newcomer lock a fresh inode while an old holder
still holds the unlinked one).

The holder writes who it is (pid, host, argv, run, stack, since when) into
the file; a refused caller reads that back and names the holder in
``RunLockedError``. Values after credential flags in argv are masked.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from npa_infra.errors import ConfigError, InvariantError, RunLockedError, UsageError
from npa_infra.runs.runview import Holder

__all__ = [
    "MASKED_FLAGS",
    "STATE_LOCKS",
    "LockKind",
    "RunLock",
    "holder_state",
    "lock_path",
    "state_lock_path",
]

STATE_LOCKS = "npa-locks"  # under a SkyPilot state directory
# ``runs``: held by a submit for the whole run; ``launches``: held while a launch may be
# in flight (each launch transaction) and by cancel, so the two exclude each other.
LockKind = Literal["runs", "launches"]

# Flags whose value is a credential (runtime-reference.md §1 record fields).
MASKED_FLAGS = frozenset(
    {"--kubeconfig", "--token", "--certificate-authority", "--client-key", "--password"}
)
_HOLDER_BYTES = 64 * 1024


def _file_name(what: str, name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UsageError(
            f"{what} {name!r} cannot name a lock file",
            remedy=f"use a {what} made of letters, digits, '-', '_' and '.'",
        )
    return name


def lock_path(home: Path, stack: str | None, run_id: str) -> Path:
    """The lock file of one run in one npa home.

    Raises:
        UsageError: the stack or run id cannot be a file name.
    """
    stack_part = _file_name("stack", stack or "default")
    return home / "locks" / stack_part / f"{_file_name('run id', run_id)}.lock"


def state_lock_path(state_dir: Path, kind: LockKind, run_id: str) -> Path:
    """The lock of one run in the SkyPilot state directory its jobs belong to.

    Every npa process that can launch into that state, from any npa home, finds
    the same file, so the launch identity (state directory, run) is locked once
    on the machine (faults.md, concurrent operators).

    Raises:
        UsageError: the run id cannot be a file name.
    """
    return state_dir / STATE_LOCKS / kind / f"{_file_name('run id', run_id)}.lock"


def _masked(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    mask_next = False
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if mask_next:
            out.append("***")
        elif eq and flag in MASKED_FLAGS:
            out.append(f"{flag}=***")
        else:
            out.append(arg)
        mask_next = arg in MASKED_FLAGS
    return out


class RunLock:
    """An exclusive lock on one run; see the module docstring. The constructor does no I/O."""

    def __init__(
        self,
        home: Path,
        stack: str | None,
        run_id: str,
        *,
        argv: Sequence[str],
        now: float,
        path: Path | None = None,
    ) -> None:
        self.path = path if path is not None else lock_path(home, stack, run_id)
        self.run_id = run_id
        self.stack = stack
        self._argv = _masked(argv)
        self._now = now
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def in_state(
        cls,
        state_dir: Path,
        kind: LockKind,
        run_id: str,
        *,
        stack: str | None,
        argv: Sequence[str],
        now: float,
    ) -> RunLock:
        """The run's lock of ``kind`` in its SkyPilot state directory (``state_lock_path``)."""
        path = state_lock_path(state_dir, kind, run_id)
        return cls(state_dir, stack, run_id, argv=argv, now=now, path=path)

    def acquire(
        self,
        *,
        wait: float = 0.0,
        on_wait: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Take the lock and record this process as its holder.

        With ``wait`` > 0 a held lock is waited for, up to that many seconds;
        ``on_wait`` is told the holder once, when the wait begins.

        Raises:
            RunLockedError: another process holds it (past ``wait``); ``details``
                names the holder.
            ConfigError: the lock path is a symlink, not a regular file, not ours,
                or cannot be created.
        """
        if self._fd is not None:
            raise InvariantError(f"the lock of run {self.run_id} is already held by this object")
        _private_dir(self.path.parent.parent)
        _private_dir(self.path.parent)
        fd = _open_private(self.path)
        try:
            try:
                _flock(fd, wait, on_wait)
            except BlockingIOError:
                raise self._locked(_holder(fd)) from None
            details = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "argv": self._argv,
                "run_id": self.run_id,
                "stack": self.stack,
                "acquired_at": self._now,
            }
            payload = json.dumps(details, sort_keys=True).encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload, 0)
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            raise _config_error(self.path, exc) from exc
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (idempotent). The file stays; only its holder details go."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _locked(self, holder: dict[str, Any]) -> RunLockedError:
        pid, host, since = holder.get("pid"), holder.get("host"), holder.get("acquired_at")
        if pid is None:
            who = "another npa process (its details are unreadable)"
        else:
            who = f"pid {pid} on {host or 'an unknown host'}"
        when = ""
        if isinstance(since, int | float):
            when = " since " + datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return RunLockedError(
            f"run {self.run_id} is being submitted by {who}{when}",
            remedy="wait for that command to finish (or check "
            f"`npa workbench workflow status {self.run_id}`); a second submit of the same run "
            "is refused so that it cannot launch twice",
            details=holder,
        )


def _flock(fd: int, wait: float, on_wait: Callable[[dict[str, Any]], None] | None) -> None:
    """Lock ``fd``; a held lock is retried until ``wait`` seconds have passed.

    Raises:
        BlockingIOError: still held at the end of the wait.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        if wait <= 0:
            raise
    if on_wait is not None:
        on_wait(_holder(fd))
    deadline = time.monotonic() + wait
    pause = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
        # flock has no timed wait; a short, growing pause keeps the waiter cheap
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, 0.25)


def _private_dir(path: Path) -> None:
    old_umask = os.umask(0o077)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise _config_error(path, exc) from exc
    finally:
        os.umask(old_umask)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(
            f"lock directory {path} is not a directory owned by you (or is a symlink)",
            remedy=f"remove {path}; npa recreates it with mode 0700",
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def _open_private(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise _config_error(path, exc) from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(fd)
        raise ConfigError(
            f"lock file {path} is not a regular file owned by you",
            remedy=f"remove {path}; npa recreates it with mode 0600",
        )
    if stat.S_IMODE(info.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd


def holder_state(path: Path) -> Holder:
    """Whether the process recorded as holding the lock at ``path`` is alive (read only).

    Nothing is locked, so a reader (``status``, ``list``) can never make a submit
    fail to take the run. A released lock holds no details and a crashed holder's
    pid is gone: ``GONE``. A holder on another host, or details that cannot be
    read, is ``UNKNOWN``; a pid that may have been reused reads ``ALIVE`` (the
    safe side: the run then stays in progress).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Holder.GONE  # never taken from this home
    except OSError:
        return Holder.UNKNOWN
    try:
        raw = os.pread(fd, _HOLDER_BYTES, 0)
    except OSError:
        return Holder.UNKNOWN
    finally:
        os.close(fd)
    if not raw.strip():
        return Holder.GONE  # released: its holder truncated it
    details = _parsed(raw)
    pid = details.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return Holder.UNKNOWN
    if details.get("host") != socket.gethostname():
        return Holder.UNKNOWN
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return Holder.GONE
    except PermissionError:
        return Holder.ALIVE  # another user's live process
    return Holder.ALIVE


def _parsed(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _holder(fd: int) -> dict[str, Any]:
    """The holder's details, best effort: a holder mid-write or a damaged file gives {}."""
    try:
        value = json.loads(os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _config_error(path: Path, exc: OSError) -> ConfigError:
    if exc.errno == errno.ELOOP:
        return ConfigError(
            f"lock file {path} is a symlink; npa refuses to follow it",
            remedy=f"remove the link: rm {path}",
        )
    return ConfigError(
        f"cannot use lock {path}: {exc.strerror or exc}",
        remedy=f"check the ownership and permissions of {path.parent}",
        details={"errno": exc.errno},
    )
