"""One ``sky jobs queue`` read per tick for every supervisor of one controller.

Each run is supervised by its own process, and every supervisor reads the
queue once per tick. ``SharedQueue.read`` shares that read among every run
supervised on the same controller through ``npa_infra.tickshare`` (a flock'd
answer under ``<state dir>/supervision``): N runs cost one queue call per
tick, not N, and a supervisor never takes an answer read before it began
watching (that answer may predate its own job). A job missing from a shared
answer is as unknown as one missing from the supervisor's own read: the pure
watch confirms an absence over the grace window and by an exact-name lookup,
which, like every decision below, reads fresh (runtime-reference.md §1).

Supervision ticks read through here, and so do a launch transaction's
exact-name lookups (issue 19), on stricter terms: the lookup before a
launch takes only an answer read after the run's lock was acquired (no one
else can launch the run's names then) and less than one tick ago, and never
after another home's launch of the run had to settle; every later lookup
takes only an answer read after the transaction's previous step (the launch,
the request check), so the id after a launch comes from the next shared
read, one tick after the POST (the transaction settles that long first; an
answer another supervisor read meanwhile serves), which is also the first
supervision tick. A cancellation, a recovery
check and the confirming lookup of a missing job always read the queue
fresh. An unavailable answer is never shared.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from npa_infra.skypilot.base import SkyPilot
from npa_infra.skypilot.models import ErrorKind, JobStatus, QueueRecord, QueueResult, QueueVerdict
from npa_infra.tickshare import TickFile

__all__ = ["SharedQueue", "decode", "encode"]

_SCHEMA = "npa.skypilot.shared-queue.v1"


def encode(result: QueueResult) -> dict[str, Any]:
    """The stored form of one queue answer."""
    return {
        "schema": _SCHEMA,
        "verdict": result.verdict.value,
        "error_kind": result.error_kind.value,
        "detail": result.detail,
        "records": [
            {**record._asdict(), "status": record.status.value} for record in result.records
        ],
    }


def decode(data: object) -> QueueResult | None:
    """A stored answer; None when it is not one this module wrote."""
    if not isinstance(data, dict) or data.get("schema") != _SCHEMA:
        return None
    try:
        records = tuple(
            QueueRecord(**{**row, "status": JobStatus(row["status"])}) for row in data["records"]
        )
        return QueueResult(
            QueueVerdict(data["verdict"]),
            records,
            ErrorKind(data["error_kind"]),
            str(data["detail"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


class SharedQueue:
    """See the module docstring. ``directory`` is the state directory's ``supervision``."""

    def __init__(self, sky: SkyPilot, directory: Path, now: Callable[[], float]) -> None:
        self._sky = sky
        self._file: TickFile[QueueResult] = TickFile(
            directory,
            "queue",
            now=now,
            encode=encode,
            decode=decode,
            shareable=lambda result: result.verdict is not QueueVerdict.UNAVAILABLE,
        )

    @property
    def calls(self) -> int:
        """Queue reads this instance made itself (the others were shared)."""
        return self._file.fetches

    def read(self, *, max_age: float, not_before: float) -> QueueResult:
        """The queue as of at most ``max_age`` ago and not before ``not_before``."""
        return self._file.read(
            lambda: self._sky.queue(verbose=True), max_age=max_age, not_before=not_before
        )
