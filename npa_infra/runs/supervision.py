"""What one supervision tick means for a running wave (runtime-reference.md §1-§4).

``decide(state, observation)`` is pure: given the watch state of one job and
what this tick observed, it returns the next state and a verdict. An
observation is a ``Tick`` (one queue read: the job *present* with its SkyPilot
status and, while PENDING/STARTING, the classified pod blocker; *absent* from
a readable answer; or *unknown* because the answer was unreadable) or a
``Lookup`` (the exact-name lookup the previous verdict asked for). The
supervisor executes the verdict; nothing here talks to SkyPilot or Kubernetes.

Rules, in order:

1. A ``Lookup`` answers ``CONFIRM_MISSING`` (rule 3): found by exact name, the
   job is alive and the missing reads were partial answers (reset); unknown
   keeps watching; authoritative absence, after the window, is the job's end:
   ``FAILED_CONTROLLER`` with evidence ``job_missing_from_queue``, an
   infrastructure failure (runtime-reference.md §1, "npa-infra must").
2. An unreadable queue counts; the sixth consecutive one ends the watch as
   unreadable (§2: "the 6th consecutive status error fails the wave"). It
   neither shows nor clears the job, a blocker, or an absence.
3. A job missing from a readable answer is unknown, never lost (faults.md:
   partial answers): keep watching. Only when it has been missing from at
   least ``MIN_MISSING_READS`` reads spanning ``infrastructure_grace`` seconds
   (the wave's own window for infrastructure evidence) does the verdict ask
   for the exact-name lookup (``CONFIRM_MISSING``).
4. A present job clears any absence. A terminal SkyPilot status ends the
   watch: SUCCEEDED; FAILED and FAILED_SETUP are payload failures
   (``--retries``); FAILED_NO_RESOURCE and FAILED_CONTROLLER are
   infrastructure failures (the recovery budget); a CANCELLED job is final.
5. A *permanent* pod blocker (image/auth, missing Secret, malformed pod config,
   impossible GPU shape; kubernetes.md §6.3) stops the watch at the first read
   that confirms it; ``permanent_grace`` (default 0) may widen that window.
6. A *transient* blocker (capacity, quota, node not ready, preemption) that
   lasts ``infrastructure_grace`` seconds ends the watch as ``transient_expired``.
7. An *unknown* blocker, or none, never triggers an action: keep waiting.
8. Past ``max_wait`` (0 = unbounded) the watch ends as ``timeout``.

``recheck`` is the gate before a recovery acts on an infrastructure failure:
the latest fresh read must show the job terminal or absent; a job it shows
alive is never cancelled (supervision resumes), and an unreadable one is read
again, at most ``MAX_UNREADABLE`` + 1 times.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.errors import InvariantError
from npa_infra.runs.models import Reconciliation, ReconciliationState

__all__ = [
    "INFRASTRUCTURE_FAILURES",
    "JOB_MISSING_FROM_QUEUE",
    "MAX_UNREADABLE",
    "MIN_MISSING_READS",
    "PAYLOAD_FAILURES",
    "TERMINAL_STATUSES",
    "Answer",
    "Lookup",
    "Presence",
    "Recheck",
    "Tick",
    "Verdict",
    "WatchPolicy",
    "WatchState",
    "decide",
    "lookup_of",
    "recheck",
]

MAX_UNREADABLE = 5
MIN_MISSING_READS = 2  # faults.md: never act on one read
JOB_MISSING_FROM_QUEUE = "job_missing_from_queue"  # the evidence of a lost job (§1)
PAYLOAD_FAILURES = frozenset({"FAILED", "FAILED_SETUP"})
INFRASTRUCTURE_FAILURES = frozenset({"FAILED_NO_RESOURCE", "FAILED_CONTROLLER"})
TERMINAL_STATUSES = (
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
    CONFIRM_MISSING = "confirm_missing"  # look the job up by exact name, answer with a Lookup
    SUCCEEDED = "succeeded"
    PAYLOAD_FAILED = "payload_failed"
    INFRASTRUCTURE_FAILED = "infrastructure_failed"
    FAILED = "failed"  # terminal and not retryable here (CANCELLED, FAILED_PRECHECKS)
    PERMANENT_BLOCKER = "permanent_blocker"
    TRANSIENT_EXPIRED = "transient_expired"
    UNREADABLE = "unreadable"
    TIMEOUT = "timeout"


class Presence(StrEnum):
    """The job in one queue answer."""

    PRESENT = "present"  # the answer lists the job's rows
    ABSENT = "absent"  # a readable answer without them: unknown on its own (rule 3)
    UNKNOWN = "unknown"  # the answer could not be read


class Answer(StrEnum):
    """The exact-name lookup, as evidence about the watched job."""

    FOUND = "found"  # the one job of that exact name is the watched id
    ABSENT = "absent"  # an authoritative answer: no job of that name
    UNKNOWN = "unknown"  # unreadable, ambiguous, another id under the name, or no name


class Recheck(StrEnum):
    """What the fresh read before a recovery allows."""

    PROCEED = "proceed"  # terminal or absent: the recovery checks may run
    WATCH_AGAIN = "watch_again"  # alive: never cancel it; supervise it again
    READ_AGAIN = "read_again"  # unreadable: read again after the interval
    UNREADABLE = "unreadable"  # unreadable too often: stop, leave the job alone


@dataclass(frozen=True, slots=True)
class WatchPolicy:
    """How a wave is supervised; ``runs.liveness`` reads the last two (0 turns either off)."""

    permanent_grace: float = 0.0  # kubernetes.md §6.3: "stop at once"
    infrastructure_grace: float = 600.0
    max_wait: float = 3600.0  # 0 = unbounded
    heartbeat_seconds: float = 60.0  # a durable proof of life this often
    stale_after_seconds: float = 300.0  # the reference's heartbeat_stale threshold (§4)


@dataclass(frozen=True, slots=True)
class Tick:
    """One queue read: the job's presence, and its status and pod blocker when present."""

    now: float
    presence: Presence
    status: str | None = None
    blocker_code: str | None = None
    blocker_class: str | None = None  # permanent | transient | payload | unknown

    def __post_init__(self) -> None:
        if (self.presence is Presence.PRESENT) != (self.status is not None):
            raise InvariantError("a tick carries a status exactly when the job is present")

    @classmethod
    def seen(
        cls,
        now: float,
        status: str,
        blocker_code: str | None = None,
        blocker_class: str | None = None,
    ) -> Tick:
        return cls(now, Presence.PRESENT, status, blocker_code, blocker_class)

    @classmethod
    def missing(cls, now: float) -> Tick:
        return cls(now, Presence.ABSENT)

    @classmethod
    def unreadable(cls, now: float) -> Tick:
        return cls(now, Presence.UNKNOWN)


