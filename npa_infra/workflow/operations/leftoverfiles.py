"""The local files ``npa cleanup`` finds, measures, locks and removes (issue 16).

Where the project writes its caches (each path is created by the module named):

- ``$NPA_HOME/rendered/<run>/``: submit's rendered task YAML (``submission.pipeline``);
- ``$NPA_HOME/cache/image-pull-probe.json``: the pull-probe cache (``preflight.probe_cache``);
- ``$NPA_HOME/cache/skypilot-gate.json``: the drift gate's venv reading (``skypilot.venvmeta``);
- ``$NPA_HOME/skypilot-venv`` (a symlink or a venv), ``skypilot-venv.versions/`` and the
  bootstrap journal beside it (``skypilot.bootstrap``);
- ``$NPA_HOME/skypilot-state/<name>/``: an isolated SkyPilot state (``skypilot.isolation``),
  and in every state directory ``submissions/<run>/`` (``execution.taskfiles``) and
  ``supervision/`` (the tick files, ``tickshare``).

Each directory above is marked as npa's when npa creates it (``localstate.marker``):
``leftovercaches`` accepts that marker, a journaled run id, or npa's own fixed name in
its own home as the proof that npa made a cache; anything else is never removed.

Never touched: the journal, the configuration, credentials, stack files, the
lock files (``journal.lock``: deleting one lets a newcomer lock a fresh inode),
the in-flight and probe-pod records (mutation records, not caches), Pulumi's state.

Locks are probed the way the live path holds them: an existing lock file is
opened read-only (never created, never written) and ``flock``-ed exclusively
without blocking; one another process holds is reported, one this process
got is held until ``release`` so that no submit or cancel of that run starts
while its caches are removed. A plan-only submit takes no lock; the rendered
YAML it is writing is written again by the next submit of that run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "BOOTSTRAP_LOCK",
    "Locks",
    "human_size",
    "remove_npa_files",
    "remove_path",
    "size_of",
    "venv_paths",
]

BOOTSTRAP_LOCK = ".skypilot-venv.bootstrap.lock"


def size_of(path: Path) -> int:
    """Bytes of the regular files at or under ``path``; symlinks are not followed."""
    try:
        info = path.lstat()
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size if stat.S_ISREG(info.st_mode) else 0
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in (*files, *dirs):
            with contextlib.suppress(OSError):
                entry = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(entry.st_mode):
                    total += entry.st_size
    return total


def human_size(count: int) -> str:
    """``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"  # pragma: no cover


def venv_paths(home: Path) -> tuple[Path, ...]:
    """The venv link (or plain venv), its version directories and bootstrap journal."""
    link = home / "skypilot-venv"
    return (link, home / "skypilot-venv.versions", home / ".skypilot-venv.bootstrap-journal.json")


def remove_path(path: Path) -> None:
    """Remove a file, a symlink (never its target) or a directory tree; absent is done.

    Raises:
        OSError: the removal failed part-way.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)  # does not follow symlinks inside the tree
    else:
        path.unlink()


def remove_npa_files(directory: Path, remove: Callable[[Path], None]) -> list[str]:
    """Remove the task YAML files npa writes in a per-run directory (``*.yaml`` and their
    ``*.yaml.tmp``, regular files only), then the directory if that empties it; returns
    the names of what is left (the directory stays then). For a directory only the
    journal proves npa's (``runs.leftovers.Removal.NPA_FILES``).

    Raises:
        OSError: a removal failed.
    """
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    left = []
    for entry in entries:
        own = entry.name.endswith((".yaml", ".yaml.tmp")) and entry.is_file(follow_symlinks=False)
        if own:
            remove(Path(entry.path))
        else:
            left.append(entry.name)
    if not left:
        remove(directory)
    return left


class Locks:
    """Lock files probed (and, when got, held) by this process; see the module docstring."""

    def __init__(self) -> None:
        self._held: dict[Path, int] = {}
        self.busy: set[Path] = set()

    def probe(self, path: Path) -> bool:
        """Whether another process holds ``path``; a missing or unusable file is not held."""
        if path in self._held:
            return False
        if path in self.busy:
            return True
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.busy.add(path)
            return True
        except OSError:
            os.close(fd)
            return False
        self._held[path] = fd
        return False

    def any_busy(self, paths: list[Path]) -> bool:
        return any([self.probe(p) for p in paths])  # probe (and hold) every one of them

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)  # closing the descriptor releases the flock
        self._held.clear()
