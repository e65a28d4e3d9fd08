"""A live submit: the journaled, locked launch of a rendered run.

Order (runtime-reference.md §1, receipt write order): take the per-run lock;
create (or, with ``--resume-run``, re-open and check) the run in the journal,
with its planned source action; stage or verify the NPA source
(``request.stage_source``, ``workflow.sourcing.apply``: ``planned`` before
staging); write the task YAML; create the attempt; then drive one launch transaction
per wave attempt through ``launcher.LaunchDriver``. Intent is durable before
every external mutation and the outcome after it, so a crash at any line
leaves a run that ``--resume-run`` re-enters without launching twice.

One-shot runs launch one serial pipeline and end when it is submitted and
reconciled. Runtime runs are supervised wave by wave by ``supervisor``.
"""

from __future__ import annotations

import random
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.errors import (
    InterruptedRunError,
    InvariantError,
    LaunchFailedError,
    NpaError,
    RunStateError,
    UncertainOutcomeError,
    UsageError,
)
from npa_infra.kube.sharedpods import SharedPods
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import LaunchState, TransactionRecord
from npa_infra.skypilot.sharedqueue import SharedQueue
from npa_infra.workflow import attempts, credentials, stackbinding
from npa_infra.workflow.launcher import Clock, LaunchDriver

if TYPE_CHECKING:
    from npa_infra.journal.records import RunMode
    from npa_infra.journal.store import Journal
    from npa_infra.kube.base import KubeCluster
    from npa_infra.plan.model import DecisionPoint
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.drift import Advisory
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.stack.api import EngineFactory
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.recovery import Recomputed
    from npa_infra.workflow.stackfile import StackSettings

__all__ = [
    "LiveRequest",
    "LiveResult",
    "LiveServices",
    "RoutedPlan",
    "controller_settings",
    "execute",
    "logical_launch_id",
    "open_adapters",
    "outcome_error",
    "preflight_hooks",
    "recorded_state_dir",
    "resume_command",
]

SUCCESS_STATES = attempts.SUCCESS_STATES
logical_launch_id = attempts.logical_launch_id  # re-exported: part of this module's API


@dataclass(frozen=True, slots=True)
class LiveServices:
    """The adapters of a live submit; each ``None`` means the real one."""

    sky: Callable[[IsolatedDir, Mapping[str, str]], SkyPilot] | None = None
    cluster: Callable[[Path, str], KubeCluster] | None = None
    clock: Clock | None = None
    readiness: Callable[..., Any] | None = None
    isolated_dir: Path | None = None
    store: Callable[[], ObjectStore] | None = None  # decision artifacts (default: boto3)
    progress: Callable[[str], None] | None = None  # one line per change, for people (stderr)
    stack_engine: EngineFactory | None = None  # the stack's outputs (default: the Pulumi engine)


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
    # (workflow.reidentification); a verified relaunch compares it with the attempt's (issue 9).
    reidentify: Callable[[Mapping[str, str], int], Recomputed] | None = None
    # Stages or verifies the NPA source (workflow.sourcing.apply); returns the journal record.
    stage_source: Callable[[], Mapping[str, Any]] | None = None


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


def _context(request: LiveRequest) -> str:
    chosen = stackbinding.context(request.infra, request.stack)
    if chosen is None:
        raise UsageError(
            "a live submit needs the exact Kubernetes context: there is no fallback to the "
            "kubeconfig's current context",
            remedy="pass --infra k8s/<context>, or --stack NAME whose stack file sets "
            "npa-infra:context",
        )
    return chosen


controller_settings = stackbinding.controller_settings  # re-exported: part of this module's API


def recorded_state_dir(data: Mapping[str, Any] | None) -> str | None:
    """The SkyPilot state directory a run was launched from (its journal's run data)."""
    value = (data or {}).get("isolated_config_dir")
    return str(value) if value else None


