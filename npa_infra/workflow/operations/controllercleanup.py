"""``npa skypilot cleanup-controller``: remove a stack's shared jobs controller, safely.

The controller goes only when every managed job in its queue, of every user,
is terminal: the gate is ``runs.controllergate`` and the loop that executes it
(observe, wait for CANCELLING jobs within a shown deadline, ``sky down``
journaled, retry after SkyPilot's in-progress refusal) is
``stack.controllerdown``, the same one the stack's controller resource runs.
This module resolves what the loop needs for one stack:

- the state directory: ``Services.isolated_dir``, else the stack file's
  ``npa-infra:stateDir`` when the project's stack file is found, else the
  directory every other command of the stack resolves
  (``skypilot.isolation.resolve_isolated_dir``);
- a directory that holds no controller identity never had a controller
  (skypilot-0.12.md §7.2: the identity is generated once, before the first
  ``sky`` call): already gone, with nothing run;
- otherwise the ``sky`` binary (``--sky-bin``, the stack file's, the
  configuration), then the drift gate (``skypilot.livegate``) before the
  first call, and the injected clock for every wait.

Without ``yes`` nothing is sent but the queue read: the result says what
would be removed and what blocks it. Never ``--purge``.

A launch recorded in flight in the state directory (``journal.inflight``)
holds the down off until it settles (``runs.controllergate``); a refusal for
it names, per run, the command that continues it (the run's own
``--resume-run`` command from this home's journal) and the one that cancels
it, each from the npa home that launched it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, StackConfigError
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.stack import controllerdown
from npa_infra.stack.models import ControllerReport, ControllerStatus
from npa_infra.workflow.execution import adapters
from npa_infra.workflow.target.services import Services

__all__ = ["cleanup_controller", "require_known_stack", "state_dir"]


def _stack_file(stack: str, root: Path | None) -> tuple[str, str]:
    """The stack file's ``stateDir`` and ``skyBin`` ('' when unset or no project is found).

    Raises:
        StackConfigError: the file exists but a key is wrong.
    """
    from npa_infra.stack import config as stack_config

    try:
        project = root or stack_config.find_project_root(Path.cwd())
        loaded = stack_config.load_stack_file(stack, project)
    except StackConfigError:
        raise
    except ConfigError:
        return "", ""
    return loaded.config.state_dir, loaded.config.sky_bin


def state_dir(
    stack: str, env: Mapping[str, str], services: Services, *, root: Path | None = None
) -> tuple[IsolatedDir, str]:
    """The stack's SkyPilot state directory and the stack file's ``sky`` binary ('' if none)."""
    from npa_infra.skypilot.isolation import resolve_isolated_dir

    configured, sky_bin = _stack_file(stack, root)
    if services.isolated_dir is not None:
        return IsolatedDir(services.isolated_dir), sky_bin
    if configured:
        return IsolatedDir(Path(configured).expanduser()), sky_bin
    return resolve_isolated_dir(None, env, npa_config.load_config(env), stack), sky_bin


def require_known_stack(
    stack: str, isolated: IsolatedDir, services: Services, root: Path | None
) -> None:
    """A stack with neither a file nor a state directory is a typo, never "already gone".

    Raises:
        ConfigError: naming both places looked at and the stacks that exist.
    """
    from npa_infra.projects.selection import known_stacks
    from npa_infra.stack import config as stack_config

    if services.isolated_dir is not None or isolated.root.exists():
        return

    try:
        project = root or stack_config.find_project_root(Path.cwd())
    except ConfigError:
        project = None
    path = stack_config.stack_file_path(stack, project) if project is not None else None
    if path is not None and path.is_file():
        return
    known = ", ".join(known_stacks(project)) if project is not None else ""
    where = (
        str(path) if path is not None else "stacks/ (no Pulumi.yaml above the working directory)"
    )
    raise ConfigError(
        f"no stack named {stack!r}: neither {where} nor its SkyPilot state directory "
        f"{isolated.root} exists, so there is no controller of it to remove",
        remedy="name a stack of this project"
        + (f" (known: {known})" if known else "")
        + ", or -p ALIAS of a project bound to one",
        details={"reason": "unknown_stack", "stack": stack},
    )


def _never_created(isolated: IsolatedDir, stack: str) -> ControllerReport:
    return ControllerReport(
        status=ControllerStatus.ALREADY_GONE,
        stack=stack,
        state_dir=str(isolated.root),
        controller="",
        reason="no_controller_identity",
        next=[f"npa stack destroy --stack {stack} --yes"],
        deadline_seconds=0.0,
        detail=f"{isolated.root} holds no controller identity: no controller was created from it",
    )


def cleanup_controller(
    stack: str,
    *,
    env: Mapping[str, str],
    yes: bool,
    deadline_seconds: float = controllerdown.DEFAULT_DEADLINE,
    sky_bin: str | None = None,
    services: Services | None = None,
    root: Path | None = None,
) -> ControllerReport:
    """Tear the stack's jobs controller down when its all-users queue allows it (module docstring).

    Raises:
        ConfigError: no ``sky`` binary, an unusable state directory or stack file.
        SkyPilotDriftError: the pinned venv drifted, or a foreign API server holds the port.
    """
    given = services or Services()
    isolated, file_bin = state_dir(stack, env, given, root=root)
    require_known_stack(stack, isolated, given, root)
    if not env.get("SKYPILOT_USER_ID") and not isolated.user_id_file.is_file():
        return _never_created(isolated, stack)
    sky = adapters.gated_sky(given, isolated, env, sky_bin or file_bin or None)
    plan = controllerdown.Teardown(
        isolated=isolated,
        stack=stack,
        controller=isolated.controller_name(env),
        yes=yes,
        deadline_seconds=deadline_seconds,
    )
    outcome = controllerdown.execute(
        sky, plan, now=given.clock.now, sleep=given.clock.sleep, progress=given.progress
    )
    report = controllerdown.report(plan, outcome)
    if report.launches_in_flight and report.status in _HELD:
        return report.model_copy(update={"next": _next_for_launches(report, stack, env)})
    if not report.blocking_jobs:
        return report
    return report.model_copy(update={"next": _next_for_jobs(report, stack, env)})


_HELD = (ControllerStatus.REFUSED, ControllerStatus.TIMED_OUT)


def _next_for_launches(report: ControllerReport, stack: str, env: Mapping[str, str]) -> list[str]:
    """Per launch in flight: continue its run (its resume command) or cancel it, from the
    npa home that launched it; then the teardown again."""
    home = str(npa_config.npa_home(env))
    resumes = _resume_commands(env, [launch.run_id for launch in report.launches_in_flight])
    steps: list[str] = []
    for launch in report.launches_in_flight:
        cancel = f"npa workbench workflow cancel {launch.run_id} -s {stack} --json"
        if launch.home == home:
            resume = resumes.get(launch.run_id)
            steps += [resume, cancel] if resume else [cancel]
        elif launch.home == "?":
            steps.append(
                f"run {launch.run_id}'s launch record is unreadable: continue or cancel the "
                f"run from the npa home that launched it ({cancel})"
            )
        else:
            steps.append(f"NPA_HOME={shlex.quote(launch.home)} {cancel}")
    steps.append(f"npa skypilot cleanup-controller -s {stack} --yes")
    return list(dict.fromkeys(steps))


def _resume_commands(env: Mapping[str, str], run_ids: list[str]) -> dict[str, str]:
    """Run id -> the exact command that resumes it, for the runs this home's journal holds."""
    from npa_infra.journal.store import Journal, journal_path

    home = npa_config.npa_home(env)
    if not journal_path(home).is_file():
        return {}
    journal = Journal.open(home)
    try:
        rows = {run_id: journal.get_run(run_id) for run_id in run_ids}
    finally:
        journal.close()
    return {r: shlex.join(row.resume_argv) for r, row in rows.items() if row and row.resume_argv}


