"""One ``sky jobs queue`` read per tick for every supervisor of one controller.

Each run is supervised by its own process (``submit``), and every supervisor
reads the queue once per tick. Runs on the same controller share one
SkyPilot state directory, so they share the read too: ``SharedQueue.read``
takes an exclusive ``flock`` on ``<dir>/supervision/queue.lock``, reuses the
answer another supervisor stored there when it is younger than ``max_age``
(the tick interval), and otherwise reads the queue itself and stores the
answer for the others. N supervised runs on one controller cost one queue
call per tick, not N. A supervisor never takes an answer read before it
began watching (``not_before``): that answer may predate its own job, and a
job missing from a good queue means the controller lost it.

Only supervision ticks read through here. A launch transaction, a
reconciliation, a cancellation and a recovery check always read the queue
fresh: they decide what exists, and an answer from one tick ago does not
prove that. An unavailable answer is never stored, so the next supervisor
tries for itself; a stored answer that cannot be read back is ignored.
Times come from the caller's clock.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npa_infra.skypilot.base import SkyPilot
from npa_infra.skypilot.models import ErrorKind, JobStatus, QueueRecord, QueueResult, QueueVerdict

__all__ = ["SharedQueue", "decode", "encode"]

_SCHEMA = "npa.skypilot.shared-queue.v1"


def encode(result: QueueResult, at: float) -> dict[str, Any]:
    """The stored form of one queue answer read at ``at``."""
    return {
        "schema": _SCHEMA,
        "at": at,
        "verdict": result.verdict.value,
        "error_kind": result.error_kind.value,
        "detail": result.detail,
        "records": [
            {**record._asdict(), "status": record.status.value} for record in result.records
        ],
    }


def decode(data: object) -> tuple[float, QueueResult] | None:
    """``(read at, answer)`` of a stored answer; None when it is not one we wrote."""
    if not isinstance(data, dict) or data.get("schema") != _SCHEMA:
        return None
    try:
        records = tuple(
            QueueRecord(**{**row, "status": JobStatus(row["status"])}) for row in data["records"]
        )
        result = QueueResult(
            QueueVerdict(data["verdict"]),
            records,
            ErrorKind(data["error_kind"]),
            str(data["detail"]),
        )
        return float(data["at"]), result
    except (KeyError, TypeError, ValueError):
        return None


class SharedQueue:
    """See the module docstring. ``directory`` is the state directory's ``supervision``."""

    def __init__(self, sky: SkyPilot, directory: Path, now: Callable[[], float]) -> None:
        self._sky = sky
        self._dir = directory
        self._now = now
        self.calls = 0  # queue reads this instance made itself (the others were shared)

    @property
    def _store(self) -> Path:
        return self._dir / "queue.json"

    def read(self, *, max_age: float, not_before: float) -> QueueResult:
        """The queue as of at most ``max_age`` ago and not before ``not_before`` (read now
        when no one has read it since)."""
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self._dir / "queue.lock", "a+", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            now = self._now()
            stored = self._load()
            if stored is not None and stored[0] >= not_before and 0 <= now - stored[0] < max_age:
                return stored[1]
            result = self._sky.queue(verbose=True)
            self.calls += 1
            if result.verdict is not QueueVerdict.UNAVAILABLE:
                self._save(encode(result, now))
            return result

    def _load(self) -> tuple[float, QueueResult] | None:
        try:
            text = self._store.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return decode(json.loads(text))
        except ValueError:
            return None

    def _save(self, data: dict[str, Any]) -> None:
        tmp = self._store.with_name(f".queue.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(self._store)
