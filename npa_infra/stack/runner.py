"""``StackRunner``: the stack driven through Pulumi's Automation API (pulumi.md §2, §5.2).

One ``LocalWorkspace`` in the project directory (so ``Pulumi.yaml`` and its
``stackConfigDir: stacks`` apply, and ``stacks/Pulumi.<name>.yaml`` is the
stack's config), with the inline program for the validated configuration,
``PULUMI_HOME`` and the backend URL in the engine's environment, and the
passphrase secrets provider for new stacks. The ``PulumiCommand`` is
injectable: tests pass one that replays recorded engine event logs. The
constructor does no I/O; the first call builds the workspace (which runs
``pulumi version``) and selects or creates the stack.

``translate`` is the one mapping of engine failures to ``NpaError``s, each
with the fix (style.md rule 8):

| engine failure | error | exit |
|---|---|---|
| no ``pulumi`` binary, or a CLI too old for the SDK | EngineUnavailableError | 3 |
| a provider plugin missing (``no resource plugin 'pulumi-resource-…'``) | EngineUnavailableError | 3 |
| wrong or missing passphrase | ConfigError | 1 |
| the stack's lock is held (``currently locked by``, ``[409] Conflict``) | StackLockedError | 1 |
| a plan would delete a protected resource | ConfigError | 1 |
| no such stack in the backend | ConfigError | 1 |
| the program raised, or the engine ended without a summary | ExternalError | 1 |
| any other non-zero exit | ExternalError | 1 |
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import SecretStr

from npa_infra.errors import (
    ConfigError,
    EngineUnavailableError,
    ExternalError,
    InvariantError,
    NpaError,
    StackLockedError,
)
from npa_infra.stack import report
from npa_infra.stack.config import PROJECT
from npa_infra.stack.models import EngineUpdate, OutputEntry, UpdateSummary

if TYPE_CHECKING:
    from pulumi import automation as auto

__all__ = [
    "INSTALL_DOCS",
    "INSTALL_HINT",
    "MAX_SECRET_BYTES",
    "RunnerSettings",
    "StackRunner",
    "convert",
    "missing_cli",
    "translate",
]

INSTALL_DOCS = "https://www.pulumi.com/docs/iac/download-install/"
INSTALL_HINT = (
    "install the Pulumi CLI: curl -fsSL https://get.pulumi.com | sh "
    f"(then put ~/.pulumi/bin on PATH); see {INSTALL_DOCS}"
)
_PLUGIN = re.compile(
    r"resource plugin '?pulumi-resource-(?P<name>[A-Za-z0-9_-]+)'?"
    r"(?: found in the workspace)? at version v?(?P<version>[0-9][0-9A-Za-z.+-]*)"
)
_NOT_FOUND = re.compile(r"no stack named .* found")
_CODE = re.compile(r"code: (-?\d+)")
_TAIL = 2000
_MISSING_KEY = re.compile(r"configuration key .* not found")
MAX_SECRET_BYTES = 32 * 1024  # below a pipe's capacity, so writing it never blocks
T = TypeVar("T")
Events = list[report.StepEvent | report.DiagnosticEvent]


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """Where and how to run the engine for one stack; holds no secret value."""

    stack: str
    project_root: Path
    backend_url: str
    pulumi_home: Path
    program: Callable[[], None]
    env_vars: Mapping[str, str]  # added to the engine's environment (never argv)
    config_file: Path | None = None
    on_output: Callable[[str], None] | None = None


@contextmanager
def _stdin_holding(text: str) -> Iterator[None]:
    """File descriptor 0 reads ``text`` (then end of file) while the block runs.

    A child started inside inherits it; the process's own stdin is restored after.

    Raises:
        ConfigError: ``text`` is larger than ``MAX_SECRET_BYTES``.
    """
    data = text.encode("utf-8")
    if len(data) > MAX_SECRET_BYTES:
        raise ConfigError(
            f"a secret value is larger than {MAX_SECRET_BYTES} bytes",
            remedy="store a smaller value (a token or a key), or a path to the file instead",
        )
    read, write = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write, view) :]
    finally:
        os.close(write)
    saved = os.dup(0)
    try:
        os.dup2(read, 0)
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def missing_cli() -> EngineUnavailableError:
    return EngineUnavailableError("pulumi CLI not found", remedy=INSTALL_HINT)


def _tail(text: str) -> str:
    return text[-_TAIL:]


def translate(
    exc: BaseException,
    *,
    operation: str,
    stack: str,
    pulumi_home: Path,
    diagnostics: Sequence[str] = (),
) -> NpaError:
    """The ``NpaError`` for a failure of ``pulumi <operation>``; chain it with ``from``.

    ``diagnostics`` are the error messages the engine's events carried; the
    first specific one (not the closing "update failed") names the cause.
    """
    from pulumi.automation import errors as auto_errors

    if isinstance(exc, NpaError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return missing_cli()
    if isinstance(exc, auto_errors.InvalidVersionError):
        return EngineUnavailableError(
            f"the installed pulumi CLI is not usable by this SDK: {exc}", remedy=INSTALL_HINT
        )
    text = report.strip_ansi("\n".join([str(exc), *diagnostics]))
    code = _CODE.search(text)
    details: dict[str, object] = {
        "operation": operation,
        "stack": stack,
        "error_type": type(exc).__name__,
        "code": int(code.group(1)) if code else None,
        "output": _tail(text),
    }
    plugin = _PLUGIN.search(text)
    if plugin:
        name, version = plugin.group("name"), plugin.group("version")
        return EngineUnavailableError(
            f"the Pulumi {name} provider plugin v{version} is not installed",
            remedy=f"PULUMI_HOME={pulumi_home} pulumi plugin install resource {name} {version}",
            details=details,
        )
    if "incorrect passphrase" in text:
        return ConfigError(
            f"the passphrase does not decrypt stack {stack}'s secrets",
            remedy="set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to the "
            "passphrase this stack was created with",
            details=details,
        )
    if "passphrase must be set" in text:
        return ConfigError(
            f"no passphrase for stack {stack}'s secrets",
            remedy="export PULUMI_CONFIG_PASSPHRASE_FILE=<a file holding it> "
            "(or PULUMI_CONFIG_PASSPHRASE)",
            details=details,
        )
    if "because it is protected" in text:
        return ConfigError(
            f"pulumi {operation} would delete a protected resource of stack {stack}",
            remedy=f"npa stack destroy --stack {stack} --exclude-protected --yes keeps it; to "
            "delete it, set npa-infra:protectNamespaces: false and run npa stack up first",
            details=details,
        )
    if isinstance(exc, auto_errors.ConcurrentUpdateError) or "currently locked by" in text:
        return StackLockedError(
            f"another Pulumi operation holds stack {stack}'s lock",
            remedy=f"wait for it to finish; if it died, run `pulumi cancel --stack {stack}` "
            "(a file backend's lock is a file under .pulumi/locks)",
            details=details,
        )
    if isinstance(exc, auto_errors.StackNotFoundError) or _NOT_FOUND.search(text):
        return ConfigError(
            f"stack {stack} does not exist in the backend",
            remedy=f"create it with `npa stack up --stack {stack} --yes`, or pass --backend-url",
            details=details,
        )
    if isinstance(
        exc,
        (
            auto_errors.InlineSourceRuntimeError,
            auto_errors.RuntimeError,
            auto_errors.CompilationError,
        ),
    ):
        return ExternalError(
            f"the stack program failed during {operation}: {_first_error(text)}",
            remedy="fix the cause above, then rerun; `npa stack preview` shows it without changes",
            details=details,
        )
    if isinstance(exc, RuntimeError) and "summary event never found" in text:
        return ExternalError(
            f"pulumi {operation} ended without reporting a summary",
            remedy="rerun; if it persists, run `pulumi about` and check the CLI version",
            details=details,
        )
    cause = next((d for d in diagnostics if d and not d.endswith(" failed")), "")
    return ExternalError(
        f"pulumi {operation} failed: {(cause or _first_error(text))[:300]}",
        remedy=f"read the engine output above; `npa stack preview --stack {stack}` is safe to rerun",
        details=details,
    )


def _first_error(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("error:"):
            return stripped.removeprefix("error:").strip()[:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:300]


def _step(holder: Any, outputs: bool) -> report.StepEvent:
    md = holder.metadata
    detailed = {path: diff.diff_kind.value for path, diff in (md.detailed_diff or {}).items()}
    return report.StepEvent(
        op=md.op.value,
        urn=md.urn,
        type=md.type,
        diffs=tuple(md.diffs or ()),
        keys=tuple(md.keys or ()),
        detailed_diff=detailed,
        gone=outputs and md.op.value == "refresh" and md.new is None,
    )


def convert(event: Any) -> report.StepEvent | report.DiagnosticEvent | None:
    """Our value for one SDK ``EngineEvent``; ``None`` for events the report ignores."""
    if event.resource_pre_event is not None:
        return _step(event.resource_pre_event, outputs=False)
    if event.res_outputs_event is not None:
        return _step(event.res_outputs_event, outputs=True)
    if event.diagnostic_event is not None and not event.diagnostic_event.ephemeral:
        d = event.diagnostic_event
        return report.DiagnosticEvent(d.severity, d.message, d.urn)
    if event.res_op_failed_event is not None:
        md = event.res_op_failed_event.metadata
        return report.DiagnosticEvent("error", f"{md.op.value} of {md.urn} failed", md.urn)
    return None


def _summary(summary: Any) -> UpdateSummary:
    if summary is None:
        raise InvariantError("the engine returned no update summary")
    changes = {str(k): int(v) for k, v in (summary.resource_changes or {}).items()}
    return UpdateSummary(kind=summary.kind, result=summary.result, resource_changes=changes)


class StackRunner:
    """The real ``StackEngine`` (see the module docstring). Constructing it does no I/O."""

    def __init__(
        self, settings: RunnerSettings, *, command: auto.PulumiCommand | None = None
    ) -> None:
        self.settings = settings
        self._command = command
        self._stack_obj: auto.Stack | None = None

    # -- StackEngine ---------------------------------------------------------------
    def preview(self, *, diff: bool = False) -> report.PreviewReport:
        events: Events = []
        result = self._call(
            "preview", events, lambda s, common: s.preview(diff=diff or None, **common)
        )
        return self._report(events, result.change_summary)

    def refresh_preview(self) -> report.PreviewReport:
        events: Events = []
        result = self._call(
            "refresh --preview-only",
            events,
            lambda s, common: s.preview_refresh(show_secrets=False, **common),
        )
        return self._report(events, result.change_summary)

    def up(self) -> EngineUpdate:
        with self._mutation("up"):
            result = self._call("up", [], lambda s, common: s.up(show_secrets=False, **common))
        outputs = {k: OutputEntry(v.value, bool(v.secret)) for k, v in result.outputs.items()}
        return EngineUpdate(_summary(result.summary), outputs)

    def interrupted(self) -> list[dict[str, Any]]:
        """The ``up``/``destroy`` operations earlier npa processes began and never saw end:
        records whose process is gone (a live one belongs to a concurrent operation, which
        the engine's own stack lock turns away)."""
        found: list[dict[str, Any]] = []
        for path in sorted(self._operations_dir().glob("*.json")):
            try:
                raw = json.loads(path.read_bytes())
            except (OSError, ValueError):
                raw = {"operation": "unknown", "pid": 0}
            if not isinstance(raw, dict):
                raw = {"operation": "unknown", "pid": 0}
            if not _alive(int(raw.get("pid") or 0)):
                found.append({**raw, "record": str(path)})
        return found

    def _operations_dir(self) -> Path:
        return self.settings.pulumi_home / "npa-operations" / self.settings.stack

    @contextmanager
    def _mutation(self, operation: str) -> Iterator[None]:
        """Intent before ``up``/``destroy``, outcome after (faults.md invariant 5).

        An earlier process that died inside one may have left the engine's checkpoint
        with pending operations; a ``refresh`` first reconciles the state with the
        cloud, so this operation starts from what exists. The record (one per process)
        is removed once the engine answered (success or a translated failure); an
        interrupt or a crash leaves it for the next operation.
        """
        from npa_infra.journal import files

        earlier = self.interrupted()
        if earlier:
            self.refresh()
            for record in earlier:
                Path(str(record["record"])).unlink(missing_ok=True)
        directory = self._operations_dir()
        old = os.umask(0o077)
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        finally:
            os.umask(old)
        path = directory / f"{os.getpid()}.json"
        intent: dict[str, Any] = {"operation": operation, "pid": os.getpid(), "at": time.time()}
        if earlier:
            intent["after_interrupted"] = [r.get("operation", "unknown") for r in earlier]
        files.replace_private(path, json.dumps(intent, sort_keys=True).encode("utf-8"))
        try:
            yield
        except NpaError:
            path.unlink(missing_ok=True)  # the engine answered: its checkpoint is the outcome
            raise
        path.unlink(missing_ok=True)

    def refresh(self) -> UpdateSummary:
        result = self._call(
            "refresh", [], lambda s, common: s.refresh(show_secrets=False, **common)
        )
        return _summary(result.summary)

    def destroy(self, *, exclude_protected: bool = False) -> UpdateSummary:
        with self._mutation("destroy"):
            result = self._call(
                "destroy",
                [],
                lambda s, common: s.destroy(
                    show_secrets=False, exclude_protected=exclude_protected or None, **common
                ),
            )
        return _summary(result.summary)

    def outputs(self) -> dict[str, OutputEntry]:
        values = self._call("stack output", [], lambda s, _: s.outputs())
        return {k: OutputEntry(v.value, bool(v.secret)) for k, v in values.items()}

    def set_secret_config(self, key: str, value: SecretStr) -> None:
        """``pulumi config set KEY --secret``, the value on the child's stdin, never its argv.

        The Automation API's ``set_config`` passes the value as the last argument
        (``-- VALUE``), where any local user reads it in ``ps``. The CLI reads the
        value from stdin when none is given and stdin is not a terminal, so the
        runner runs that command itself with the value in a pipe as its stdin.
        """
        args = ["config", "set", key, "--secret", "--stack", self.settings.stack]
        if self.settings.config_file is not None:
            args += ["--config-file", str(self.settings.config_file)]
        with self._translated("config set"):
            self._stack()  # selected (or created) first, as every operation
            command = self._command
            if command is None:  # pragma: no cover - _stack() always sets it
                raise InvariantError("the Pulumi command was not built")
            with _stdin_holding(value.get_secret_value()):
                command.run(args, str(self.settings.project_root), self._engine_env())

    def secret_config(self, key: str) -> SecretStr | None:
        """``pulumi config get KEY --json``: the decrypted value (read from the child's stdout)."""
        from pulumi.automation import errors as auto_errors

        with self._translated("config get"):
            try:
                found = self._stack().get_config(key)
            except auto_errors.CommandError as exc:
                if _MISSING_KEY.search(str(exc)):
                    return None
                raise
        return SecretStr(str(found.value))

    def _engine_env(self) -> dict[str, str]:
        """What the workspace adds to every engine call's environment (never argv)."""
        return {"PULUMI_HOME": str(self.settings.pulumi_home), **self.settings.env_vars}

    # -- plumbing --------------------------------------------------------------------
    def _config_file(self) -> str | None:
        return str(self.settings.config_file) if self.settings.config_file else None

    def _report(
        self,
        events: list[report.StepEvent | report.DiagnosticEvent],
        change_summary: Mapping[Any, int],
    ) -> report.PreviewReport:
        counts = {getattr(k, "value", str(k)): int(v) for k, v in change_summary.items()}
        return report.build(
            events,
            counts,
            project=PROJECT,
            stack=self.settings.stack,
            backend_url=self.settings.backend_url,
        )

    def _call(
        self,
        operation: str,
        events: Events,
        fn: Callable[[auto.Stack, dict[str, Any]], T],
    ) -> T:
        """``fn(stack, common)`` with engine failures translated.

        ``common`` holds the keywords every engine operation takes; the operation adds
        its own (``preview`` has no ``show_secrets``, so only the others pass it).
        """

        def collect(event: Any) -> None:
            converted = convert(event)
            if converted is not None:
                events.append(converted)

        common: dict[str, Any] = {
            "color": "never",
            "on_event": collect,
            "on_output": self.settings.on_output,
            "config_file": self._config_file(),
        }
        with self._translated(operation, events):
            return fn(self._stack(), common)

    @contextmanager
    def _translated(self, operation: str, events: Events | None = None) -> Iterator[None]:
        from pulumi.automation import errors as auto_errors

        try:
            yield
        except (
            auto_errors.CommandError,
            auto_errors.InvalidVersionError,
            FileNotFoundError,
        ) as exc:
            raise self._error(exc, operation, events) from exc
        except RuntimeError as exc:
            if "summary event never found" not in str(exc):
                raise  # not the engine's (an InvariantError is a bug): the top-level handler's
            raise self._error(exc, operation, events) from exc

    def _error(self, exc: BaseException, operation: str, events: Events | None) -> NpaError:
        diagnostics = [
            report.strip_ansi(e.message).strip()
            for e in events or ()
            if isinstance(e, report.DiagnosticEvent) and e.severity == "error"
        ]
        return translate(
            exc,
            operation=operation,
            stack=self.settings.stack,
            pulumi_home=self.settings.pulumi_home,
            diagnostics=diagnostics,
        )

    def _stack(self) -> auto.Stack:
        if self._stack_obj is None:
            from pulumi import automation as auto

            with self._translated("stack select"):
                command = self._command or auto.PulumiCommand()
                self._command = command  # set_secret_config runs it directly
                options = auto.LocalWorkspaceOptions(
                    work_dir=str(self.settings.project_root),
                    pulumi_home=str(self.settings.pulumi_home),
                    env_vars=dict(self.settings.env_vars),
                    secrets_provider="passphrase",
                    pulumi_command=command,
                )
                self._stack_obj = auto.create_or_select_stack(
                    self.settings.stack,
                    project_name=PROJECT,
                    program=self.settings.program,
                    opts=options,
                )
        return self._stack_obj