def _next_for_jobs(report: ControllerReport, stack: str, env: Mapping[str, str]) -> list[str]:
    """The cancel of each run this home launched a blocking job for, by its exact run id.

    A job no run of this journal owns (another operator's, or another home's) is
    named with its user: only its owner can cancel its run.
    """
    owners = _job_owners(env, stack, report.state_dir)
    steps: list[str] = []
    for job in report.blocking_jobs:
        run_id = owners.get(job.id)
        if run_id is not None:
            steps.append(f"npa workbench workflow cancel {run_id} -s {stack} --json")
        else:
            steps.append(
                f"job {job.id} ({job.name}) of user {job.user} is no run of this npa home: "
                "its owner cancels it (npa workbench workflow cancel <their run> --json)"
            )
    runs = sorted({owners[j.id] for j in report.blocking_jobs if j.id in owners})
    steps += [f"npa workbench workflow status {r} -s {stack} --watch --json" for r in runs]
    steps.append(f"npa skypilot cleanup-controller -s {stack} --yes")
    return list(dict.fromkeys(steps))


def _job_owners(env: Mapping[str, str], stack: str, state_dir: str) -> dict[int, str]:
    """Job id -> run id, for the stack's runs this home's journal launched into ``state_dir``."""
    from npa_infra.journal.store import Journal, journal_path
    from npa_infra.workflow.execution.adapters import recorded_state_dir

    home = npa_config.npa_home(env)
    if not journal_path(home).is_file():
        return {}
    journal = Journal.open(home)
    try:
        owners: dict[int, str] = {}
        for run in journal.runs(stack=stack):
            recorded = recorded_state_dir(run.data)
            if recorded is not None and Path(recorded) != Path(state_dir):
                continue  # the same job id in another state directory is another job
            for row in journal.transactions(run.run_id):
                if row.job_id is not None:
                    owners[int(row.job_id)] = run.run_id
        return owners
    finally:
        journal.close()
