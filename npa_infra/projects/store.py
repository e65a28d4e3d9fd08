"""Project entries on disk: ``$NPA_HOME/projects/<alias>.yaml`` (issue 16).

One YAML mapping per alias, the fields of ``record.Project`` and nothing else
(unknown keys are refused, so a credential has nowhere to go). The directory
(and every missing level of the npa home) is 0700 and each file 0600; a write
is atomic (temp file, fsync, rename). A read-merge-write of an entry holds the
entry's lock (``locked``, ``localstate.privatefile``) from the read to the
rename, so concurrent ``npa configure`` runs never lose each other's updates
(issue 24); ``save`` takes it for a write of its own, ``write`` is for a
caller that already holds it.

``load`` answers with an ``resolve.Entry`` observation: ``absent`` only when
the file is authoritatively not there; anything else that prevents a valid
entry (not a regular file, too large, not YAML, a wrong key, another alias
inside) is ``unreadable``, with the reason, never treated as absent. The file
is opened without following a symlink and without blocking on a FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.localstate import privatefile
from npa_infra.projects.models import valid_alias
from npa_infra.projects.record import Project
from npa_infra.projects.resolve import Entry, EntryState

__all__ = [
    "MAX_BYTES",
    "entry_path",
    "known_aliases",
    "load",
    "locked",
    "projects_dir",
    "save",
    "write",
]

MAX_BYTES = 64 * 1024  # an entry is a handful of names
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC


def projects_dir(env: Mapping[str, str]) -> Path:
    return npa_config.npa_home(env) / "projects"


def entry_path(alias: str, env: Mapping[str, str]) -> Path:
    """Raises ConfigError: ``alias`` cannot name a file."""
    if not valid_alias(alias):
        raise ConfigError(
            f"project alias {alias!r} is not usable",
            remedy="use 1-96 characters: a letter or digit, then letters, digits, '.', '_' or '-'",
        )
    return projects_dir(env) / f"{alias}.yaml"


def _read(path: Path) -> bytes:
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES} bytes")
    return data


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "entry"
        return f"{where}: {first['msg']}"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


def load(alias: str, env: Mapping[str, str]) -> Entry:
    """The entry of ``alias`` as observed: present, absent or unreadable (with why).

    Raises:
        ConfigError: ``alias`` cannot name a file.
    """
    path = entry_path(alias, env)
    try:
        raw = _read(path)
    except FileNotFoundError:
        return Entry(EntryState.ABSENT, str(path))
    except OSError as exc:
        why = "a symlink" if exc.errno == errno.ELOOP else _problem(exc)
        return Entry(EntryState.UNREADABLE, str(path), problem=why)
    except ValueError as exc:
        return Entry(EntryState.UNREADABLE, str(path), problem=str(exc))
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
        project = Project.model_validate(data)
    except (UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
        problem = _problem(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
        return Entry(EntryState.UNREADABLE, str(path), problem=problem)
    if project.alias != alias:
        return Entry(EntryState.UNREADABLE, str(path), problem=f"it holds alias {project.alias!r}")
    return Entry(EntryState.PRESENT, str(path), project=project)


def known_aliases(env: Mapping[str, str]) -> tuple[str, ...]:
    """The aliases with an entry file, sorted (an unlistable directory lists none)."""
    try:
        names = [p.name for p in projects_dir(env).iterdir()]
    except OSError:
        return ()
    return tuple(sorted(n[:-5] for n in names if n.endswith(".yaml") and valid_alias(n[:-5])))


@contextlib.contextmanager
def locked(alias: str, env: Mapping[str, str]) -> Iterator[Path]:
    """Hold ``alias``'s entry lock for a read-merge-write; yields the entry's path.

    Raises:
        ConfigError: ``alias`` cannot name a file, or the lock cannot be had.
    """
    path = entry_path(alias, env)
    with privatefile.locked(path):
        yield path


def save(project: Project, env: Mapping[str, str]) -> Path:
    """Write ``project``'s entry under its lock: 0600 in a 0700 directory. Returns its path.

    Raises:
        ConfigError: the directory or the file cannot be written.
    """
    with locked(project.alias, env):
        return write(project, env)


def write(project: Project, env: Mapping[str, str]) -> Path:
    """Write ``project``'s entry atomically; the caller holds ``locked(project.alias)``.

    Raises:
        ConfigError: the directory or the file cannot be written.
    """
    path = entry_path(project.alias, env)
    text = yaml.safe_dump(project.model_dump(mode="json", exclude_none=True), sort_keys=True)
    try:
        privatefile.private_dirs(path.parent)
        os.chmod(path.parent, 0o700)
        privatefile.replace(path, text.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write project entry {path}: {_problem(exc)}",
            remedy=f"make {path.parent} writable by you",
        ) from exc
    return path
