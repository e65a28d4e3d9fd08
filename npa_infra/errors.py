"""The one error tree of npa-infra.

Every failure a user can cause or meet is an ``NpaError``: a one-sentence
``message`` in user terms, a ``remedy`` naming the next command, an
``exit_code`` scripts can rely on, and JSON-safe ``details`` (never a secret).

    NpaError
    ├── UsageError            bad flags or arguments (exit 64, sysexits' EX_USAGE)
    ├── SpecError             the workflow spec is invalid (exit 1); carries located issues
    ├── RenderError           a valid plan cannot be rendered for SkyPilot (exit 1)
    ├── ConfigError           local configuration or environment is missing or wrong (exit 1)
    │   ├── MissingSecretError    a --secret-env name has no value anywhere we may look
    │   ├── StackConfigError      a stack configuration file is invalid; carries located issues
    │   ├── ProjectError          --project/--stack select nothing, or two different targets;
    │                             an unreadable project entry (``details.reason``)
    │   └── SkyPilotDriftError    the pinned SkyPilot venv drifted (kubernetes client >= 36,
    │                             fastapi >= 0.120), or another API server holds the port;
    │                             raised before any live action runs the binary
    ├── KubeError             a Kubernetes call failed; ``kind`` says terminal or transient (exit 1)
    ├── StorageError          an object-store (S3) call failed; ``kind`` says absent, forbidden,
    │                         no such bucket, unavailable (transient) or unknown (exit 1)
    ├── PreflightError        a pre-launch check refused the run: nothing was launched (exit 1);
    │                         e.g. a GPU request the cluster cannot satisfy
    ├── ExternalError         an external tool or service failed (pip, the package index);
    │                         retrying after the named fix may succeed (exit 1)
    ├── EngineUnavailableError  the Pulumi engine (the `pulumi` CLI or a provider plugin) is
    │                         not installed; the remedy is the install command (exit 3)
    ├── StackLockedError      another Pulumi operation holds the stack's lock (exit 1)
    ├── RunLockedError        another process holds this run's lock; its holder is named (exit 1)
    ├── RunStateError         the run's journal forbids the request (unknown run, changed spec,
    │                         a sticky block); the remedy says what is allowed (exit 1)
    ├── LaunchFailedError     a launch definitely did not happen, or the run failed (exit 1)
    ├── UncertainOutcomeError a launch may or may not exist; the remedy is the exact
    │                         `--resume-run` command, never a new id or a cancel by name (exit 2)
    ├── RunCancelledError     an operator cancelled the run; no further launch (exit 1)
    ├── InterruptedRunError   Ctrl-C after the checkpoint was written (exit 130; 143 for
    │                         SIGTERM and 129 for SIGHUP, set by the CLI: npa_infra.signals)
    └── NotYetAvailableError  the capability is planned but not built in this version (exit 1)

``InvariantError`` is a bug, not a user error: it derives from ``RuntimeError``
and is never caught below the CLI's top-level handler.

``ExitCode`` is the one table of process exit codes (README "Exit codes"):
every command gives each number the same meaning.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_infra.spec.issues import SpecIssue

__all__ = [
    "ConfigError",
    "EngineUnavailableError",
    "ExitCode",
    "ExternalError",
    "InterruptedRunError",
    "InvariantError",
    "KubeError",
    "LaunchFailedError",
    "MissingSecretError",
    "NotYetAvailableError",
    "NpaError",
    "PreflightError",
    "ProjectError",
    "RenderError",
    "RunCancelledError",
    "RunLockedError",
    "RunStateError",
    "SkyPilotDriftError",
    "SpecError",
    "StackConfigError",
    "StackLockedError",
    "StorageError",
    "UncertainOutcomeError",
    "UsageError",
]

JsonDetails = dict[str, object]


class ExitCode(IntEnum):
    """What an ``npa`` exit code means, the same for every command."""

    OK = 0
    FAILED = 1  # a definite failure or refusal: nothing is left in doubt
    UNPROVEN = 2  # the outcome is not proven: continue with the printed command
    NO_ENGINE = 3  # the Pulumi engine (CLI or a provider plugin) is not installed
    USAGE = 64  # the command line is wrong (sysexits' EX_USAGE); nothing was done
    HANGUP = 129  # interrupted by SIGHUP
    INTERRUPTED = 130  # interrupted by Ctrl-C (SIGINT)
    CLOSED_PIPE = 141  # stdout's reader went away (`| head`): 128 + SIGPIPE, as `cat` exits
    TERMINATED = 143  # interrupted by SIGTERM


class NpaError(Exception):
    """Base of every expected failure: a message, a remedy and an exit code."""

    exit_code: int = 1
    category: str = "error"

    def __init__(
        self,
        message: str,
        *,
        remedy: str = "",
        exit_code: int | None = None,
        details: JsonDetails | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        if exit_code is not None:
            self.exit_code = exit_code
        self.details: JsonDetails = dict(details or {})


class UsageError(NpaError):
    """The command line itself is wrong."""

    exit_code = ExitCode.USAGE
    category = "usage"


class SpecError(NpaError):
    """The spec failed validation; ``issues`` holds every located problem."""

    category = "spec"

    def __init__(
        self,
        issues: list[SpecIssue],
        *,
        source: str = "",
        warnings: list[SpecIssue] | None = None,
        remedy: str = "",
    ) -> None:
        first = issues[0].message if issues else "invalid spec"
        super().__init__(
            f"{len(issues)} problem(s) in {source or 'spec'}: {first}",
            # a file-level refusal (a FIFO, a directory, oversize) passes a remedy that fits
            remedy=remedy
            or "fix the listed fields, then rerun `npa workbench workflow validate-spec`",
        )
        self.issues = issues
        self.source = source
        # issue 18: warnings are always shown, after the errors, and in --json
        self.warnings = list(warnings or [])


class RenderError(NpaError):
    """A valid plan cannot be turned into SkyPilot task YAML."""

    category = "render"


class ConfigError(NpaError):
    """Local configuration or environment is missing or inconsistent."""

    category = "config"


class MissingSecretError(ConfigError):
    """A requested secret name has no value in the environment or the stack."""

    category = "secret"


class StackConfigError(ConfigError):
    """A stack configuration file is invalid; ``issues`` holds every located problem."""

    category = "stack_config"

    def __init__(self, issues: list[SpecIssue], *, source: str = "") -> None:
        first = issues[0] if issues else None
        where = source
        if first is not None and first.line:
            where = f"{source}:{first.line}:{first.column}"
        headline = first.headline() if first is not None else "invalid stack configuration"
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(
            f"{where}: {headline}{more}",
            remedy=(first.hint if first is not None and first.hint else "")
            or "fix the listed keys of the stack configuration file",
            details={
                "file": source,
                "issues": [
                    {
                        "path": i.path,
                        "line": i.line,
                        "column": i.column,
                        "message": i.message,
                        "hint": i.hint,
                    }
                    for i in issues
                ],
            },
        )
        self.issues = issues
        self.source = source


class ProjectError(ConfigError):
    """The stack/project selection is unknown, unreadable or contradictory (issue 16)."""

    category = "project"


class SkyPilotDriftError(ConfigError):
    """The SkyPilot a live action would run misses its pins; ``details["reason"]`` says how."""

    category = "skypilot_drift"


class ExternalError(NpaError):
    """An external tool or service failed; the remedy names what to fix before retrying."""

    category = "external"


class EngineUnavailableError(NpaError):
    """The Pulumi engine is missing: the ``pulumi`` CLI, or a provider plugin it needs."""

    exit_code = ExitCode.NO_ENGINE
    category = "engine_unavailable"


class StackLockedError(NpaError):
    """Another Pulumi operation holds the stack's lock; wait for it, or cancel it if it died."""

    category = "stack_locked"


