"""The states, verdicts and records of a launch transaction (runtime-reference.md §1).

Every ``StrEnum`` value is the exact string written to the journal and to
``--json`` output, so records stay comparable with the reference. Records
are frozen; a transition returns a new one (style.md rule 3).

``TransactionRecord`` is the durable ``npa.skypilot.launch-transaction.v1``
record: it is checkpointed before every launch request and at every exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from npa_infra.runs.children import ChildIdentity

__all__ = [
    "RECORD_SCHEMA",
    "TERMINAL_CATEGORIES",
    "TRANSIENT_CATEGORIES",
    "Category",
    "Evidence",
    "Existence",
    "LaunchOutcome",
    "LaunchState",
    "Phase",
    "Reconciliation",
    "ReconciliationState",
    "RecoveryDecision",
    "RequestCheck",
    "RequestState",
    "TransactionRecord",
]

RECORD_SCHEMA = "npa.skypilot.launch-transaction.v1"


class LaunchState(StrEnum):
    """Where a transaction ended (or, for ``pending``/``launching``, where it is)."""

    PENDING = "pending"  # npa-infra: nothing decided yet (no launch request sent)
    LAUNCHING = "launching"  # npa-infra: intent committed; a launch request may be in flight
    SUBMITTED = "submitted"
    ADOPTED = "adopted"
    TERMINAL_FAILURE = "terminal_failure"
    TRANSIENT_API_FAILURE = "transient_api_failure"
    INDETERMINATE = "indeterminate"
    INTERRUPTED = "interrupted"


class ReconciliationState(StrEnum):
    FOUND = "found"
    ABSENT = "absent"
    UNAVAILABLE = "unavailable"
    AMBIGUOUS = "ambiguous"
    # one job has the name, but it is not proven this launch's own (runs.ownership)
    FOREIGN = "foreign"  # its tasks carry another launch identity
    UNPROVEN = "unproven"  # it carries none

    @property
    def not_ours(self) -> bool:
        return self in (ReconciliationState.FOREIGN, ReconciliationState.UNPROVEN)


class Evidence(StrEnum):
    """The readiness gate's verdict for the exact context."""

    READY = "ready"
    TRANSIENT_UNAVAILABLE = "transient_unavailable"
    TERMINAL = "terminal"
    AMBIGUOUS = "ambiguous"


class Category(StrEnum):
    NONE = "none"
    KUBERNETES_TRANSPORT = "kubernetes_transport"
    KUBERNETES_RATE_LIMIT = "kubernetes_rate_limit"
    KUBERNETES_SERVER = "kubernetes_server"
    API_WARMUP = "api_warmup"  # npa-infra adds: SkyPilot's API server not reachable yet
    AUTH = "auth"
    RBAC = "rbac"
    CONTEXT = "context"
    IDENTITY = "identity"
    CERTIFICATE = "certificate"
    CONFIG = "config"
    CAPACITY = "capacity"
    WORKLOAD = "workload"
    SCHEMA = "schema"
    # npa-infra adds (runs.skyoutput): the local SkyPilot install itself is broken or foreign
    SKYPILOT_VENV = "skypilot_venv"  # kubernetes client >= 36, fastapi >= 0.120 in its venv
    STALE_IAM_TOKEN = "stale_iam_token"  # an exported static Nebius IAM token was refused
    FOREIGN_API_SERVER = "foreign_api_server"  # another install's API server answered
    INTERRUPTED = "interrupted"
    UNKNOWN = "unknown"

    @property
    def transient(self) -> bool:
        return self in TRANSIENT_CATEGORIES

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_CATEGORIES


TRANSIENT_CATEGORIES = frozenset(
    {
        Category.KUBERNETES_TRANSPORT,
        Category.KUBERNETES_RATE_LIMIT,
        Category.KUBERNETES_SERVER,
        Category.API_WARMUP,
    }
)
TERMINAL_CATEGORIES = frozenset(
    {
        Category.AUTH,
        Category.RBAC,
        Category.CONTEXT,
        Category.IDENTITY,
        Category.CERTIFICATE,
        Category.CONFIG,
        Category.CAPACITY,
        Category.WORKLOAD,
        Category.SCHEMA,
        Category.SKYPILOT_VENV,
        Category.STALE_IAM_TOKEN,
        Category.FOREIGN_API_SERVER,
    }
)


class Existence(StrEnum):
    FOUND = "found"
    ABSENT = "absent"
    INDETERMINATE = "indeterminate"


class RecoveryDecision(StrEnum):
    NONE = ""
    ADOPT_EXISTING = "adopt_existing"
    BLOCK_INDETERMINATE = "block_indeterminate"
    READINESS_BLOCKED = "readiness_blocked"
    RECOVERY_DEADLINE_EXHAUSTED = "recovery_deadline_exhausted_verified_absent"
    SUBMITTED_AND_RECONCILED = "submitted_and_reconciled"
    BLOCK_AFTER_UNCERTAIN_SUCCESS = "block_after_uncertain_success"
    ADOPT_AFTER_UNCERTAIN_LAUNCH = "adopt_after_uncertain_launch"
    VERIFIED_ABSENT_NO_RETRY = "verified_absent_no_retry"
    INTERRUPTED_VERIFIED_ABSENT = "interrupted_verified_absent"
    RETRY_AFTER_VERIFIED_ABSENCE = "retry_after_verified_absence"  # in progress, not an exit
    # resume (runtime-reference.md §3)
    RESUME_BLOCK_TERMINAL_OR_LEGACY_ABSENCE = "resume_block_terminal_or_legacy_absence"
    RESUME_BLOCK_OUTPUT_PRESENT = "resume_block_output_present"
    RESUME_BLOCK_OUTPUT_INDETERMINATE = "resume_block_output_indeterminate"
    OPERATOR_AUTHORIZED_RELAUNCH = "operator_authorized_verified_absent_relaunch"