@dataclass(frozen=True, slots=True)
class Lookup:
    """The exact-name lookup that ``CONFIRM_MISSING`` asked for (``lookup_of``)."""

    now: float
    answer: Answer


@dataclass(frozen=True, slots=True)
class WatchState:
    started: float
    unreadable: int = 0
    blocker_code: str | None = None
    blocker_class: str | None = None
    blocker_since: float | None = None
    last_status: str | None = None
    missing_since: float | None = None  # the first of the current run of missing reads
    missing_reads: int = 0
    confirming: bool = False  # CONFIRM_MISSING was returned; the next observation is a Lookup
    evidence: str | None = None  # JOB_MISSING_FROM_QUEUE once the absence is confirmed

    @classmethod
    def begin(cls, now: float) -> WatchState:
        return cls(started=now)


def lookup_of(found: Reconciliation | None, job_id: int, now: float) -> Lookup:
    """The lookup's answer about ``job_id``; None: there was no name to look up."""
    if found is None:
        return Lookup(now, Answer.UNKNOWN)
    if found.state is ReconciliationState.ABSENT:
        return Lookup(now, Answer.ABSENT)
    if found.state is ReconciliationState.FOUND and found.job_ids == (job_id,):
        return Lookup(now, Answer.FOUND)
    return Lookup(now, Answer.UNKNOWN)  # unavailable, ambiguous, or the name is another id's


