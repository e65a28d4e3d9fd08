"""May the shared jobs controller go now? The teardown gate of ``sky down`` (skypilot-0.12.md §5.4).

The controller is shared: every user's managed jobs run on it, so only the
queue of **every** user (``sky jobs queue --all --all-users``) of the exact
state directory can say that tearing it down orphans nothing; the local
journal knows this machine's runs only. ``decide`` reads one observation of
that queue, the deadline and the last ``sky down`` answer, and names the next
step; the driver (``stack.controllerdown``) executes it and asks again:

- a job that is not terminal and not CANCELLING (PENDING, STARTING, RUNNING,
  RECOVERING, …) **refuses**, naming each job's id, name and user;
- jobs that are only CANCELLING are **waited** for until the bounded deadline,
  then the teardown is refused as **timed out**;
- a launch recorded in flight in the state directory (``journal.inflight``: a
  request that may still be accepted, not yet in the queue) holds the down
  off: it is **waited** for until the deadline (then **timed out**), refused
  without ``--yes``, and records that cannot be listed **fail closed**; this
  holds even with no controller up, since such a launch may be starting one;
- a queue that is verified all-terminal or verified empty lets the ``sky down``
  go (**down**), only when the caller confirmed it (else **would remove**);
- no controller at all (the exact ClusterNotUpError of §3.3) is a successful
  no-op (**already gone**), so the teardown is repeat-safe;
- SkyPilot's own "In-progress managed jobs found" refusal re-reads the queue
  (**retry after drain**); any other ``sky down`` failure **stops** with its text;
- a queue that is unknown, unavailable or partial **fails closed**: never a down
  on an unproven queue (faults.md invariant 4).

Everything here is pure: statuses are strings, ``now`` is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.runs import supervision

__all__ = [
    "DRAINING",
    "TERMINAL",
    "Action",
    "Decision",
    "DownKind",
    "GateInput",
    "ManagedJob",
    "PendingLaunch",
    "QueueKind",
    "QueueObservation",
    "Reason",
    "decide",
    "job_status",
]

TERMINAL = supervision.TERMINAL_STATUSES  # SUCCEEDED, CANCELLED, every FAILED* (§4.1)
DRAINING = "CANCELLING"  # not terminal, but on its way: the only status worth waiting for


class QueueKind(StrEnum):
    JOBS = "jobs"  # a verified all-users answer listing jobs
    EMPTY = "empty"  # a verified all-users answer listing none (the controller is up)
    CONTROLLER_ABSENT = "controller_absent"  # authoritative: no controller (§3.3)
    UNKNOWN = "unknown"  # unavailable, unreadable or partial: proves nothing


class DownKind(StrEnum):
    NONE = "none"  # no ``sky down`` sent yet
    REMOVED = "removed"  # the controller was torn down
    ALREADY_ABSENT = "already_absent"  # "Managed jobs controller has already been torn down."
    IN_PROGRESS = "in_progress"  # "In-progress managed jobs found" (nothing torn down)
    FAILED = "failed"  # any other failure, with its text


class Action(StrEnum):
    REFUSE = "refuse"
    WAIT = "wait"
    DOWN = "down"
    WOULD_REMOVE = "would_remove"
    REMOVED = "removed"
    ALREADY_GONE = "already_gone"
    RETRY_AFTER_DRAIN = "retry_after_drain"
    STOP_FAILED = "stop_failed"
    FAIL_CLOSED = "fail_closed"
    TIMED_OUT = "timed_out"


class Reason(StrEnum):
    TORN_DOWN = "torn_down"
    DOWN_FOUND_NOTHING = "down_found_no_controller"
    DOWN_FAILED = "down_failed"
    REFUSAL_PAST_DEADLINE = "in_progress_refusal_past_deadline"
    REFUSAL_REREAD = "in_progress_refusal_reread_queue"
    NOT_OBSERVED = "queue_not_observed"
    QUEUE_UNKNOWN = "queue_unknown"
    NO_CONTROLLER = "no_controller"
    ACTIVE_JOBS = "active_jobs"
    DRAINING_UNCONFIRMED = "cancelling_jobs_unconfirmed"
    DRAIN_PAST_DEADLINE = "cancelling_jobs_past_deadline"
    DRAINING = "cancelling_jobs"
    UNCONFIRMED = "confirmation_required"
    LAUNCHES_UNKNOWN = "launch_records_unknown"
    LAUNCHES_IN_FLIGHT = "launches_in_flight"
    LAUNCHES_UNCONFIRMED = "launches_in_flight_unconfirmed"
    LAUNCHES_PAST_DEADLINE = "launches_in_flight_past_deadline"
    ALL_TERMINAL = "queue_all_terminal"
    EMPTY = "queue_empty"


@dataclass(frozen=True, slots=True)
class ManagedJob:
    """One managed job of the queue, its tasks collapsed (``job_status``)."""

    job_id: int
    name: str
    user: str
    status: str

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def describe(self) -> str:
        return f"job {self.job_id} {self.name!r} of user {self.user} ({self.status})"


@dataclass(frozen=True, slots=True)
class PendingLaunch:
    """A launch into this state directory recorded in flight: accepted or not, not settled."""

    run_id: str
    job_name: str
    home: str  # the npa home whose journal holds it; "?" when its record is unreadable

    def describe(self) -> str:
        return f"run {self.run_id}'s launch of {self.job_name!r} from npa home {self.home}"


@dataclass(frozen=True, slots=True)
class QueueObservation:
    kind: QueueKind
    jobs: tuple[ManagedJob, ...] = ()
    detail: str = ""  # why it is unknown, in the adapter's words


@dataclass(frozen=True, slots=True)
class GateInput:
    """The latest queue read (None: none since the last ``sky down``), the deadline, the down."""

    queue: QueueObservation | None
    last_down: DownKind = DownKind.NONE
    down_detail: str = ""
    deadline_passed: bool = False
    confirmed: bool = False  # ``--yes``: only then is ``sky down`` sent
    # the in-flight launch records of the state directory; None: they could not be listed
    launches: tuple[PendingLaunch, ...] | None = ()


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: Reason
    blocking: tuple[ManagedJob, ...] = ()  # non-terminal jobs other than CANCELLING
    draining: tuple[ManagedJob, ...] = ()  # CANCELLING jobs
    detail: str = ""
    launches: tuple[PendingLaunch, ...] = ()  # launches in flight that hold the down off

    def describe(self) -> str:
        """What holds the controller up: each job's id, name and user, each launch's run."""
        held = [j.describe() for j in (*self.blocking, *self.draining)]
        held += [launch.describe() for launch in self.launches]
        return "; ".join(held) if held else self.detail


def job_status(task_statuses: Sequence[str]) -> str:
    """One status per job for the teardown: a task that blocks wins, then CANCELLING.

    A job is terminal only when every task is: a pipeline with one failed task
    and one still RUNNING holds the controller (unlike the launch view, which
    reports the failure first).
    """
    for status in task_statuses:
        if status not in TERMINAL and status != DRAINING:
            return status
    if DRAINING in task_statuses:
        return DRAINING
    failed = [s for s in task_statuses if s != "SUCCEEDED"]
    return failed[0] if failed else "SUCCEEDED"


def _split(jobs: Sequence[ManagedJob]) -> tuple[tuple[ManagedJob, ...], tuple[ManagedJob, ...]]:
    blocking = tuple(j for j in jobs if not j.terminal and j.status != DRAINING)
    draining = tuple(j for j in jobs if j.status == DRAINING)
    return blocking, draining


def _launches_hold(
    gate: GateInput, draining: tuple[ManagedJob, ...], launches: tuple[PendingLaunch, ...]
) -> Decision:
    """Launches in flight: wait for them to settle within the deadline, only under --yes."""
    if not gate.confirmed:
        return Decision(
            Action.REFUSE, Reason.LAUNCHES_UNCONFIRMED, draining=draining, launches=launches
        )
    if gate.deadline_passed:
        return Decision(
            Action.TIMED_OUT, Reason.LAUNCHES_PAST_DEADLINE, draining=draining, launches=launches
        )
    return Decision(Action.WAIT, Reason.LAUNCHES_IN_FLIGHT, draining=draining, launches=launches)


def decide(gate: GateInput) -> Decision:
    """The next step of the teardown (module docstring); total over every input."""
    # §5.4: a definite `sky down` answer ends the teardown
    if gate.last_down is DownKind.REMOVED:
        return Decision(Action.REMOVED, Reason.TORN_DOWN)
    if gate.last_down is DownKind.ALREADY_ABSENT:
        return Decision(Action.ALREADY_GONE, Reason.DOWN_FOUND_NOTHING)
    # §5.4: any failure other than the in-progress refusal stops with SkyPilot's text
    if gate.last_down is DownKind.FAILED:
        return Decision(Action.STOP_FAILED, Reason.DOWN_FAILED, detail=gate.down_detail)
    # §5.4: SkyPilot saw a job in progress: read the queue again (bounded by the deadline)
    if gate.last_down is DownKind.IN_PROGRESS and gate.queue is None:
        if gate.deadline_passed:
            return Decision(Action.TIMED_OUT, Reason.REFUSAL_PAST_DEADLINE, detail=gate.down_detail)
        return Decision(Action.RETRY_AFTER_DRAIN, Reason.REFUSAL_REREAD, detail=gate.down_detail)
    queue = gate.queue
    # faults.md invariant 4: no down without a queue read that proves it
    if queue is None:
        return Decision(Action.FAIL_CLOSED, Reason.NOT_OBSERVED)
    if queue.kind is QueueKind.UNKNOWN:
        return Decision(Action.FAIL_CLOSED, Reason.QUEUE_UNKNOWN, detail=queue.detail)
    if gate.launches is None:
        return Decision(Action.FAIL_CLOSED, Reason.LAUNCHES_UNKNOWN)
    blocking, draining = _split(queue.jobs)
    # §4.1: a job that is not terminal (and not being cancelled) would be orphaned
    if blocking:
        return Decision(Action.REFUSE, Reason.ACTIVE_JOBS, blocking, draining)
    # issue 24: a launch not yet in the queue would be lost with the controller
    if gate.launches:
        return _launches_hold(gate, draining, gate.launches)
    # §3.3: no controller, so nothing to tear down: a successful no-op
    if queue.kind is QueueKind.CONTROLLER_ABSENT:
        return Decision(Action.ALREADY_GONE, Reason.NO_CONTROLLER, detail=queue.detail)
    # §4.2: CANCELLING reaches CANCELLED on its own; wait for it, within the deadline
    if draining and not gate.confirmed:
        return Decision(Action.WOULD_REMOVE, Reason.DRAINING_UNCONFIRMED, draining=draining)
    if draining and gate.deadline_passed:
        return Decision(Action.TIMED_OUT, Reason.DRAIN_PAST_DEADLINE, draining=draining)
    if draining:
        return Decision(Action.WAIT, Reason.DRAINING, draining=draining)
    reason = Reason.EMPTY if queue.kind is QueueKind.EMPTY else Reason.ALL_TERMINAL
    # the `delete` prompt is answered only under --yes
    if not gate.confirmed:
        return Decision(Action.WOULD_REMOVE, Reason.UNCONFIRMED, detail=reason.value)
    return Decision(Action.DOWN, reason)
