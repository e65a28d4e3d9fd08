"""A live run: the journaled, locked launch of a rendered plan, then its waves.

Order (runtime-reference.md §1, receipt write order): take the per-run locks
(the SkyPilot state directory's, shared by every npa home launching into it,
and the home's); create (or, with ``--resume-run``, re-open and check) the run
in the journal, with its planned source action; stage or verify the NPA
source (``request.stage_source``, ``submission.sourcing.apply``: ``planned``
before staging); then hand the waves to ``supervision.waves`` with a launch
callable over ``execution.attempts``. Intent is durable before every external
mutation and the outcome after it, so a crash at any line leaves a run that
``--resume-run`` re-enters without launching twice.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.errors import (
    InvariantError,
    NpaError,
    RunStateError,
    UncertainOutcomeError,
    UsageError,
)
from npa_infra.kube.sharedpods import SharedPods
from npa_infra.runs.lifecycle import RunStatus, lifecycle_state
from npa_infra.skypilot import livegate, redaction
from npa_infra.skypilot.sharedqueue import SharedQueue
from npa_infra.workflow.execution import adapters, attempts
from npa_infra.workflow.execution.launcher import LaunchDriver
from npa_infra.workflow.execution.liverun import LiveRequest, LiveResult, resume_command
from npa_infra.workflow.supervision import waves
from npa_infra.workflow.target import credentials, stackbinding
from npa_infra.workflow.target.services import Clock, Services

if TYPE_CHECKING:
    from npa_infra.journal.records import RunMode
    from npa_infra.journal.store import Journal

__all__ = ["execute", "preflight_hooks"]


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


def execute(
    request: LiveRequest, env: Mapping[str, str], services: Services | None = None
) -> LiveResult:
    """Launch (or re-enter) the run; never raises for an expected outcome.

    Raises:
        UsageError, ConfigError, KubeError: before anything is journaled.
        RunLockedError: another process is submitting this run.
    """
    from npa_infra.journal import lock as run_lock
    from npa_infra.journal.store import Journal

    given = services or Services()
    context = _context(request)
    home = npa_config.npa_home(env)
    secrets = credentials.resolve_values(
        request.secret_names, env, npa_home=home, stack=request.stack_name, project=request.project
    )
    warned: list[dict[str, str]] = []  # the drift gate's advisories, for the result
    sky, cluster, clock, isolated = adapters.open_adapters(
        env,
        given,
        context=context,
        stack_name=request.stack_name,
        stack=request.stack,
        sky_bin=request.sky_bin,
        isolated_config_dir=request.isolated_config_dir
        or (request.stack.isolated_config_dir if request.stack else None),
        on_warning=lambda advisory: warned.append(advisory.to_json()),
    )
    # every answer of SkyPilot masks the run's secret values before the journal sees it:
    # the guard refuses a secret as a bug, never as SkyPilot echoing one (skypilot.redaction)
    sky = redaction.redacting(sky, secrets.values())
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
            with _fails_closed(journal, request.run_id, command, clock):
                _stage_source(journal, request, clock)
                # issue 19: one shared queue for the launch lookups and the supervision ticks
                shared_queue = SharedQueue(sky, isolated.root / "supervision", clock.now)
                driver = LaunchDriver(
                    sky,
                    journal,
                    clock,
                    cluster=cluster,
                    readiness=given.readiness,
                    progress=given.progress,
                    state_dir=isolated.root,
                    home=str(home),
                    token_vars=livegate.token_vars(env),
                    shared_queue=shared_queue if request.mode == "runtime" else None,
                    tick=float(dict(request.extra.get("poll") or {}).get("interval", 30.0)),
                    held_since=clock.now(),  # inside both run locks
                )
                result = waves.run_waves(
                    request,
                    journal=journal,
                    driver=driver,
                    sky=sky,
                    clock=clock,
                    # decision artifacts live with the stack's bucket, on its endpoint
                    store=lambda: given.store(
                        request.stack.s3_endpoint or None if request.stack else None
                    ),
                    cluster=cluster,
                    progress=given.progress,
                    shared_queue=shared_queue,
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
                result.launch_logs = driver.launch_logs
                result.known_failures = [known.to_json() for known in driver.known_failures]
                return result
    finally:
        journal.close()


@contextmanager
def _fails_closed(journal: Journal, run_id: str, command: str, clock: Clock) -> Iterator[None]:
    """An unexpected error once the run is journaled ends it recovery-required, exit 2.

    A launch may have been sent by then, so a bug or an environment failure (an
    ``InvariantError``, an ``OSError``) is not a definite failure: it becomes an
    ``UncertainOutcomeError`` whose remedy is the run's ``--resume-run`` command,
    and the run is marked ``RECOVERY_REQUIRED`` when the journal still takes the
    write (otherwise its released lock tells readers the same, ``runs.runview``).
    Expected errors pass unchanged: each says what it proved.
    """
    try:
        yield
    except NpaError:
        raise
    except Exception as exc:
        kind = type(exc).__name__
        with contextlib.suppress(Exception):  # the journal may be what failed
            journal.update_run(
                run_id,
                status=RunStatus.RECOVERY_REQUIRED,
                lifecycle_state=lifecycle_state(RunStatus.RECOVERY_REQUIRED),
                now=clock.now(),
            )
        raise UncertainOutcomeError(
            f"run {run_id} stopped on an unexpected {kind} after it was journaled; a launch "
            "may have been sent, so its outcome is not proven",
            remedy=f"rerun the identical command: {command} (never a new run id, never a "
            "cancel by name); if it stops here again, rerun with --debug and report it",
            details={"run_id": run_id, "cause": kind},
        ) from exc


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
    recorded = adapters.recorded_state_dir(existing.data if existing is not None else None)
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
