"""Liveness of a supervised wave: heartbeats and stale progress (runtime-reference.md §2, §4).

``observe(state, observation, policy)`` is pure: given what the supervisor
last saw of one job and this tick's observation (the time, the SkyPilot
status, and a *fingerprint* of everything observable about the job: its
status, each task's status, the pending-pod blocker code, reason and pod),
it returns the next state and the signals to journal. Signals are warnings
and proofs of life; none of them is ever a reason to cancel or relaunch
(that is ``runs.supervision``'s job, from typed evidence only).

Rules, in order:

1. An unreadable queue (``status`` None) is no observation of the job: it
   neither counts as progress nor as a stall.
2. A fingerprint that differs from the last readable one is progress: the
   stall clock restarts, and a stall that had been reported ends with
   ``progress_resumed``.
3. While the job is active (PENDING, STARTING, RUNNING, RECOVERING), an
   unchanged fingerprint for ``stale_after_seconds`` (0 = off) is reported
   once as ``stale_progress`` (the reference projects ``heartbeat_stale``
   after > 300 s without progress, runtime-reference.md §4); it is reported
   again only after progress resumes and stalls again.
4. The first tick, then one tick every ``heartbeat_seconds`` (0 = off), emits
   ``heartbeat``: durable proof that the supervisor is alive and of what it
   last saw. Unreadable ticks beat too: it is the supervisor that is alive.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ACTIVE_STATUSES", "Liveness", "Observation", "Signal", "observe"]

ACTIVE_STATUSES = frozenset({"PENDING", "STARTING", "RUNNING", "RECOVERING"})


class Signal(StrEnum):
    """What a tick asks the supervisor to journal; the values are the event kinds."""

    HEARTBEAT = "heartbeat"
    STALE_PROGRESS = "stale_progress"
    PROGRESS_RESUMED = "progress_resumed"


@dataclass(frozen=True, slots=True)
class Observation:
    """One tick: ``status`` None means the queue could not be read."""

    now: float
    status: str | None
    fingerprint: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Liveness:
    """The last readable fingerprint, since when it holds, and what was already reported."""

    fingerprint: tuple[str, ...] | None = None
    since: float | None = None
    stale: bool = False
    last_heartbeat: float | None = None

    def unchanged_for(self, now: float) -> float:
        """Seconds the current fingerprint has held (0 before the first readable tick)."""
        return now - self.since if self.since is not None else 0.0


def observe(
    state: Liveness, observation: Observation, *, heartbeat_seconds: float, stale_after: float
) -> tuple[Liveness, tuple[Signal, ...]]:
    """The next liveness state and the signals of this tick, in journal order; see the rules."""
    signals: list[Signal] = []
    if observation.status is not None:  # rule 1: only a readable tick observes the job
        state, signals = _progress(state, observation, stale_after)
    if _heartbeat_due(state, observation.now, heartbeat_seconds):  # rule 4
        state = dataclasses.replace(state, last_heartbeat=observation.now)
        signals.append(Signal.HEARTBEAT)
    return state, tuple(signals)


def _progress(
    state: Liveness, observation: Observation, stale_after: float
) -> tuple[Liveness, list[Signal]]:
    now = observation.now
    if observation.fingerprint != state.fingerprint:  # rule 2
        resumed = [Signal.PROGRESS_RESUMED] if state.stale else []
        moved = Liveness(observation.fingerprint, now, False, state.last_heartbeat)
        return moved, resumed
    if (  # rule 3
        stale_after > 0
        and not state.stale
        and observation.status in ACTIVE_STATUSES
        and state.unchanged_for(now) >= stale_after
    ):
        return dataclasses.replace(state, stale=True), [Signal.STALE_PROGRESS]
    return state, []


def _heartbeat_due(state: Liveness, now: float, every: float) -> bool:
    if every <= 0:
        return False
    return state.last_heartbeat is None or now - state.last_heartbeat >= every