def open_adapters(
    env: Mapping[str, str],
    given: LiveServices | None,
    *,
    context: str,
    stack_name: str | None,
    stack: StackSettings | None = None,
    sky_bin: str | None = None,
    isolated_config_dir: str | None = None,
    on_warning: Callable[[Advisory], None] | None = None,
) -> tuple[SkyPilot, KubeCluster, Clock, IsolatedDir]:
    """SkyPilot for the stack's isolated directory, the exact context, and the clock.

    A directory a stack's controller resource claimed is adopted as it is, and a
    submit from the stack's outputs must find exactly the directory, config and
    controller they name (``stackbinding.verify_adopted``). The SkyPilot drift
    gate (``skypilot.livegate``) runs before the adapter is returned: a refusal
    raises, each warning goes to ``on_warning`` and to ``given.progress``.

    Raises:
        SkyPilotDriftError: the binary's venv misses its pins, or another state
            directory's API server holds the port.
    """
    from npa_infra.kube import kubeconfig
    from npa_infra.skypilot import isolation, livegate
    from npa_infra.skypilot import resolve as sky_resolve

    given = given or LiveServices()
    config = npa_config.load_config(env)
    if given.isolated_dir is not None:
        isolated = isolation.IsolatedDir(given.isolated_dir)
    else:
        isolated = isolation.resolve_isolated_dir(isolated_config_dir, env, config, stack_name)
    kube_config, _ = kubeconfig.resolve(context, env)  # an unknown context fails here, exit 1
    isolated.prepare(env, context=context, controller=controller_settings(stack), stack=stack_name)
    stackbinding.verify_adopted(stack, isolated, env)
    if given.sky is not None:  # an injected adapter: no binary to read, its ports its own
        verdict = livegate.enforce(None, env, sky_env=None)
        sky = given.sky(isolated, env)
    else:
        from npa_infra.skypilot.skycli import SkyCli

        binary = sky_resolve.resolve_binary(sky_bin, env, config)
        verdict = livegate.enforce(binary.path, env, sky_env=isolated.environment(env))
        sky = SkyCli(binary.path, isolated, env, check_ports=False)  # the gate checked them
    for advisory in verdict.advisories:
        if on_warning is not None:
            on_warning(advisory)
        if given.progress is not None:
            given.progress(advisory.text())
    if given.cluster is not None:
        cluster = given.cluster(kube_config.path, context)
    else:
        from npa_infra.kube.client import KubeApi

        cluster = KubeApi(kube_config.path, context)
    clock = given.clock or Clock(time.time, time.sleep, random.random)
    return sky, cluster, clock, isolated


def _boto_store() -> ObjectStore:
    from npa_infra.storage.s3 import BotoStore

    return BotoStore.create()


def execute(
    request: LiveRequest, env: Mapping[str, str], services: LiveServices | None = None
) -> LiveResult:
    """Launch (or re-enter) the run; never raises for an expected outcome.

    Raises:
        UsageError, ConfigError, KubeError: before anything is journaled.
        RunLockedError: another process is submitting this run.
    """
    from npa_infra.journal import lock as run_lock
    from npa_infra.journal.store import Journal

    context = _context(request)
    home = npa_config.npa_home(env)
    secrets = credentials.resolve_values(
        request.secret_names, env, npa_home=home, stack=request.stack_name
    )
    warned: list[dict[str, str]] = []  # the drift gate's advisories, for the result
    sky, cluster, clock, isolated = open_adapters(
        env,
        services,
        context=context,
        stack_name=request.stack_name,
        stack=request.stack,
        sky_bin=request.sky_bin,
        isolated_config_dir=request.isolated_config_dir
        or (request.stack.isolated_config_dir if request.stack else None),
        on_warning=lambda advisory: warned.append(advisory.to_json()),
    )
    command = resume_command(request.invocation, request.run_id)
    journal = Journal.open(home, secret_values=secrets.values())
    try:
        argv = list(request.invocation)
        # the state directory's lock binds every npa home that launches into this SkyPilot
        # state; the home's lock keeps one journal's run bound to one state directory
        with (
            run_lock.RunLock.in_state(
                isolated.root,
                "runs",
                request.run_id,
                stack=request.stack_name,
                argv=argv,
                now=clock.now(),
            ),
            run_lock.RunLock(home, request.stack_name, request.run_id, argv=argv, now=clock.now()),
        ):
            _open_run(journal, request, command, clock.now(), context, secrets, str(isolated.root))
            _stage_source(journal, request, clock)
            driver = LaunchDriver(
                sky,
                journal,
                clock,
                cluster=cluster,
                progress=services.progress if services else None,
                state_dir=isolated.root,
                home=str(home),
            )
            from npa_infra.workflow import supervisor

            result = supervisor.run_waves(
                request,
                journal=journal,
                driver=driver,
                sky=sky,
                clock=clock,
                store=(services.store if services and services.store else _boto_store),
                cluster=cluster,
                progress=services.progress if services else None,
                shared_queue=SharedQueue(sky, isolated.root / "supervision", clock.now),
                shared_pods=SharedPods(cluster, isolated.root / "supervision", clock.now),
                launch=lambda job, wave_index, new_attempt=False, exports=None: (
                    attempts.launch_wave(
                        request,
                        journal,
                        driver,
                        sky,
                        clock,
                        isolated,
                        job,
                        wave_index,
                        infra=f"k8s/{context}",
                        secrets=secrets,
                        command=command,
                        new_attempt=new_attempt,
                        exports=exports,
                    )
                ),
            )
            result.warnings = warned
            return result
    finally:
        journal.close()


