"""npa's small files: private modes, one writer at a time per file, atomic replacement.

``private_dirs`` creates a directory and every missing parent 0700, whatever
the process umask (``Path.mkdir(parents=True)`` gives the parents the umask's
mode: ``npa configure`` used to create ``NPA_HOME`` 0755).

``locked(path)`` serializes every read-merge-write of ``path`` across
processes: an exclusive ``flock`` on the sidecar ``.<name>.lock`` beside it,
held until the block ends. A reader outside the lock still sees the old
content or the new, because ``replace`` never writes in place: the bytes go
to a temporary file of this process and thread (0600, created exclusively,
never through a symlink), are fsynced, renamed over ``path``, and the
directory is fsynced. The lock file is never removed: a newcomer would lock a
fresh inode while another process still holds the old one. The wait for the
lock is bounded (``LOCK_WAIT_S``), so a stopped holder is reported, never
waited for forever.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from npa_infra.errors import ConfigError

__all__ = ["LOCK_WAIT_S", "lock_path", "locked", "private_dirs", "replace"]

LOCK_WAIT_S = 30.0


def private_dirs(path: Path) -> None:
    """Create ``path`` and each missing parent with mode 0700 (an existing one is left as is).

    Raises:
        OSError: a level cannot be created, or exists and is not a directory.
    """
    old = os.umask(0o077)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old)


def lock_path(path: Path) -> Path:
    """The sidecar lock file of ``path``."""
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path, *, wait: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold ``path``'s exclusive lock for the block (module docstring); creates its directory.

    Raises:
        ConfigError: the lock cannot be created, or another process held it for ``wait`` s.
    """
    try:
        private_dirs(path.parent)
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(
            f"cannot lock {path}: {exc.strerror or exc}",
            remedy=f"make {path.parent} a directory you own and can write (chmod 700)",
        ) from exc
    try:
        _acquire(fd, path, wait)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, path: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"another process has held the lock of {path} for {wait:.0f} s",
                remedy="let the other npa command finish (or stop it), then rerun",
                details={"lock": str(lock_path(path))},
            )
        time.sleep(0.005 + random.random() * 0.02)  # a holder writes a few bytes and ends


def replace(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, mode 0600; ``durable``: fsynced too (the
    file and its directory), so the new content survives a crash right after the call.

    Raises:
        OSError: the temporary file cannot be written or renamed (nothing changed then).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # a crashed earlier run of this very pid and thread
    fd = os.open(temporary, flags, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # a failed write leaves the old file, and no litter
        raise
    if not durable:
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
