"""Typed answers of the SkyPilot 0.12 CLI (skypilot-0.12.md §2-§5).

Statuses and verdicts are ``StrEnum``s whose values are the strings SkyPilot
prints and npa journals. Every record is immutable.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "TERMINAL_STATUSES",
    "ApiRequest",
    "ApiStatusResult",
    "CancelResult",
    "CommandResult",
    "DownOutcome",
    "DownResult",
    "ErrorKind",
    "JobStatus",
    "LaunchResult",
    "QueueRecord",
    "QueueResult",
    "QueueVerdict",
]


class JobStatus(StrEnum):
    PENDING = "PENDING"
    SUBMITTED = "SUBMITTED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    WINDING_DOWN = "WINDING_DOWN"
    RECOVERING = "RECOVERING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    FAILED_PRECHECKS = "FAILED_PRECHECKS"
    FAILED_NO_RESOURCE = "FAILED_NO_RESOURCE"
    FAILED_CONTROLLER = "FAILED_CONTROLLER"

    @property
    def terminal(self) -> bool:
        """SUCCEEDED, CANCELLED and every FAILED*; CANCELLING is not terminal (§4.1)."""
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
        JobStatus.FAILED,
        JobStatus.FAILED_SETUP,
        JobStatus.FAILED_PRECHECKS,
        JobStatus.FAILED_NO_RESOURCE,
        JobStatus.FAILED_CONTROLLER,
    }
)


class ErrorKind(StrEnum):
    """What a failed ``sky`` call means, grouped by what may be done next."""

    NONE = "none"
    API_WARMUP = "api_warmup"  # the local API server is not (yet) reachable: transient
    TRANSPORT = "transport"  # connection reset/timeout talking to the server: transient
    RATE_LIMIT = "rate_limit"  # HTTP 429: transient
    SERVER = "server"  # HTTP 5xx: transient
    TIMEOUT = "timeout"  # the command did not finish in time: outcome unknown
    CLUSTER_NOT_UP = "cluster_not_up"  # no jobs controller: authoritative for queue
    AUTH = "auth"
    RBAC = "rbac"
    CONTEXT = "context"
    USAGE = "usage"  # exit 2: our argv is wrong
    ABORTED = "aborted"  # a prompt was declined
    NOT_FOUND = "not_found"  # the binary is missing
    UNKNOWN = "unknown"

    @property
    def transient(self) -> bool:
        return self in (
            ErrorKind.API_WARMUP,
            ErrorKind.TRANSPORT,
            ErrorKind.RATE_LIMIT,
            ErrorKind.SERVER,
        )


class CommandResult(NamedTuple):
    """One finished (or timed-out) process: what it printed and how it ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False  # output was longer than what the runner keeps (runner.py)


_IN_FLIGHT_ORDER = (
    JobStatus.RUNNING,
    JobStatus.RECOVERING,
    JobStatus.STARTING,
    JobStatus.PENDING,
    JobStatus.CANCELLING,
)


class QueueVerdict(StrEnum):
    RECORDS = "records"  # a parsed list (possibly empty)
    VERIFIED_EMPTY = "verified_empty"  # ClusterNotUpError: no controller, hence no jobs
    UNAVAILABLE = "unavailable"  # anything we cannot prove: never treated as empty


class QueueRecord(NamedTuple):
    """One row of ``sky jobs queue -o json``: one task of a managed job (§3.2)."""

    job_id: int
    task_id: int
    job_name: str
    task_name: str
    status: JobStatus
    submitted_at: float | None = None
    end_at: float | None = None
    failure_reason: str | None = None
    cluster_name_on_cloud: str | None = None
    user_hash: str | None = None
    user_name: str | None = None  # filled with ``--all-users`` (§3.2)
    # the task's npa launch identity (runs.ownership), from ``metadata``: filled with ``-v``
    launch_id: str | None = None


class QueueResult(NamedTuple):
    verdict: QueueVerdict
    records: tuple[QueueRecord, ...] = ()
    error_kind: ErrorKind = ErrorKind.NONE
    detail: str = ""

    def by_name(self, name: str) -> tuple[QueueRecord, ...]:
        """Rows whose job name is exactly ``name``."""
        return tuple(r for r in self.records if r.job_name == name)

    def job_ids(self, name: str) -> tuple[int, ...]:
        """Distinct job ids carrying exactly ``name``, ascending."""
        return tuple(sorted({r.job_id for r in self.by_name(name)}))

    def status_of(self, job_id: int) -> JobStatus | None:
        """One status for a multi-task job (runtime-reference.md §1, exact lookup):
        any FAILED* or CANCELLED; else SUCCEEDED when every task succeeded; else the
        first present of RUNNING, RECOVERING, STARTING, PENDING, CANCELLING."""
        rows = sorted((r for r in self.records if r.job_id == job_id), key=lambda r: r.task_id)
        if not rows:
            return None
        statuses = [r.status for r in rows]
        for status in statuses:
            if status.terminal and status is not JobStatus.SUCCEEDED:
                return status
        if all(s is JobStatus.SUCCEEDED for s in statuses):
            return JobStatus.SUCCEEDED
        for candidate in _IN_FLIGHT_ORDER:
            if candidate in statuses:
                return candidate
        return statuses[0]


class LaunchResult(NamedTuple):
    """``sky jobs launch``: whether the request was accepted. Never a job id (§2.2)."""

    accepted: bool
    request_id: str | None
    error_kind: ErrorKind
    detail: str
    command: CommandResult


class CancelResult(NamedTuple):
    """``sky jobs cancel -y IDS``: the acknowledgement only; it is not proof (§4.2)."""

    scheduled: tuple[int, ...]
    nothing_to_cancel: bool
    error_kind: ErrorKind
    detail: str
    command: CommandResult


class DownOutcome(StrEnum):
    TORN_DOWN = "torn_down"
    ALREADY_ABSENT = "already_absent"
    BLOCKED_IN_PROGRESS = "blocked_in_progress"
    FAILED = "failed"


class DownResult(NamedTuple):
    outcome: DownOutcome
    error_kind: ErrorKind
    detail: str
    command: CommandResult


class ApiRequest(NamedTuple):
    """One row of ``sky api status -o json`` (skypilot-0.12.md §1, §2.4)."""

    request_id: str
    name: str
    status: str  # PENDING RUNNING SUCCEEDED FAILED CANCELLED


class ApiStatusResult(NamedTuple):
    """``sky api status``: the rows, or why they could not be read (never guessed)."""

    readable: bool
    requests: tuple[ApiRequest, ...] = ()
    error_kind: ErrorKind = ErrorKind.NONE
    detail: str = ""