def _open_run(
    journal: Journal,
    request: LiveRequest,
    command: str,
    now: float,
    context: str,
    secrets: Mapping[str, str],
    state_dir: str,
) -> None:
    from npa_infra.journal.records import RunRow

    existing = journal.get_run(request.run_id)
    recorded = recorded_state_dir(existing.data if existing is not None else None)
    if recorded is not None and recorded != state_dir:
        raise RunStateError(
            f"run {request.run_id} was launched from SkyPilot state {recorded}, but this submit "
            f"resolves {state_dir}: its jobs belong to the controller of the first",
            remedy=f"resume with --isolated-config-dir {recorded} (or the same --stack)",
            details={"run_id": request.run_id},
        )
    if existing is not None and existing.fingerprint != request.fingerprint:
        raise RunStateError(
            f"run {request.run_id} was submitted from a different plan "
            f"(fingerprint {existing.fingerprint}, now {request.fingerprint})",
            remedy="resume with the identical spec, --var values and flags, or start a new run "
            "without --resume-run",
            details={"run_id": request.run_id},
        )
    if request.resume and existing is None:
        raise RunStateError(
            f"unknown run {request.run_id}: the journal has no such run",
            remedy="check the id with `npa workbench workflow status RUN_ID`, or submit without "
            "--resume-run to start it",
            details={"run_id": request.run_id},
        )
    if existing is not None and not request.resume and existing.status != RunStatus.ROLLED_BACK:
        raise RunStateError(
            f"run {request.run_id} already exists (status {existing.status})",
            remedy=f"continue it with: {command}; or choose another --run-id",
            details={"run_id": request.run_id},
        )
    if existing is None:
        journal.create_run(
            RunRow(
                run_id=request.run_id,
                stack=request.stack_name or "",
                workflow=request.workflow,
                mode=_run_mode(request.mode),
                spec_path=str(request.spec_path),
                fingerprint=request.fingerprint,
                resume_argv=shlex.split(command),
                status=RunStatus.LAUNCHING,
                lifecycle_state="prepared",
                created_at=now,
                updated_at=now,
                data={
                    "infra": request.infra,
                    "context": context,
                    "isolated_config_dir": state_dir,
                    **attempts.secret_record(request.secret_names, secrets),
                    **dict(request.extra),
                },
            )
        )
    elif not request.resume and (existing.data or {}).get("cancel_requested"):
        # a rolled-back run submitted again is a new start: the old cancel does not carry over
        journal.update_run(request.run_id, data={"cancel_requested": None}, now=now)
    journal.append_event(request.run_id, "submit" if not request.resume else "resume", {}, now=now)
    journal.append_event(
        request.run_id,
        "preflight",
        {"hooks": preflight_hooks(request.extra.get("image_preflight"))},
        now=now,
    )


def preflight_hooks(image_preflight: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """What the pre-launch checks decided, for the journal (issue 6's image preflight ran
    in ``submit`` before anything was journaled; source staging has its own event)."""
    if image_preflight is None:
        return [{"hook": "image_preflight", "decision": "skipped", "reason": "not requested"}]
    checks = image_preflight.get("checks") or []
    return [
        {
            "hook": "image_preflight",
            "decision": image_preflight.get("decision"),
            "reason": image_preflight.get("reason"),
            "pins": dict(image_preflight.get("pins") or {}),
            "images": [
                {"image": c.get("image"), "status": c.get("status"), "digest": c.get("digest")}
                for c in checks
                if isinstance(c, Mapping)
            ],
        }
    ]


def _stage_source(journal: Journal, request: LiveRequest, clock: Clock) -> None:
    """Stage or verify the source once the run and its planned source are durable (§1, §6).

    A failure is journaled; a run with no wave yet is rolled back (nothing was
    launched, so the identical command may run again), then the error propagates.
    """
    if request.stage_source is None:
        return
    planned = request.extra.get("source")
    if planned is not None and not request.resume:
        journal.update_run(request.run_id, data={"source": planned}, now=clock.now())
    try:
        record = dict(request.stage_source())
    except NpaError as exc:
        now = clock.now()
        journal.append_event(
            request.run_id,
            "source_staging",
            {"decision": "failed", "error": exc.message, "category": exc.category},
            now=now,
        )
        if not journal.waves(request.run_id):
            journal.update_run(
                request.run_id, status=RunStatus.ROLLED_BACK, lifecycle_state="rolled-back", now=now
            )
        raise
    journal.append_event(request.run_id, "source_staging", record, now=clock.now())


def _run_mode(mode: str) -> RunMode:
    if mode not in ("one-shot", "runtime", "raw"):
        raise InvariantError(f"unknown run mode {mode!r}")
    return mode  # type: ignore[return-value]  # narrowed by the membership test


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
        return LaunchFailedError(
            f"nothing was launched: {reason}"
            + (
                f": {record.primary_error or record.reconciliation_error}"
                if (record.primary_error or record.reconciliation_error)
                else ""
            ),
            remedy=f"fix the cause and rerun: {command} (no launch request was sent; nothing to clean up)",
            details=details,
        )
    if record.state is LaunchState.TERMINAL_FAILURE:
        return LaunchFailedError(
            f"the launch failed and the job is verified absent: {reason}: {record.primary_error}",
            remedy="fix the cause, then submit a new run",
            details=details,
        )
    return UncertainOutcomeError(
        f"the launch outcome is not proven: {reason}",
        remedy=record.operator_remedy or f"rerun the identical command: {command}",
        details=details,
    )