def decide(
    state: WatchState, observation: Tick | Lookup, policy: WatchPolicy
) -> tuple[WatchState, Verdict]:
    """The next watch state and what the supervisor must do; see the module rules.

    Raises:
        InvariantError: a Lookup nobody asked for, or a Tick while one is owed.
    """
    if isinstance(observation, Lookup):  # rule 1
        return _confirmed(state, observation, policy)
    tick = observation
    if state.confirming:
        raise InvariantError("CONFIRM_MISSING must be answered with a Lookup first")
    if tick.presence is Presence.UNKNOWN:  # rule 2
        state = dataclasses.replace(state, unreadable=state.unreadable + 1)
        if state.unreadable > MAX_UNREADABLE:
            return state, Verdict.UNREADABLE
        return state, _timeout_or_wait(state, tick.now, policy)
    if tick.presence is Presence.ABSENT:  # rule 3
        return _missing(state, tick.now, policy)
    # rule 4: a present job clears any absence; a terminal status ends the watch
    state = dataclasses.replace(_present(state), unreadable=0, last_status=tick.status)
    if tick.status in TERMINAL_STATUSES:
        return _clear(state), _terminal_verdict(str(tick.status))
    state = _track_blocker(state, tick)
    held = tick.now - state.blocker_since if state.blocker_since is not None else 0.0
    if state.blocker_class == "permanent" and held >= policy.permanent_grace:  # rule 5
        return state, Verdict.PERMANENT_BLOCKER
    if state.blocker_class == "transient" and held >= policy.infrastructure_grace:  # rule 6
        return state, Verdict.TRANSIENT_EXPIRED
    return state, _timeout_or_wait(state, tick.now, policy)  # rules 7 and 8


def recheck(presence: Presence, status: str | None, unreadable: int) -> Recheck:
    """Before a recovery acts on an infrastructure failure: what the latest fresh read allows.

    ``unreadable`` counts the unreadable reads of this recheck so far, this one
    included (faults.md invariant 4: unknown never cancels or relaunches).
    """
    if presence is Presence.UNKNOWN:  # never act on an unreadable answer
        return Recheck.UNREADABLE if unreadable > MAX_UNREADABLE else Recheck.READ_AGAIN
    if presence is Presence.PRESENT and status not in TERMINAL_STATUSES:
        return Recheck.WATCH_AGAIN  # runtime-reference.md §1: never cancel a job shown alive
    return Recheck.PROCEED  # terminal, or absent right after a confirmed absence


def _missing(state: WatchState, now: float, policy: WatchPolicy) -> tuple[WatchState, Verdict]:
    """Rule 3: count the absence; ask for the exact-name lookup once it spans the window."""
    since = state.missing_since if state.missing_since is not None else now
    state = dataclasses.replace(
        state, unreadable=0, missing_since=since, missing_reads=state.missing_reads + 1
    )
    if state.missing_reads >= MIN_MISSING_READS and now - since >= policy.infrastructure_grace:
        return dataclasses.replace(state, confirming=True), Verdict.CONFIRM_MISSING
    return state, _timeout_or_wait(state, now, policy)


def _confirmed(
    state: WatchState, lookup: Lookup, policy: WatchPolicy
) -> tuple[WatchState, Verdict]:
    """Rule 1: the lookup's answer to CONFIRM_MISSING."""
    if not state.confirming or state.missing_since is None:
        raise InvariantError("a name lookup that no CONFIRM_MISSING asked for")
    state = dataclasses.replace(state, confirming=False)
    if lookup.answer is Answer.FOUND:  # alive by exact name: the reads were partial
        return _present(state), _timeout_or_wait(state, lookup.now, policy)
    if lookup.answer is Answer.UNKNOWN:  # keep watching; the next missing read asks again
        return state, _timeout_or_wait(state, lookup.now, policy)
    lost = dataclasses.replace(
        _clear(state), last_status="FAILED_CONTROLLER", evidence=JOB_MISSING_FROM_QUEUE
    )
    return lost, Verdict.INFRASTRUCTURE_FAILED


def _present(state: WatchState) -> WatchState:
    return dataclasses.replace(state, missing_since=None, missing_reads=0)


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


def _timeout_or_wait(state: WatchState, now: float, policy: WatchPolicy) -> Verdict:
    if policy.max_wait and now - state.started >= policy.max_wait:
        return Verdict.TIMEOUT
    return Verdict.WAIT
