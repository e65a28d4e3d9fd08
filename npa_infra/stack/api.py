"""The stack SDK: what ``npa stack preview|up|refresh|destroy|outputs`` call (cli.md §6).

Each function resolves the same things in the same order, then drives one
``StackEngine``:

1. the engine: a ``pulumi`` binary on ``PATH``, else ``EngineUnavailableError``
   (exit 3) before anything else (cli.md §0);
2. the project directory (the nearest ``Pulumi.yaml`` of project npa-infra)
   and the stack's configuration file, validated with located errors;
3. the exact kubeconfig context: it must exist in the first kubeconfig file
   and its namespace must be the stack's (skypilot-0.12.md §9.1), and
   ``--context`` must name it if given: never a different cluster;
4. the backend: ``--backend-url``, then ``PULUMI_BACKEND_URL``, then
   ``file://$NPA_HOME/pulumi-state`` (created 0700); ``PULUMI_HOME`` defaults
   to ``$NPA_HOME/pulumi-home`` (the plugin cache);
5. the passphrase, unless the stack names another secrets provider:
   ``PULUMI_CONFIG_PASSPHRASE`` or ``PULUMI_CONFIG_PASSPHRASE_FILE``, else the
   file ``$NPA_HOME/pulumi-passphrase`` (0600) when it exists. It reaches the
   engine through its environment only, never argv, and is never logged.

``destroy`` first proves the engine usable (it reads the stack's outputs)
whenever it may act before the engine's destroy, then runs the terminal-run
gate (``gate``): active runs block it (``blocked_active_jobs``) unless a
``cancel_run`` callback was passed (the workflow layer's ``--cancel-runs``)
and ``yes`` is set; then every active run of the stack is cancelled by its
exact id, and the gate is asked again. Then the controller's gate on the
queue of every user (``controller_gate``: ``stack.controllerdown``) refuses,
waits for CANCELLING jobs, and tears the controller down under ``yes``. The
engine's own controller teardown runs the same gates again.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.stack import config as stack_config
from npa_infra.stack import gate
from npa_infra.stack.base import StackEngine
from npa_infra.stack.models import (
    ControllerReport,
    ControllerStatus,
    DestroyReport,
    DestroyStatus,
    GateReport,
    OutputEntry,
    OutputsReport,
    StackOutputs,
    UpReport,
    UpStatus,
    masked,
)
from npa_infra.stack.report import PreviewReport
from npa_infra.stack.runner import RunnerSettings, missing_cli

__all__ = [
    "ControllerGate",
    "EngineFactory",
    "StackRequest",
    "destroy",
    "open_engine",
    "outputs",
    "preview",
    "refresh",
    "secret_config",
    "set_secret_config",
    "settings_for",
    "stack_outputs",
    "up",
]

EngineFactory = Callable[[RunnerSettings], StackEngine]
CancelRun = Callable[[str], str]  # run id -> the cancel outcome (cli.md §1.6)
# (stack, its outputs, yes) -> the controller's teardown gate (stack.controllerdown)
ControllerGate = Callable[[str, dict[str, OutputEntry], bool], ControllerReport]
_PASSTHROUGH = ("NPA_HOME", "KUBECONFIG", "NPA_SKYPILOT_BIN", "PULUMI_CONFIG_PASSPHRASE_FILE")


@dataclass(frozen=True, slots=True)
class StackRequest:
    """The options every ``npa stack`` subcommand shares (cli.md §6)."""

    stack: str = "dev"
    project_root: Path | None = None  # default: the nearest Pulumi.yaml of npa-infra
    backend_url: str | None = None
    context: str | None = None  # if given, must be the stack's own context
    config_file: Path | None = None
    on_output: Callable[[str], None] | None = field(default=None, compare=False)


def open_engine(settings: RunnerSettings) -> StackEngine:
    """The Pulumi engine of one stack (Automation API): the real ``EngineFactory``."""
    from npa_infra.stack.runner import StackRunner

    return StackRunner(settings)


def _require_cli(env: Mapping[str, str]) -> None:
    if shutil.which("pulumi", path=env.get("PATH", os.defpath)) is None:
        raise missing_cli()


def _check_context(
    cfg: stack_config.StackConfig, request: StackRequest, env: Mapping[str, str]
) -> None:
    from npa_infra.kube import kubeconfig

    if request.context is not None and request.context != cfg.context:
        raise ConfigError(
            f"--context {request.context} is not stack {request.stack}'s context ({cfg.context})",
            remedy=f"drop --context, or use the stack whose context is {request.context}",
        )
    _, context = kubeconfig.resolve(cfg.context, env)
    if context.namespace != cfg.namespace:
        raise ConfigError(
            f"context {cfg.context} uses namespace {context.namespace}, but stack "
            f"{request.stack} runs in {cfg.namespace}: SkyPilot would place pods elsewhere",
            remedy=f"kubectl config set-context {cfg.context} --namespace {cfg.namespace}",
        )


def _backend_url(request: StackRequest, env: Mapping[str, str], home: Path) -> str:
    chosen = request.backend_url or env.get("PULUMI_BACKEND_URL") or ""
    if chosen:
        return chosen
    state = home / "pulumi-state"
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    return f"file://{state}"


def _passphrase_env(
    loaded: stack_config.LoadedStack, env: Mapping[str, str], home: Path
) -> dict[str, str]:
    if loaded.secrets_provider and not loaded.secrets_provider.startswith("passphrase"):
        return {}
    if "PULUMI_CONFIG_PASSPHRASE" in env:
        if os.environ.get("PULUMI_CONFIG_PASSPHRASE") != env["PULUMI_CONFIG_PASSPHRASE"]:
            return {"PULUMI_CONFIG_PASSPHRASE": env["PULUMI_CONFIG_PASSPHRASE"]}
        return {}  # inherited by the engine as it is; never copied where a repr could show it
    if env.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return {"PULUMI_CONFIG_PASSPHRASE_FILE": env["PULUMI_CONFIG_PASSPHRASE_FILE"]}
    default = home / "pulumi-passphrase"
    if default.is_file():
        if stat.S_IMODE(default.stat().st_mode) & 0o077:
            raise ConfigError(
                f"{default} is readable by other users",
                remedy=f"chmod 600 {default}",
            )
        return {"PULUMI_CONFIG_PASSPHRASE_FILE": str(default)}
    raise ConfigError(
        f"no passphrase for stack {loaded.name}'s secrets",
        remedy="export PULUMI_CONFIG_PASSPHRASE_FILE=<a 0600 file holding it> (or "
        f"PULUMI_CONFIG_PASSPHRASE), or write it to {default}; a new stack takes the "
        "passphrase you choose, so keep it",
    )


def _inline_program(
    stack: str, cfg: stack_config.StackConfig, root: Path, env: Mapping[str, str]
) -> Callable[[], None]:
    """The Automation API's inline program; it resolves its inputs only when the engine runs it.

    So ``outputs`` and ``destroy``, which never run it, neither import the
    Kubernetes SDK nor read (fingerprint) the source tree.
    """

    def run() -> None:
        from npa_infra.stack import program

        program.build(program.program_inputs(stack, cfg, root, env))

    return run


def settings_for(
    request: StackRequest, env: Mapping[str, str], *, check_context: bool = True
) -> RunnerSettings:
    """Resolve steps 2-5 of the module docstring (no engine call).

    Raises:
        ConfigError, StackConfigError, KubeError: the named problem, with its fix.
    """
    root = request.project_root or stack_config.find_project_root(Path.cwd())
    loaded = stack_config.load_stack_file(request.stack, root, config_file=request.config_file)
    stack_config.require_engine_fields(
        loaded.config, label=str(loaded.path), secure_keys=loaded.secure_keys
    )
    if check_context:
        _check_context(loaded.config, request, env)
    home = npa_config.npa_home(env)
    backend = _backend_url(request, env, home)
    pulumi_home = Path(env.get("PULUMI_HOME") or home / "pulumi-home")
    env_vars = {k: env[k] for k in _PASSTHROUGH if env.get(k)}
    env_vars.update(_passphrase_env(loaded, env, home))
    env_vars.update({"PULUMI_BACKEND_URL": backend, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    cfg, stack = loaded.config, request.stack
    return RunnerSettings(
        stack=stack,
        project_root=root,
        backend_url=backend,
        pulumi_home=pulumi_home,
        program=_inline_program(stack, cfg, root, env),
        env_vars=env_vars,
        config_file=request.config_file,
        on_output=request.on_output,
    )


def _engine(
    request: StackRequest,
    env: Mapping[str, str],
    factory: EngineFactory | None,
    *,
    check_context: bool = True,
) -> tuple[StackEngine, RunnerSettings]:
    _require_cli(env)
    settings = settings_for(request, env, check_context=check_context)
    return (factory or open_engine)(settings), settings


def preview(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    diff: bool = False,
    engine_factory: EngineFactory | None = None,
) -> PreviewReport:
    """What ``up`` would change (exit codes: ``models.preview_exit_code``).

    Raises:
        EngineUnavailableError, ConfigError, StackConfigError, KubeError, StackLockedError,
            ExternalError: see the module docstring and runner.translate.
    """
    engine, _ = _engine(request, env, engine_factory)
    return engine.preview(diff=diff)


def up(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    yes: bool,
    engine_factory: EngineFactory | None = None,
) -> UpReport:
    """Without ``yes``: the preview and ``confirmation_required``; with it, the update.

    Raises:
        Same as ``preview``.
    """
    engine, _ = _engine(request, env, engine_factory)
    if not yes:
        return UpReport(
            status=UpStatus.CONFIRMATION_REQUIRED, stack=request.stack, preview=engine.preview()
        )
    update = engine.up()
    return UpReport(
        status=UpStatus.UPDATED,
        stack=request.stack,
        summary=update.summary,
        outputs=masked(update.outputs),
    )


def refresh(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    yes: bool,
    engine_factory: EngineFactory | None = None,
) -> PreviewReport | UpReport:
    """Without ``yes``: the drift report (nothing written); with it, the refreshed state.

    Raises:
        Same as ``preview``.
    """
    engine, _ = _engine(request, env, engine_factory)
    if not yes:
        return engine.refresh_preview()
    return UpReport(status=UpStatus.UPDATED, stack=request.stack, summary=engine.refresh())


def _gate_report(decision: gate.GateDecision) -> GateReport:
    return GateReport(
        verdict="clear" if decision.clear else "blocked_active_jobs",
        active_runs=[{"run_id": r.run_id, "status": r.status} for r in decision.active],
    )


def destroy(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    yes: bool,
    exclude_protected: bool = False,
    cancel_run: CancelRun | None = None,
    engine_factory: EngineFactory | None = None,
    controller_gate: ControllerGate | None = None,
) -> DestroyReport:
    """The teardown order: the engine proven usable, the run gate (cancelling first when
    asked), the controller's all-users queue gate, then the engine's destroy.

    Raises:
        Same as ``preview``; ConfigError when the journal cannot be read.
    """
    engine, _ = _engine(request, env, engine_factory)
    stack_outputs: dict[str, OutputEntry] | None = None
    decision = gate.decide(gate.observe_home(env, stack=request.stack))
    cancelled: list[dict[str, str]] = []
    if not decision.clear and cancel_run is not None and yes:
        # the engine is proven usable (stack selected, state and secrets readable) before
        # anything is cancelled: an unusable one would leave the runs cancelled and the
        # stack standing
        stack_outputs = engine.outputs()
        for run in decision.active:
            if run.stack == request.stack:  # only the stack's own runs, by exact id
                cancelled.append({"run_id": run.run_id, "outcome": cancel_run(run.run_id)})
        decision = gate.decide(gate.observe_home(env, stack=request.stack))
    report = _gate_report(decision)
    if not decision.clear:
        return DestroyReport(
            status=DestroyStatus.BLOCKED_ACTIVE_JOBS,
            stack=request.stack,
            gate=report,
            cancelled_runs=cancelled,
        )
    controller = None
    if controller_gate is not None:  # the same proof before the controller may go
        stack_outputs = engine.outputs() if stack_outputs is None else stack_outputs
        controller = controller_gate(request.stack, stack_outputs, yes)
    held = _controller_status(controller)
    if held is not None:
        return DestroyReport(
            status=held,
            stack=request.stack,
            gate=report,
            cancelled_runs=cancelled,
            controller=controller,
        )
    if not yes:
        return DestroyReport(
            status=DestroyStatus.CONFIRMATION_REQUIRED,
            stack=request.stack,
            gate=report,
            controller=controller,
        )
    summary = engine.destroy(exclude_protected=exclude_protected)
    return DestroyReport(
        status=DestroyStatus.DESTROYED,
        stack=request.stack,
        gate=report,
        cancelled_runs=cancelled,
        controller=controller,
        summary=summary,
    )


def _controller_status(controller: ControllerReport | None) -> DestroyStatus | None:
    """The destroy's status when the controller's queue gate holds it; None when clear."""
    if controller is None or controller.status in (
        ControllerStatus.REMOVED,
        ControllerStatus.ALREADY_GONE,
        ControllerStatus.WOULD_REMOVE,
    ):
        return None
    if controller.status is ControllerStatus.FAILED:
        return DestroyStatus.CONTROLLER_FAILED
    if controller.status is ControllerStatus.UNKNOWN:
        return DestroyStatus.CONTROLLER_UNPROVEN
    return DestroyStatus.BLOCKED_ACTIVE_JOBS


def outputs(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    show_secrets: bool = False,
    engine_factory: EngineFactory | None = None,
) -> OutputsReport:
    """The stack's outputs; secret values are ``[secret]`` unless ``show_secrets``.

    Raises:
        Same as ``preview`` (the kube context is not checked: outputs only read state).
    """
    engine, settings = _engine(request, env, engine_factory, check_context=False)
    values = engine.outputs()
    return OutputsReport(
        project=stack_config.PROJECT,
        stack=request.stack,
        backend_url=settings.backend_url,
        outputs=masked(values, show_secrets=show_secrets),
        secret_keys=sorted(k for k, v in values.items() if v.secret),
    )


def stack_outputs(
    request: StackRequest,
    *,
    env: Mapping[str, str],
    engine_factory: EngineFactory | None = None,
) -> StackOutputs:
    """The outputs ``submit --stack`` consumes (pulumi.md §3: runs never re-derive them).

    Raises:
        Same as ``outputs``; ConfigError when the stack has never been brought up.
    """
    values = outputs(request, env=env, engine_factory=engine_factory).outputs
    if not values.get("controller_name"):
        raise ConfigError(
            f"stack {request.stack} has no outputs yet",
            remedy=f"npa stack up --stack {request.stack} --yes",
        )
    known = {k: v for k, v in values.items() if k in StackOutputs.model_fields}
    return StackOutputs.model_validate(known)


def set_secret_config(
    request: StackRequest,
    values: Mapping[str, SecretStr],
    *,
    env: Mapping[str, str],
    engine_factory: EngineFactory | None = None,
) -> None:
    """Store each ``values`` entry as the stack's secret config (key -> value).

    The values reach the engine on its stdin, never its argv (``StackRunner``).

    Raises:
        Same as ``outputs`` (the kube context is not checked: nothing is deployed).
    """
    engine, _ = _engine(request, env, engine_factory, check_context=False)
    for key, value in values.items():
        engine.set_secret_config(key, value)


def secret_config(
    request: StackRequest,
    keys: Sequence[str],
    *,
    env: Mapping[str, str],
    engine_factory: EngineFactory | None = None,
) -> dict[str, SecretStr]:
    """The decrypted values of ``keys`` the stack holds (a key it does not hold is left out).

    Raises:
        Same as ``outputs``.
    """
    engine, _ = _engine(request, env, engine_factory, check_context=False)
    found: dict[str, SecretStr] = {}
    for key in keys:
        value = engine.secret_config(key)
        if value is not None:
            found[key] = value
    return found
