"""What a live run is handed, what it returns, and how its remedies are spelled.

``LiveRequest`` is the planning half's hand-over (``submission.pipeline``) to the
run (``supervision.runner``); ``LiveResult`` is what the run reports.
``resume_command`` and ``outcome_error`` are here, below both the runner and the
wave loop, because every failure of either ends with the same next command:
the ``--resume-run`` invocation built from the submit's options, never
re-spelled (issue 15 item 9).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra.errors import (
    InterruptedRunError,
    InvariantError,
    LaunchFailedError,
    NpaError,
    UncertainOutcomeError,
)
from npa_infra.runs import skyoutput
from npa_infra.runs.models import Category, LaunchState, TransactionRecord

if TYPE_CHECKING:
    from npa_infra.plan.model import DecisionPoint
    from npa_infra.render.documents import RenderedJob
    from npa_infra.workflow.execution.recovery import Recomputed
    from npa_infra.workflow.target.credentials import ProjectSecrets
    from npa_infra.workflow.target.stackfile import StackSettings

__all__ = [
    "SUCCESS_STATES",
    "LiveRequest",
    "LiveResult",
    "RoutedPlan",
    "outcome_error",
    "resume_command",
]

SUCCESS_STATES = (LaunchState.SUBMITTED, LaunchState.ADOPTED)


@dataclass(frozen=True, slots=True)
class RoutedPlan:
    """The rendered jobs of a runtime plan prefix (one per wave, one per batch of a
    wide parallel group), and the decision it waits on."""

    jobs: Sequence[RenderedJob]
    pending: DecisionPoint | None
    decisions_used: tuple[tuple[str, str], ...] = ()
    # declared, per job of the route by its position (the journal's wave index)
    outputs: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    schemas: Mapping[str, str] = field(default_factory=dict)  # declared output URI → schema label


@dataclass(frozen=True, slots=True)
class LiveRequest:
    """What the planning half of ``submit`` hands over."""

    spec_path: Path
    run_id: str
    workflow: str
    mode: str  # one-shot | runtime | raw
    fingerprint: str
    jobs: Sequence[RenderedJob]
    stack: StackSettings | None
    stack_name: str | None
    infra: str | None
    secret_names: Sequence[str]
    resume: bool
    invocation: Sequence[str]  # the resume command's argv, from the options (submitflags)
    sky_bin: str | None = None
    isolated_config_dir: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    replan: Callable[[Mapping[str, str]], RoutedPlan] | None = None  # runtime routing
    # (decisions, wave) -> that wave's identity recomputed from the spec file as it is now
    # (submission.reidentification); a verified relaunch compares it with the attempt's (issue 9).
    reidentify: Callable[[Mapping[str, str], int], Recomputed] | None = None
    # Stages or verifies the NPA source (submission.sourcing.apply); returns the journal record.
    stage_source: Callable[[], Mapping[str, Any]] | None = None
    # the selected project's credentials, between the environment and the stack's file
    project: ProjectSecrets | None = None


@dataclass(slots=True)
class LiveResult:
    run_id: str
    workflow: str
    mode: str
    status: str
    job_id: int | None
    job_ids: list[int]
    submitted_yaml_path: str | None
    transactions: list[dict[str, Any]]
    error: NpaError | None = None
    exit_code: int = 0
    warnings: list[dict[str, str]] = field(default_factory=list)  # the drift gate's advisories
    launch_logs: list[str] = field(default_factory=list)  # launchlog files, in launch order
    known_failures: list[dict[str, str]] = field(default_factory=list)  # runs.skyoutput

    def to_json(self) -> dict[str, Any]:
        last = self.transactions[-1] if self.transactions else None
        payload: dict[str, Any] = {
            "status": self.status,
            "run_id": self.run_id,
            "workflow": self.workflow,
            "mode": self.mode,
            "job_id": self.job_id,
            "sky_job_ids": self.job_ids,
            "submitted_yaml_path": self.submitted_yaml_path,
            "launch_transaction": last,
            "launch_transactions": self.transactions,
            "warnings": self.warnings,
            "launch_log": self.launch_logs[-1] if self.launch_logs else None,
            "launch_logs": self.launch_logs,
            "known_failure": self.known_failures[-1] if self.known_failures else None,
            "error": None,
        }
        if self.error is not None:
            payload["error"] = {
                "category": self.error.category,
                "message": self.error.message,
                "remedy": self.error.remedy,
            }
        return payload


def resume_command(invocation: Sequence[str], run_id: str) -> str:
    """The shell form of the request's resume command (``submitflags.resume_argv``).

    Raises:
        InvariantError: ``invocation`` does not resume ``run_id``: it was not built
            from the submit's options, and a remedy made from it could launch another run.
    """
    if list(invocation[-2:]) != ["--resume-run", run_id]:
        raise InvariantError(f"the resume command of run {run_id} does not resume it")
    return shlex.join(invocation)


def outcome_error(record: TransactionRecord, command: str) -> NpaError | None:
    """The error a finished transaction maps to (cli.md §1.4 exit codes), or None."""
    if record.state in SUCCESS_STATES:
        return None
    reason = f"{record.recovery_decision.value or record.state.value} ({record.category.value})"
    details: dict[str, object] = {
        "logical_launch_id": record.logical_launch_id,
        "job_name": record.job_name,
    }
    if record.state is LaunchState.INTERRUPTED:
        return InterruptedRunError(
            f"interrupted; the launch record is saved: {reason}",
            remedy=f"rerun: {command}",
            details=details,
        )
    if record.launch_sequence == 0:
        held = bool(record.reconciliations) and record.reconciliations[-1].state.not_ours
        generic = (
            f"fix the cause and rerun: {command} (no launch request was sent; nothing to clean up)"
        )
        return LaunchFailedError(
            f"nothing was launched: {reason}"
            + (
                f": {record.primary_error or record.reconciliation_error}"
                if (record.primary_error or record.reconciliation_error)
                else ""
            ),
            # a job holding the name that is not this launch's stays: a rerun finds it again
            remedy=record.operator_remedy if held and record.operator_remedy else generic,
            details=details,
        )
    if record.state is LaunchState.TERMINAL_FAILURE:
        # Sent, then read absent: not proof (the operator guide: any failure after a launch
        # may have been issued remains recovery-required). The resume looks the name up
        # again and adopts a job that appeared; after this failure it never relaunches.
        latest = record.category if record.last_category is Category.NONE else record.last_category
        fix = skyoutput.remedy_for(latest) or "fix the cause"  # a known install failure's own
        return UncertainOutcomeError(
            f"the launch was sent and failed, and {record.job_name} read absent once its "
            f"request settled (one read is not proof that no job exists): {reason}: "
            f"{record.primary_error}",
            remedy=f"rerun: {command} (it looks the job up again by its exact name and adopts "
            f"it if it exists; it does not relaunch); once it stays absent, {fix} and submit "
            "a new run",
            details=details,
        )
    return UncertainOutcomeError(
        f"the launch outcome is not proven: {reason}",
        remedy=record.operator_remedy or f"rerun the identical command: {command}",
        details=details,
    )