class RequestState(StrEnum):
    """A SkyPilot API request as ``sky api status`` reports it (skypilot-0.12.md §1)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    NONE_ACTIVE = "NONE_ACTIVE"  # no id known and no launch request is pending or running
    UNKNOWN = "UNKNOWN"  # the request status could not be read

    @property
    def in_flight(self) -> bool:
        return self in (RequestState.PENDING, RequestState.RUNNING)

    @property
    def settled(self) -> bool:
        """Terminal, so a queue read after it is authoritative about absence."""
        return self in (
            RequestState.SUCCEEDED,
            RequestState.FAILED,
            RequestState.CANCELLED,
            RequestState.NONE_ACTIVE,
        )


class Phase(StrEnum):
    """The point the pure machine has reached; the driver acts on the next action."""

    START = "start"
    INITIAL_RECONCILE = "initial_reconcile"
    READINESS = "readiness"
    LAUNCH = "launch"
    REQUEST_CHECK = "request_check"
    RECONCILE_AFTER_LAUNCH = "reconcile_after_launch"
    BACKOFF = "backoff"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """One exact-name lookup in ``sky jobs queue --all -o json``."""

    state: ReconciliationState
    job_ids: tuple[int, ...] = ()
    status: str | None = None  # the aggregated SkyPilot status of the one found job
    error: str = ""  # redacted, capped
    category: Category = Category.NONE
    at: float = 0.0

    @property
    def job_id(self) -> int | None:
        return self.job_ids[0] if self.state is ReconciliationState.FOUND else None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "job_id": self.job_id,
            "job_ids": list(self.job_ids),
            "status": self.status,
            "error": self.error,
            "category": self.category.value,
            "at": self.at,
        }


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """What ``sky jobs launch --async`` answered: accepted with a request id, or an error."""

    accepted: bool
    request_id: str | None = None
    error: str = ""  # redacted, capped
    category: Category = Category.NONE
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class RequestCheck:
    """``sky api status`` for the launch request (or for any active launch request)."""

    state: RequestState
    error: str = ""
    category: Category = Category.NONE  # for FAILED: classified from ``sky api logs``


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """The durable launch-transaction record; see the module docstring."""

    logical_launch_id: str
    job_name: str
    context: str | None
    started_at: float
    deadline: float  # started_at + the 180 s recovery deadline
    phase: Phase = Phase.START
    state: LaunchState = LaunchState.PENDING
    job_id: int | None = None
    launch_sequence: int = 0
    category: Category = Category.NONE
    request_ids: tuple[str, ...] = ()
    readiness: tuple[dict[str, Any], ...] = ()  # npa.skypilot.kubernetes-readiness.v1 records
    reconciliations: tuple[Reconciliation, ...] = ()
    primary_error: str = ""
    reconciliation_error: str = ""
    recovery_decision: RecoveryDecision = RecoveryDecision.NONE
    operator_remedy: str = ""
    existence: Existence = Existence.INDETERMINATE
    retries: int = 0  # transient relaunches performed inside this transaction
    accepted: bool = False  # the latest launch request was accepted (a request id came back)
    request_settled: bool = False  # that request is terminal, so a queue read is authoritative
    finished_at: float | None = None
    notes: tuple[str, ...] = field(default=())
    # npa-infra additions for the pure machine (npa_infra/runs/transaction.py):
    last_category: Category = Category.NONE  # category of the LATEST launch/request failure
    last_request_state: RequestState | None = None  # latest `sky api status` answer
    outcome_pending: bool = False  # intent committed for launch_sequence, no outcome yet
    backoff_delay: float = 0.0  # the sleep chosen in phase BACKOFF
    poll_delay: float = 0.0  # > 0: wait this long, then reconcile (REQUEST_CHECK; settle)
    # the released ``sky jobs launch`` child of the latest request, until its answer is durable
    launch_child: ChildIdentity | None = None

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA,
            "state": self.state.value,
            "phase": self.phase.value,
            "logical_launch_id": self.logical_launch_id,
            "job_name": self.job_name,
            "job_id": self.job_id,
            "launch_sequence": self.launch_sequence,
            "category": self.category.value,
            "request_ids": list(self.request_ids),
            "readiness": list(self.readiness),
            "reconciliations": [r.to_json() for r in self.reconciliations],
            "primary_error": self.primary_error,
            "reconciliation_error": self.reconciliation_error,
            "recovery_decision": self.recovery_decision.value,
            "operator_remedy": self.operator_remedy,
            "existence": self.existence.value,
            "retries": self.retries,
            "accepted": self.accepted,
            "request_settled": self.request_settled,
            "controller": {"selected_context": self.context},
            "started_at": self.started_at,
            "deadline": self.deadline,
            "finished_at": self.finished_at,
            "notes": list(self.notes),
            "last_category": self.last_category.value,
            "last_request_state": (
                None if self.last_request_state is None else self.last_request_state.value
            ),
            "outcome_pending": self.outcome_pending,
            "backoff_delay": self.backoff_delay,
            "poll_delay": self.poll_delay,
            "launch_child": None if self.launch_child is None else self.launch_child.to_json(),
        }
