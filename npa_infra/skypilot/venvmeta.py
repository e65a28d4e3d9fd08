"""The installed versions a ``sky`` binary really imports, from dist-info metadata, cached.

The drift gate runs before every live action, so it must cost nothing
measurable: no import and no subprocess. ``pylayout`` reads the binary's
shebang for the Python it runs and lists, in ``sys.path`` order, the
directories that Python imports from, whatever the install layout (a venv,
a conda environment, a system or ``--user`` install). Each directory's
listing names each distribution's ``<name>-<version>.dist-info`` (or
``.egg-info``) directory, whose ``METADATA`` (``PKG-INFO``) headers carry the
``Version``; the first directory holding a distribution wins, as it does for
the import. Two versions of one distribution in one directory are
``UNREADABLE``; a binary that names no Python we can read is
``NO_INTERPRETER`` and an import path without a skypilot distribution is
``NO_SKYPILOT``: the gate refuses all three (``drift``), so no layout gets
past it unread.

The observation is cached per binary real path and the environment variables
the import path depends on, in ``$NPA_HOME/cache/`` (a 0700 directory, a 0600
file), with the ``(mtime_ns, size, inode)`` of every file and directory it
was read from or found absent: the binary, the interpreter, ``pyvenv.cfg`` or
the standard library's landmark, each candidate site directory (pip adds and
removes dist-info directories, so its mtime moves; one created later was
recorded absent) and each ``METADATA`` read. A hit costs those few stats; any
change reads again. An observation read within a second of a recorded mtime
is not stored, since a change in the same timestamp tick would go unseen.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from npa_infra.skypilot import drift, pylayout

__all__ = ["CACHE_NAME", "MetadataReader", "observe", "read_headers"]

CACHE_NAME = "skypilot-gate.json"
_CACHE_FORMAT = 2
_CACHE_ENTRIES = 16  # binaries remembered; the oldest is dropped first
_MAX_READ = 256 * 1024  # METADATA headers and the cache file are small; never read more
_RACY_SECONDS = 1.0
_INFO = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*)-(?P<version>[^-]+)(?:-py[^-]*)?"
    r"\.(?P<kind>dist-info|egg-info)$"
)
_METADATA = {"dist-info": "METADATA", "egg-info": "PKG-INFO"}
# what the import path depends on besides files (pylayout): part of the cache key
_ENV_KEYS = ("PATH", "HOME", "PYTHONPATH", "PYTHONUSERBASE", "PYTHONNOUSERSITE")
_ABSENT = (-1, -1, -1)

MetadataReader = Callable[[Path], str]
Stamp = tuple[str, int, int, int]  # path, mtime_ns, size, inode; -1s: absent


def _read_regular(path: Path, limit: int = _MAX_READ) -> str:
    """A regular file's first ``limit`` bytes; a symlinked, FIFO or device path raises OSError."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read(limit).decode("utf-8", errors="replace")


