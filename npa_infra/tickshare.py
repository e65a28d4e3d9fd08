"""One read per tick, shared by every supervisor of a controller through a file.

Each run is supervised by its own process, and every supervisor reads the
controller's queue, and the cluster's pods and nodes, once per tick. Runs on
the same controller share one SkyPilot state directory, so they can share
those reads: ``TickFile.read`` takes an exclusive ``flock`` beside the stored
answer, reuses it when another supervisor stored it less than ``max_age``
ago (the tick interval) and no earlier than ``not_before``, and otherwise
fetches the answer itself and stores it for the others. N runs cost one read
per tick, not N.

``not_before`` is when the caller began watching: an answer read before then
may predate the caller's own job, and would only add reads that miss it. An answer ``shareable`` rejects (an unavailable queue) is never
stored, so the next supervisor fetches for itself; a stored answer that does
not decode is ignored. Times come from the caller's clock.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

__all__ = ["TickFile"]

T = TypeVar("T")


class TickFile(Generic[T]):
    """``<directory>/<name>.json`` and its lock; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        name: str,
        *,
        now: Callable[[], float],
        encode: Callable[[T], Any],
        decode: Callable[[Any], T | None],
        shareable: Callable[[T], bool] = lambda _: True,
    ) -> None:
        self._dir = directory
        self._name = name
        self._now = now
        self._encode = encode
        self._decode = decode
        self._shareable = shareable
        self.fetches = 0  # answers this instance fetched itself (the others were shared)

    @property
    def path(self) -> Path:
        return self._dir / f"{self._name}.json"

    def read(self, fetch: Callable[[], T], *, max_age: float, not_before: float) -> T:
        """The answer as of at most ``max_age`` ago and not before ``not_before``.

        Raises:
            whatever ``fetch`` raises (nothing is stored then).
        """
        if not self._dir.is_dir():
            from npa_infra.localstate import marker

            marker.make_dir(self._dir, "tick_files")  # npa's: cleanup may remove it (issue 24)
        with open(self._dir / f"{self._name}.lock", "a+", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            now = self._now()
            stored = self._load()
            if stored is not None and stored[0] >= not_before and 0 <= now - stored[0] < max_age:
                return stored[1]
            answer = fetch()
            self.fetches += 1
            if self._shareable(answer):
                self._save({"at": now, "answer": self._encode(answer)})
            return answer

    def _load(self) -> tuple[float, T] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("at"), int | float):
            return None
        answer = self._decode(data.get("answer"))
        return (float(data["at"]), answer) if answer is not None else None

    def _save(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f".{self._name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(self.path)
