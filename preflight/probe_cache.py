"""The cache of compatible pull probes: ``$NPA_HOME/cache/image-pull-probe.json``.

Only ``compatible`` results are kept (kubernetes.md §9.5). The key is the
design's ``<digest>|<contract>`` followed by the probe path's identity
(context, namespace, ServiceAccount, effective pull secrets, placement
digest): a pull proven for one ServiceAccount proves nothing for another, so
the cache is stricter than the bare ``<digest>|<contract>``.

The file is ``{"version": 1, "entries": {key: ProbeRecord JSON}}``, written
whole through a temporary file and an atomic rename, 0600 in a 0700
directory (cli.md §0). An unreadable, corrupt or foreign file is ignored
(treated as empty, then replaced on the next write): a cache can only save
work, never decide.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from pydantic import ValidationError

from npa_infra.registry.models import ProbeRecord, ProbeVerdict
from preflight.probe_paths import ProbePath

__all__ = ["CACHE_FILE", "ProbeCache", "cache_key"]

CACHE_FILE = "image-pull-probe.json"
_VERSION = 1


def cache_key(digest: str, contract: str, path: ProbePath) -> str:
    """``<digest>|<contract>|<context>|<namespace>|<account>|<secrets>|<placement>``."""
    return f"{digest}|{contract}|{path.key()}"


class ProbeCache:
    """Read and write the cache file at ``path``; no I/O until the first call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProbeCache({str(self.path)!r})"

    def get(self, key: str) -> ProbeRecord | None:
        """The cached compatible record for ``key``, or None."""
        with self._lock:
            raw = self._load().get(key)
        if not isinstance(raw, dict):
            return None
        try:
            record = ProbeRecord.model_validate(raw)
        except ValidationError:
            return None
        return record if record.status is ProbeVerdict.COMPATIBLE else None

    def put(self, key: str, record: ProbeRecord) -> None:
        """Remember ``record`` under ``key`` when it is compatible; others are never cached.

        A failed write is ignored: the next run probes again.
        """
        if record.status is not ProbeVerdict.COMPATIBLE:
            return
        with self._lock:
            entries = self._load()
            entries[key] = record.model_dump(mode="json")
            try:
                self._write({"version": _VERSION, "entries": entries})
            except OSError:
                return

    def _load(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return {}
        entries = data.get("entries")
        return dict(entries) if isinstance(entries, dict) else {}

    def _write(self, data: dict[str, object]) -> None:
        directory = self.path.parent
        missing = [p for p in (directory, *directory.parents) if not p.exists()]
        for part in reversed(missing):
            part.mkdir(mode=0o700, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, sort_keys=True)
            os.replace(tmp, self.path)
        finally:
            if tmp.exists():
                tmp.unlink()
