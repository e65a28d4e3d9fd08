"""The installed versions of a ``sky`` binary's venv, from its dist-info metadata, cached.

The drift gate runs before every live action, so it must cost nothing
measurable: no import and no subprocess. The binary's venv is the directory
above its ``bin/`` that holds ``pyvenv.cfg`` (the real path's first, then the
path as given); its ``lib/python*/site-packages`` listing names each
distribution's ``<name>-<version>.dist-info`` directory, whose ``METADATA``
headers carry the ``Version``. A binary with no ``pyvenv.cfg`` beside it is
``NOT_A_VENV`` and a venv without a skypilot distribution is ``NO_SKYPILOT``:
the gate cannot check their versions (``drift`` rule 5), which is how the
test simulator, a plain script, runs.

The observation is cached per binary real path in ``$NPA_HOME/cache/`` (a
0700 directory, a 0600 file), with the ``(mtime_ns, size, inode)`` of every
file and directory it was read from: the binary, ``pyvenv.cfg``, each
site-packages directory (pip adds and removes dist-info directories, so its
mtime moves) and each ``METADATA`` read. A hit costs those few stats; any
change reads the metadata again. An observation read within a second of a
recorded mtime is not stored, since a change in the same timestamp tick would
go unseen.
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

from npa_infra.skypilot import drift

__all__ = ["CACHE_NAME", "MetadataReader", "observe", "read_headers"]

CACHE_NAME = "skypilot-gate.json"
_CACHE_FORMAT = 1
_CACHE_ENTRIES = 16  # binaries remembered; the oldest is dropped first
_MAX_READ = 256 * 1024  # METADATA headers and the cache file are small; never read more
_RACY_SECONDS = 1.0
_DIST_INFO = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*)-(?P<version>[^-]+)\.dist-info$")

MetadataReader = Callable[[Path], str]
Stamp = tuple[str, int, int, int]  # path, mtime_ns, size, inode


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
    st = os.stat(path)
    return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)


def _venv_root(binary: Path) -> Path | None:
    for directory in (binary.resolve().parent, binary.parent):
        root = directory.parent
        if (root / "pyvenv.cfg").is_file():
            return root
    return None


def _python(root: Path, site: Path) -> str | None:
    """``pyvenv.cfg``'s ``version``/``version_info``, else the ``lib/pythonX.Y`` name."""
    with contextlib.suppress(OSError):
        for line in _read_regular(root / "pyvenv.cfg").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() in ("version", "version_info") and value.strip():
                return value.strip()
    match = re.fullmatch(r"python(\d+\.\d+)", site.parent.name)
    return match.group(1) if match else None


def _version_of(headers: str) -> str | None:
    for line in headers.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "version" and value.strip():
            return value.strip()
    return None


def _read_venv(
    root: Path, binary: Path, reader: MetadataReader
) -> tuple[drift.VenvObservation, list[Stamp]]:
    stamps = [_stamp(binary), _stamp(root / "pyvenv.cfg")]
    sites = sorted((root / "lib").glob("python*/site-packages"))
    versions: dict[str, str | None] = {}
    for site in sites:
        stamps.append(_stamp(site))
        for entry in sorted(os.listdir(site)):
            match = _DIST_INFO.match(entry)
            if match is None or _normal(match.group("name")) not in drift.GATED:
                continue
            name, metadata = _normal(match.group("name")), site / entry / "METADATA"
            version = _version_of(reader(metadata))
            stamps.append(_stamp(metadata))
            if version is None or versions.get(name, version) != version:
                why = "has no Version" if version is None else "is one of two installed versions"
                raise OSError(f"{metadata} {why}")
            versions[name] = version
    if "skypilot" not in versions:
        return drift.VenvObservation(
            drift.VenvState.NO_SKYPILOT, detail=f"{root} holds no skypilot distribution"
        ), stamps
    python = _python(root, sites[0])
    return drift.VenvObservation(drift.VenvState.READ, python, versions, str(root)), stamps


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


def observe(
    binary: Path,
    cache_dir: Path,
    *,
    reader: MetadataReader = read_headers,
    now: Callable[[], float] = time.time,
) -> drift.VenvObservation:
    """The versions installed beside ``binary``; ``UNREADABLE`` rather than raising."""
    root = _venv_root(binary)
    if root is None:
        return drift.VenvObservation(
            drift.VenvState.NOT_A_VENV, detail=f"{binary} is not inside a venv (no pyvenv.cfg)"
        )
    cache_file = cache_dir / CACHE_NAME
    key = str(binary.resolve())
    entries = _load(cache_file)
    cached = _hit(entries.get(key))
    if cached is not None:
        return cached
    try:
        venv, stamps = _read_venv(root, binary, reader)
    except OSError as exc:
        return drift.VenvObservation(drift.VenvState.UNREADABLE, detail=str(exc)[:300])
    newest = max(mtime for _p, mtime, _s, _i in stamps) / 1e9
    if now() - newest >= _RACY_SECONDS:
        _store(cache_file, entries, key, {"stamps": stamps, "venv": _as_json(venv)})
    return venv


def _as_json(venv: drift.VenvObservation) -> Mapping[str, Any]:
    return {
        "state": venv.state.value,
        "python": venv.python,
        "versions": dict(venv.versions),
        "detail": venv.detail,
    }
