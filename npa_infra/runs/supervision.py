"""What one supervision tick means for a running wave (runtime-reference.md §2-§4).

``decide(state, tick)`` is pure: given the watch state of one job and what
this tick observed (its SkyPilot status, or that the queue was unreadable,
and, while the job is PENDING/STARTING, the classified pod blocker), it
returns the next state and a verdict. The supervisor acts on the verdict;
nothing here talks to SkyPilot or Kubernetes.

Rules, in order:

1. A terminal SkyPilot status ends the watch: SUCCEEDED; FAILED and
   FAILED_SETUP are payload failures (``--retries``); FAILED_NO_RESOURCE and
   FAILED_CONTROLLER are infrastructure failures (the recovery budget); a
   CANCELLED job is final.
2. An unreadable queue counts; the sixth consecutive one ends the watch as
   unreadable (§2: "the 6th consecutive status error fails the wave").
3. A *permanent* pod blocker (image/auth, missing Secret, malformed pod config,
   impossible GPU shape; kubernetes.md §6.3) is final only after it has been
   seen continuously for ``permanent_grace`` seconds, so a brief
   ImagePullBackOff during a registry hiccup is not taken as proof.
4. A *transient* blocker (capacity, quota, node not ready, preemption) that
   lasts ``infrastructure_grace`` seconds ends the watch as ``transient_expired``.
5. An *unknown* blocker, or none, never triggers an action: keep waiting.
6. Past ``max_wait`` (0 = unbounded) the watch ends as ``timeout``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "INFRASTRUCTURE_FAILURES",
    "MAX_UNREADABLE",
    "PAYLOAD_FAILURES",
    "Tick",
    "Verdict",
    "WatchPolicy",
    "WatchState",
    "decide",
]

MAX_UNREADABLE = 5
PAYLOAD_FAILURES = frozenset({"FAILED", "FAILED_SETUP"})
INFRASTRUCTURE_FAILURES = frozenset({"FAILED_NO_RESOURCE", "FAILED_CONTROLLER"})
_TERMINAL = (
    PAYLOAD_FAILURES
    | INFRASTRUCTURE_FAILURES
    | {
        "SUCCEEDED",
        "CANCELLED",
        "FAILED_PRECHECKS",
    }
)


class Verdict(StrEnum):
    WAIT = "wait"
    SUCCEEDED = "succeeded"
    PAYLOAD_FAILED = "payload_failed"
    INFRASTRUCTURE_FAILED = "infrastructure_failed"
    FAILED = "failed"  # terminal and not retryable here (CANCELLED, FAILED_PRECHECKS)
    PERMANENT_BLOCKER = "permanent_blocker"
    TRANSIENT_EXPIRED = "transient_expired"
    UNREADABLE = "unreadable"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class WatchPolicy:
    """How a wave is supervised; ``runs.liveness`` reads the last two (0 turns either off)."""

    permanent_grace: float = 60.0
    infrastructure_grace: float = 600.0
    max_wait: float = 3600.0  # 0 = unbounded
    heartbeat_seconds: float = 60.0  # a durable proof of life this often
    stale_after_seconds: float = 300.0  # the reference's heartbeat_stale threshold (§4)


@dataclass(frozen=True, slots=True)
class Tick:
    """One observation: ``status`` None means the queue could not be read."""

    now: float
    status: str | None
    blocker_code: str | None = None
    blocker_class: str | None = None  # permanent | transient | payload | unknown


@dataclass(frozen=True, slots=True)
class WatchState:
    started: float
    unreadable: int = 0
    blocker_code: str | None = None
    blocker_class: str | None = None
    blocker_since: float | None = None
    last_status: str | None = None

    @classmethod
    def begin(cls, now: float) -> WatchState:
        return cls(started=now)


def decide(state: WatchState, tick: Tick, policy: WatchPolicy) -> tuple[WatchState, Verdict]:
    """The next watch state and what the supervisor must do; see the module rules."""
    if tick.status is None:  # rule 2
        state = dataclasses.replace(state, unreadable=state.unreadable + 1)
        if state.unreadable > MAX_UNREADABLE:
            return state, Verdict.UNREADABLE
        return state, _timeout_or_wait(state, tick, policy)
    state = dataclasses.replace(state, unreadable=0, last_status=tick.status)
    if tick.status in _TERMINAL:  # rule 1
        return _clear(state), _terminal_verdict(tick.status)
    state = _track_blocker(state, tick)
    held = tick.now - state.blocker_since if state.blocker_since is not None else 0.0
    if state.blocker_class == "permanent" and held >= policy.permanent_grace:  # rule 3
        return state, Verdict.PERMANENT_BLOCKER
    if state.blocker_class == "transient" and held >= policy.infrastructure_grace:  # rule 4
        return state, Verdict.TRANSIENT_EXPIRED
    return state, _timeout_or_wait(state, tick, policy)  # rules 5 and 6


def _terminal_verdict(status: str) -> Verdict:
    if status == "SUCCEEDED":
        return Verdict.SUCCEEDED
    if status in PAYLOAD_FAILURES:
        return Verdict.PAYLOAD_FAILED
    if status in INFRASTRUCTURE_FAILURES:
        return Verdict.INFRASTRUCTURE_FAILED
    return Verdict.FAILED


def _track_blocker(state: WatchState, tick: Tick) -> WatchState:
    """Keep the start time while the same code persists; a change restarts the clock."""
    if tick.status not in ("PENDING", "STARTING") or tick.blocker_code is None:
        return _clear(state)
    if tick.blocker_code == state.blocker_code:
        return state
    return dataclasses.replace(
        state,
        blocker_code=tick.blocker_code,
        blocker_class=tick.blocker_class,
        blocker_since=tick.now,
    )


def _clear(state: WatchState) -> WatchState:
    return dataclasses.replace(state, blocker_code=None, blocker_class=None, blocker_since=None)


def _timeout_or_wait(state: WatchState, tick: Tick, policy: WatchPolicy) -> Verdict:
    if policy.max_wait and tick.now - state.started >= policy.max_wait:
        return Verdict.TIMEOUT
    return Verdict.WAIT
