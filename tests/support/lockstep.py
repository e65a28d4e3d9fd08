"""Virtual time for several supervisors at once, and a journal that only records.

``Lockstep`` is one clock for N threads: ``sleep`` returns once every
supervisor still watching has slept, and then time advances, so their ticks
line up as they do for processes polling a controller at the same interval.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from npa_infra.workflow.target.services import Clock

__all__ = ["Lockstep", "RecordingJournal", "supervise_together"]

T = TypeVar("T")


class Lockstep:
    """Virtual time for N supervisors: a sleep returns once every one still watching slept."""

    def __init__(self, parties: int, interval: float) -> None:
        self.t = 1_800_000_000.0
        self._interval = interval
        self._parties = parties
        self._arrived = 0
        self._generation = 0
        self._cond = threading.Condition()
        self.ticks = 0

    def now(self) -> float:
        with self._cond:
            return self.t

    def sleep(self, seconds: float) -> None:
        with self._cond:
            generation = self._generation
            self._arrived += 1
            if self._arrived >= self._parties:
                self._advance(seconds)
            elif not self._cond.wait_for(lambda: self._generation != generation, timeout=60):
                raise AssertionError("the other supervisor never slept")

    def leave(self) -> None:
        """This supervisor is done: the others no longer wait for it."""
        with self._cond:
            self._parties -= 1
            if self._arrived and self._arrived >= self._parties:
                self._advance(self._interval)

    def _advance(self, seconds: float) -> None:
        self.t += seconds
        self.ticks += 1
        self._arrived = 0
        self._generation += 1
        self._cond.notify_all()

    def clock(self) -> Clock:
        return Clock(self.now, self.sleep, lambda: 0.5)


@dataclass
class RecordingJournal:
    """The two journal writes ``watch_job`` makes, kept in memory."""

    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update_attempt(self, *_: Any, **__: Any) -> None:
        return None

    def append_event(self, run_id: str, kind: str, data: dict[str, Any], *, now: float) -> None:
        with self.lock:
            self.events.append((run_id, kind, data))


def supervise_together(
    lockstep: Lockstep, names: Iterable[str], supervise: Callable[[str], T]
) -> dict[str, T]:
    """Run ``supervise(name)`` for every name in its own thread on ``lockstep``; each one
    leaves the lockstep when done. Returns the results; re-raises the first failure."""
    results: dict[str, T] = {}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            results[name] = supervise(name)
        except BaseException as error:  # re-raised in the test's thread below
            errors.append(error)
        finally:
            lockstep.leave()

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results
