"""The typed results of ``npa stack …`` and the exit codes beside them (cli.md §6).

Exit codes of every ``npa stack`` subcommand:

| code | meaning |
|---|---|
| 0 | done; for ``preview``/``refresh`` without ``--yes``: no changes, or changes without a flag asking to fail on them |
| 1 | an error, ``confirmation_required`` (``up``/``destroy``/``refresh`` without ``--yes``), or ``blocked_active_jobs`` |
| 2 | ``preview``/``refresh``: changes present with ``--detailed-exitcode`` or ``--expect-no-changes``; ``destroy``: ``controller_unproven`` (the controller's queue could not be read) |
| 3 | the engine is missing: no ``pulumi`` CLI, or no provider plugin |
| 64 | a usage error (no JSON on stdout) |

Secret output values never appear unless ``--show-secrets`` asked for them:
they are the string ``[secret]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue, computed_field

from npa_infra.stack.report import PreviewReport

__all__ = [
    "CONTROLLER_EXIT_CODES",
    "SECRET_MASK",
    "BlockingJob",
    "ControllerReport",
    "ControllerStatus",
    "DestroyReport",
    "DestroyStatus",
    "EngineUpdate",
    "GateReport",
    "LaunchInFlight",
    "OutputEntry",
    "OutputsReport",
    "StackOutputs",
    "UpReport",
    "UpStatus",
    "UpdateSummary",
    "masked",
    "preview_exit_code",
]

SECRET_MASK = "[secret]"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def preview_exit_code(
    report: PreviewReport, *, detailed_exitcode: bool, expect_no_changes: bool
) -> int:
    """0, or 2 when changes are present and a flag asks to see them in the exit code."""
    return 2 if report.changes_present and (detailed_exitcode or expect_no_changes) else 0


@dataclass(frozen=True, slots=True)
class OutputEntry:
    """One stack output as the engine holds it; a secret value never shows in a repr."""

    value: JsonValue
    secret: bool = False

    def __repr__(self) -> str:
        shown = SECRET_MASK if self.secret else repr(self.value)
        return f"OutputEntry(value={shown}, secret={self.secret})"

    def shown(self, *, show_secrets: bool = False) -> JsonValue:
        return self.value if show_secrets or not self.secret else SECRET_MASK


def masked(outputs: dict[str, OutputEntry], *, show_secrets: bool = False) -> dict[str, JsonValue]:
    return {k: v.shown(show_secrets=show_secrets) for k, v in sorted(outputs.items())}


class UpdateSummary(_Model):
    """The engine's summary of one update (``pulumi stack history``'s latest entry)."""

    kind: str
    result: str  # succeeded | failed | in-progress
    resource_changes: dict[str, int]


@dataclass(frozen=True, slots=True)
class EngineUpdate:
    """What an ``up`` returns: the engine's summary and the outputs it left."""

    summary: UpdateSummary
    outputs: dict[str, OutputEntry] = field(default_factory=dict)


class UpStatus(StrEnum):
    UPDATED = "updated"
    CONFIRMATION_REQUIRED = "confirmation_required"


class UpReport(_Model):
    """``npa stack up`` / ``refresh --yes``: the summary and the (masked) outputs."""

    status: UpStatus
    stack: str
    summary: UpdateSummary | None = None
    outputs: dict[str, JsonValue] = {}
    preview: PreviewReport | None = None  # without --yes: what would change

    @property
    def exit_code(self) -> int:
        return 0 if self.status is UpStatus.UPDATED else 1


class ControllerStatus(StrEnum):
    """The outcome of the controller's teardown gate (``npa skypilot cleanup-controller``)."""

    REMOVED = "removed"
    ALREADY_GONE = "already_gone"
    REFUSED = "refused"
    WOULD_REMOVE = "would_remove"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    UNKNOWN = "unknown"  # the queue could not be proven: nothing was torn down


CONTROLLER_EXIT_CODES = {
    ControllerStatus.REMOVED: 0,
    ControllerStatus.ALREADY_GONE: 0,
    ControllerStatus.REFUSED: 1,
    ControllerStatus.WOULD_REMOVE: 1,
    ControllerStatus.TIMED_OUT: 1,
    ControllerStatus.FAILED: 1,
    ControllerStatus.UNKNOWN: 2,
}


class BlockingJob(_Model):
    """A managed job that holds the controller up, of any user."""

    id: int
    name: str
    user: str
    status: str


class LaunchInFlight(_Model):
    """A launch recorded in flight in the state directory (not yet in the queue, maybe)."""

    run_id: str
    job_name: str
    home: str  # the npa home whose journal holds the run; "?" when the record is unreadable


class ControllerReport(_Model):
    """What the controller's teardown gate saw and did (cli.md style: one object, ``status``)."""

    status: ControllerStatus
    stack: str
    state_dir: str
    controller: str
    reason: str
    blocking_jobs: list[BlockingJob] = []
    launches_in_flight: list[LaunchInFlight] = []
    next: list[str] = []
    deadline_seconds: float
    detail: str = ""
    sky_down_calls: int = 0
    queue_reads: int = 0

    @property
    def exit_code(self) -> int:
        return CONTROLLER_EXIT_CODES[self.status]


class DestroyStatus(StrEnum):
    DESTROYED = "destroyed"
    CONFIRMATION_REQUIRED = "confirmation_required"
    BLOCKED_ACTIVE_JOBS = "blocked_active_jobs"
    CONTROLLER_FAILED = "controller_teardown_failed"  # `sky down` failed: its text in controller
    CONTROLLER_UNPROVEN = "controller_unproven"  # the queue gate could not prove it safe


class GateReport(_Model):
    verdict: Literal["clear", "blocked_active_jobs"]
    active_runs: list[dict[str, str]] = []


class DestroyReport(_Model):
    """``npa stack destroy``: the gate, any runs cancelled first, and the engine's summary."""

    status: DestroyStatus
    stack: str
    gate: GateReport
    cancelled_runs: list[dict[str, str]] = []
    controller: ControllerReport | None = None  # the all-users queue gate of the controller
    summary: UpdateSummary | None = None

    @property
    def exit_code(self) -> int:
        if self.status is DestroyStatus.DESTROYED:
            return 0
        return 2 if self.status is DestroyStatus.CONTROLLER_UNPROVEN else 1


class OutputsReport(_Model):
    """``npa stack outputs``: every output, secret ones masked unless asked for."""

    project: str
    stack: str
    backend_url: str
    outputs: dict[str, JsonValue]
    secret_keys: list[str] = []

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed-field form
    @property
    def status(self) -> Literal["ok"]:
        """Every ``--json`` object has a ``status`` (issue 17); outputs that were read: ``ok``."""
        return "ok"

    @property
    def exit_code(self) -> int:
        return 0


class StackOutputs(_Model):
    """The outputs ``submit --stack`` consumes instead of ad-hoc flags (pulumi.md §3)."""

    context: str
    namespace: str
    namespaces: list[str] = []
    service_account: str = ""
    pull_secret_names: list[str] = []
    src_s3_uri: str = ""
    controller_name: str = ""
    skypilot_config_path: str = ""
    isolated_config_dir: str = ""