def read_headers(path: Path) -> str:
    """The header block of a ``METADATA`` file (up to its first blank line)."""
    text = _read_regular(path)
    return text.split("\n\n", 1)[0]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _stamp(path: Path) -> Stamp:
    """The path's identity, or the absent mark; any other failure raises (unknown)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (str(path), *_ABSENT)
    return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)


def _version_of(headers: str) -> str | None:
    for line in headers.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "version" and value.strip():
            return value.strip()
    return None


def _metadata(site: Path, entry: str, kind: str) -> Path:
    info = site / entry
    return info if info.is_file() else info / _METADATA[kind]  # an egg-info may be one file


def _read_site(site: Path, reader: MetadataReader, stamps: list[Stamp]) -> dict[str, str]:
    """The gated distributions one directory holds; two versions of one raise (unknown)."""
    found: dict[str, str] = {}
    for entry in sorted(os.listdir(site)):
        match = _INFO.match(entry)
        if match is None or _normal(match.group("name")) not in drift.GATED:
            continue
        name, metadata = _normal(match.group("name")), _metadata(site, entry, match.group("kind"))
        version = _version_of(reader(metadata))
        stamps.append(_stamp(metadata))
        if version is None or found.get(name, version) != version:
            why = "has no Version" if version is None else "is one of two installed versions"
            raise OSError(f"{metadata} {why}")
        found[name] = version
    return found


def _read_layout(
    layout: pylayout.Layout, binary: Path, reader: MetadataReader
) -> tuple[drift.VenvObservation, list[Stamp]]:
    stamps = [_stamp(binary), *(_stamp(p) for p in layout.probed)]
    versions: dict[str, str | None] = {}
    seen: set[str] = set()
    for site in layout.sites:
        stamps.append(_stamp(site))
        real = os.path.realpath(site)
        if real in seen or not site.is_dir():
            continue
        seen.add(real)
        for name, version in _read_site(site, reader, stamps).items():
            versions.setdefault(name, version)  # the first on the import path is imported
    where = layout.describe()
    if "skypilot" not in versions:
        searched = ", ".join(str(s) for s in layout.sites) or "nothing (python -S)"
        return drift.VenvObservation(
            drift.VenvState.NO_SKYPILOT,
            detail=f"{where} imports no skypilot distribution (searched {searched})",
        ), stamps
    return drift.VenvObservation(drift.VenvState.READ, layout.python, versions, where), stamps


def _read(
    binary: Path, env: Mapping[str, str], reader: MetadataReader
) -> tuple[drift.VenvObservation, list[Stamp]]:
    shebang = pylayout.parse_shebang(_read_regular(binary.resolve(), pylayout.HEAD_BYTES))
    if shebang is None:
        return drift.VenvObservation(
            drift.VenvState.NO_INTERPRETER,
            detail=f"{binary} is not a Python console script (its first line names no python)",
        ), [_stamp(binary)]
    try:
        layout = pylayout.discover(shebang, env)
    except pylayout.LayoutUnknown as exc:
        return drift.VenvObservation(drift.VenvState.NO_INTERPRETER, detail=f"{binary}: {exc}"), [
            _stamp(binary)
        ]
    return _read_layout(layout, binary, reader)


# -- the cache -------------------------------------------------------------------------
def _load(path: Path) -> dict[str, Any]:
    try:
        raw: Any = json.loads(_read_regular(path, 4 * _MAX_READ))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("format") != _CACHE_FORMAT:
        return {}
    entries = raw.get("entries")
    return entries if isinstance(entries, dict) else {}


def _hit(entry: Any) -> drift.VenvObservation | None:
    if not isinstance(entry, dict):
        return None
    try:
        for path, mtime, size, inode in entry["stamps"]:
            if _stamp(Path(path)) != (path, mtime, size, inode):
                return None
        venv = entry["venv"]
        return drift.VenvObservation(
            drift.VenvState(venv["state"]),
            venv["python"],
            {str(k): (None if v is None else str(v)) for k, v in venv["versions"].items()},
            str(venv["detail"]),
        )
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _store(path: Path, entries: dict[str, Any], key: str, entry: dict[str, Any]) -> None:
    """Write the cache atomically; a cache that cannot be written is only a slower gate."""
    entries = {k: v for k, v in entries.items() if k != key}
    entries[key] = entry
    kept = dict(list(entries.items())[-_CACHE_ENTRIES:])
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"format": _CACHE_FORMAT, "entries": kept}, handle)
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _key(binary: Path, env: Mapping[str, str]) -> str:
    return json.dumps([str(binary.resolve()), [env.get(k) for k in _ENV_KEYS]])


def observe(
    binary: Path,
    cache_dir: Path,
    env: Mapping[str, str],
    *,
    reader: MetadataReader = read_headers,
    now: Callable[[], float] = time.time,
) -> drift.VenvObservation:
    """The versions ``binary`` imports when run with ``env``; ``UNREADABLE`` rather than raising."""
    cache_file = cache_dir / CACHE_NAME
    key = _key(binary, env)
    entries = _load(cache_file)
    cached = _hit(entries.get(key))
    if cached is not None:
        return cached
    try:
        venv, stamps = _read(binary, env, reader)
    except OSError as exc:
        return drift.VenvObservation(drift.VenvState.UNREADABLE, detail=str(exc)[:300])
    newest = max(mtime for _p, mtime, _s, _i in stamps) / 1e9
    # an interpreter not found may be installed next: only a complete reading is kept
    if venv.state is not drift.VenvState.NO_INTERPRETER and now() - newest >= _RACY_SECONDS:
        _store(cache_file, entries, key, {"stamps": stamps, "venv": _as_json(venv)})
    return venv


def _as_json(venv: drift.VenvObservation) -> Mapping[str, Any]:
    return {
        "state": venv.state.value,
        "python": venv.python,
        "versions": dict(venv.versions),
        "detail": venv.detail,
    }