class KubeError(NpaError):
    """A Kubernetes API call failed; ``details["kind"]`` holds the ``KubeErrorKind`` value."""

    category = "kubernetes"


class StorageError(NpaError):
    """An object-store call failed; ``details["kind"]`` holds the ``StorageErrorKind`` value."""

    category = "storage"


class PreflightError(NpaError):
    """A check before launch refused the run; the remedy says what to change first."""

    category = "preflight"


class NotYetAvailableError(NpaError):
    """A capability this version does not provide yet."""

    category = "unavailable"


class RunLockedError(NpaError):
    """Another process holds the run's lock; ``details`` names the holder."""

    category = "locked"


class RunStateError(NpaError):
    """The run's journal does not allow what was asked (unknown run, changed spec, sticky block)."""

    category = "run_state"


class LaunchFailedError(NpaError):
    """A launch definitely did not happen (verified absent), or the run failed."""

    category = "launch_failed"


class UncertainOutcomeError(NpaError):
    """The launch may or may not exist; only ``--resume-run`` with the same arguments is safe."""

    exit_code = ExitCode.UNPROVEN
    category = "indeterminate"


class RunCancelledError(NpaError):
    """An operator cancelled the run (``workflow cancel``): no further launch is made."""

    category = "cancelled"


class InterruptedRunError(NpaError):
    """The operator interrupted the command after its checkpoint was written."""

    exit_code = ExitCode.INTERRUPTED
    category = "interrupted"


class InvariantError(RuntimeError):
    """An internal invariant was broken: a bug in npa-infra, never user input."""
