"""Which directory a project's ``--state-dir`` may name (issue 24).

A project's SkyPilot state directory receives SkyPilot's state, npa's task
YAML and its tick files, and ``npa cleanup --yes`` later removes what npa made
there. So its path must mean the same directory wherever a later command runs,
and the directory must not hold anything npa did not put there:

``check_text`` (pure): absolute (a relative path would be resolved against the
directory each later command runs in); no leading ``~`` (the shell did not
expand it, and npa would store it literally); no control character (a newline
breaks every line-based report and log); not under ``/proc``, ``/sys`` or
``/dev`` (kernel views, not directories). Returned normalised (``..`` and
duplicate slashes resolved lexically, symlinks not followed).

``check_dir`` (reads): the directory is absent, empty, carries npa's marker
(``localstate.marker``), or is a state directory an earlier npa prepared (its
``user-id`` holds an id npa generated); a symlink, a file, or a directory
holding anything else is refused. ``claim`` creates (0700) and marks it, so
the proof exists before any run uses it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from npa_infra.errors import ConfigError, UsageError
from npa_infra.localstate import marker

__all__ = ["check_dir", "check_text", "claim"]

_KERNEL_VIEWS = ("/proc", "/sys", "/dev")
_NPA_USER_ID = re.compile(r"^npa-[0-9a-f]{6,64}$")
_REMEDY = (
    "pass an absolute path of a new or empty directory, e.g. --state-dir $HOME/.npa/state/NAME"
)


def check_text(raw: str) -> str:
    """The normalised absolute path ``raw`` names (module docstring).

    Raises:
        UsageError: empty, relative, ``~``-prefixed, with a control character, or a kernel view.
    """
    problem = ""
    if not raw.strip():
        problem = "is empty"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        problem = "holds a control character (a line break or a tab)"
    elif raw.startswith("~"):
        problem = "starts with '~', which the shell did not expand"
    elif not raw.startswith("/"):
        problem = "is relative: each later command would resolve it against its own directory"
    if problem:
        raise UsageError(f"--state-dir {raw!r} {problem}", remedy=_REMEDY)
    normal = os.path.normpath(raw)
    normal = "/" + normal.lstrip("/")  # POSIX keeps a leading '//'; one is enough
    parts = PurePosixPath(normal)
    if any(parts == PurePosixPath(v) or PurePosixPath(v) in parts.parents for v in _KERNEL_VIEWS):
        raise UsageError(
            f"--state-dir {raw!r} is under {parts.parts[0]}{parts.parts[1]}, a kernel view, "
            "not a directory for SkyPilot state",
            remedy=_REMEDY,
        )
    return normal


def _legacy_state(path: Path) -> bool:
    """A state directory an npa before markers prepared: its ``user-id`` is npa's."""
    try:
        info = (path / "user-id").lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > 256:
            return False
        return bool(_NPA_USER_ID.match((path / "user-id").read_text(encoding="utf-8").strip()))
    except (OSError, UnicodeDecodeError):
        return False


def check_dir(path: Path) -> None:
    """Refuse a ``--state-dir`` that npa cannot prove is (or may become) its own.

    Raises:
        ConfigError: a symlink, not a directory, or a directory holding files npa did not make.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(
            f"cannot inspect --state-dir {path}: {exc.strerror}", remedy=_REMEDY
        ) from exc
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"--state-dir {path} is a symlink; npa neither follows nor removes through links",
            remedy=f"pass the directory it points to ({os.path.realpath(path)}) if npa made it",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"--state-dir {path} is not a directory", remedy=_REMEDY)
    if marker.holds(path) or _legacy_state(path):
        return
    try:
        empty = not any(True for _ in os.scandir(path))
    except OSError as exc:
        raise ConfigError(
            f"cannot list --state-dir {path}: {exc.strerror}", remedy=_REMEDY
        ) from exc
    if not empty:
        raise ConfigError(
            f"--state-dir {path} already holds files npa did not create (it has no npa "
            "marker); npa cleanup --yes removes what npa makes in a state directory, so it "
            "must be npa's own",
            remedy=_REMEDY,
            details={"state_dir": str(path)},
        )


def claim(path: Path) -> None:
    """Create ``path`` (0700) if needed and mark it npa's (judged by ``check_dir`` again).

    Raises:
        ConfigError: ``check_dir`` refuses it, or the directory or its marker cannot be written.
    """
    check_dir(path)
    try:
        marker.make_dir(path, "state_dir")
        if not marker.holds(path):
            marker.mark(path, "state_dir")  # a legacy npa state directory (check_dir)
    except OSError as exc:
        raise ConfigError(
            f"cannot create --state-dir {path}: {exc.strerror or exc}",
            remedy=f"make {path.parent} writable by you, or {_REMEDY}",
        ) from exc
