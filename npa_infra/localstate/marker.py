"""The marker npa leaves in each directory it creates for its caches (issue 24).

``npa cleanup --yes`` removes a directory only when it can prove npa made it;
this file is that proof. ``make_dir`` creates a cache directory (0700, and
its missing parents) and marks it, when npa created it just now or finds it
empty; a directory that already holds something without a marker is left
unmarked, because npa cannot tell whose that content is (a user's
``--state-dir`` may hold a ``supervision/`` of their own). The marker is
``.npa-made``, a 0600 regular file holding ``{"schema": "npa.made.v1",
"kind": <what the directory is>}``; ``holds`` accepts only that: not a
symlink, not another user's file, not a different content.

Marked (``kind``): ``rendered_yaml`` (``$NPA_HOME/rendered/<run>``, submit),
``task_yaml`` (``<state>/submissions/<run>``, each launch), ``tick_files``
(``<state>/supervision``, tickshare), ``state_dir`` (a SkyPilot state
directory npa prepared, or a project's ``--state-dir`` npa configured).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from npa_infra.localstate import privatefile

__all__ = ["MARKER", "SCHEMA", "holds", "make_dir", "mark"]

MARKER = ".npa-made"
SCHEMA = "npa.made.v1"
_MAX_BYTES = 4096


def make_dir(path: Path, kind: str) -> None:
    """Create ``path`` (0700, with its parents) and mark it when it is new or empty.

    Raises:
        OSError: the directory or its marker cannot be written.
    """
    existed = path.is_dir()
    privatefile.private_dirs(path)
    if path.is_symlink():
        return  # a link to elsewhere is never npa's to mark
    if not existed or not any(True for _ in os.scandir(path)):
        mark(path, kind)


def mark(path: Path, kind: str) -> None:
    """Write the marker into the directory ``path`` (atomic, 0600); an existing one is kept.

    Raises:
        OSError: the marker cannot be written.
    """
    if holds(path):
        return
    body = json.dumps({"schema": SCHEMA, "kind": kind}, sort_keys=True).encode()
    # not fsynced: a marker a crash loses only keeps the directory from cleanup (fail-safe),
    # and a submit --plan-only pays no sync for it
    privatefile.replace(path / MARKER, body, durable=False)


def holds(path: Path) -> bool:
    """Whether the directory ``path`` (not a symlink) holds npa's marker (module docstring)."""
    try:
        if stat.S_ISLNK(path.lstat().st_mode):
            return False
        fd = os.open(path / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return False
        raw = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8")) if len(raw) <= _MAX_BYTES else None
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("schema") == SCHEMA
