"""``workflow logs RUN``: the logs of a run's jobs, read by exact provider job id.

The journal names the jobs: each attempt of each wave, with the job id it
adopted (``runs.logtargets`` picks which: the latest attempt of each wave,
one ``--wave``, one ``--attempt``). An attempt without an adopted id is
reported as ``no job id: never launched or not reconciled`` and never looked
up by name: a name can be another user's job or an earlier attempt's. Each job
is one ``sky jobs logs <id>`` (``--no-follow``, or ``--follow`` streaming each
line to ``on_line`` as it arrives) on the SkyPilot state directory the run was
launched from, behind the drift gate (``adapters.gated_sky``); no other
SkyPilot call is made, and nothing is written to the journal.

Secret values never reach the output: every value of the run's secret names
(``--secret-env``, resolved as submit resolves them: environment, then the
stack's credentials) is replaced by ``<redacted>`` in each line and log, the
way the journal's guard refuses them (values shorter than its minimum are
ordinary text).

Statuses and exit codes: ``ok`` 0 (every selected log was read); ``not_found``
1 (the journal does not know the run, or it is not of the selection);
``refused`` 1 (a plan-only run, no such wave or attempt: nothing to read);
``incomplete`` 2 (a job without an id, or whose logs could not be read: the
outcome is not proven).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from npa_infra import config as npa_config
from npa_infra.errors import NpaError
from npa_infra.projects.models import RunIdentity
from npa_infra.runs import logtargets
from npa_infra.runs.logtargets import ReadState

if TYPE_CHECKING:
    from npa_infra.journal.records import RunRow
    from npa_infra.journal.store import Journal
    from npa_infra.projects.models import Selection
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.drift import Advisory
    from npa_infra.workflow.target.services import Services

__all__ = ["LOGS_EXIT_CODES", "REDACTED", "JobLog", "LogsReport", "redact", "run_logs"]

REDACTED = "<redacted>"
LogsStatus = Literal["ok", "not_found", "refused", "incomplete"]
LOGS_EXIT_CODES: dict[str, int] = {"ok": 0, "not_found": 1, "refused": 1, "incomplete": 2}


class JobLog(BaseModel):
    """One job's log: which attempt, its exact id, and what ``sky jobs logs`` answered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wave: int
    attempt: int
    job_id: int | None
    job_name: str
    state: ReadState
    exit_code: int | None = None  # of ``sky jobs logs``; None when it was not run
    log: str = ""
    detail: str = ""


class LogsReport(BaseModel):
    """``workflow logs --json``: one object (README, the JSON table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: LogsStatus
    run_id: str
    follow: bool = False
    jobs: tuple[JobLog, ...] = ()
    detail: str = ""
    warnings: tuple[str, ...] = ()  # the drift gate's advisories

    @property
    def exit_code(self) -> int:
        return LOGS_EXIT_CODES[self.status]


def run_logs(
    run_id: str,
    *,
    env: Mapping[str, str],
    wave: int | None = None,
    attempt: int | None = None,
    follow: bool = False,
    on_line: Callable[[JobLog, str], None] | None = None,
    services: Services | None = None,
    scope: Selection | None = None,
) -> LogsReport:
    """The logs of the run's selected jobs; never raises for an expected outcome.

    ``on_line(job, line)`` receives each (redacted) line the moment it is read, before
    the job's entry is complete (``job.log`` is still empty then).

    Raises:
        SkyPilotDriftError: the SkyPilot venv or its API server port fails the drift gate.
        ConfigError: the journal cannot be read.
    """
    from npa_infra.journal.store import Journal, present

    home = npa_config.npa_home(env)
    if not present(home):
        return LogsReport(status="not_found", run_id=run_id, detail="no journal yet")
    journal = Journal.open(home)
    try:
        run = journal.get_run(run_id)
        if run is None:
            return _without_run(journal, run_id, scope)
        if scope is not None and not scope.admits(RunIdentity.of(run.stack, run.data)):
            detail = f"run {run_id} is not of {scope.describe()} (its stack: {run.stack or 'none'})"
            return LogsReport(status="not_found", run_id=run_id, detail=detail)
        chosen = logtargets.select(_attempts(journal, run_id), wave=wave, attempt=attempt)
    finally:
        journal.close()
    if not chosen.selected:
        return LogsReport(status="refused", run_id=run_id, follow=follow, detail=chosen.detail)
    return _read(run, chosen.targets, env, follow, on_line, services)


def _without_run(journal: Journal, run_id: str, scope: Selection | None) -> LogsReport:
    """A run id known only as a plan has no job, hence no log; any other is unknown."""
    plan = journal.get_plan(run_id)
    if plan is None:
        return LogsReport(status="not_found", run_id=run_id, detail="unknown run id")
    if scope is not None and not scope.admits(RunIdentity.of(plan.stack, plan.data)):
        detail = f"run {run_id} is not of {scope.describe()} (its stack: {plan.stack or 'none'})"
        return LogsReport(status="not_found", run_id=run_id, detail=detail)
    detail = "the run is plan-only (--plan-only): nothing was launched, so no job has a log"
    return LogsReport(status="refused", run_id=run_id, detail=detail)


def _attempts(journal: Journal, run_id: str) -> list[logtargets.AttemptRef]:
    """Every attempt with its adopted id (the attempt's, else its transaction's exact id)."""
    adopted = {(t.wave_index, t.attempt): t.job_id for t in journal.transactions(run_id)}
    return [
        logtargets.AttemptRef(
            a.wave_index,
            a.attempt,
            a.job_name,
            a.job_id if a.job_id is not None else adopted.get((a.wave_index, a.attempt)),
        )
        for a in journal.attempts(run_id)
    ]


def _read(
    run: RunRow,
    targets: tuple[logtargets.AttemptRef, ...],
    env: Mapping[str, str],
    follow: bool,
    on_line: Callable[[JobLog, str], None] | None,
    services: Services | None,
) -> LogsReport:
    warnings: list[str] = []
    secrets = _secret_values(run, env)
    sky = _sky(run, env, services, warnings) if any(t.job_id is not None for t in targets) else None
    jobs: list[JobLog] = []
    for target in targets:
        entry = JobLog(
            wave=target.wave,
            attempt=target.attempt,
            job_id=target.job_id,
            job_name=target.job_name,
            state=ReadState.NO_JOB_ID,
            detail=logtargets.NO_JOB_ID,
        )
        if sky is not None and target.job_id is not None:
            entry = _one(sky, entry, target.job_id, follow, secrets, on_line)
        jobs.append(entry)
    read = all(j.state is ReadState.READ for j in jobs)
    return LogsReport(
        status="ok" if read else "incomplete",
        run_id=run.run_id,
        follow=follow,
        jobs=tuple(jobs),
        warnings=tuple(warnings),
    )


def _one(
    sky: SkyPilot,
    entry: JobLog,
    job_id: int,
    follow: bool,
    secrets: tuple[str, ...],
    on_line: Callable[[JobLog, str], None] | None,
) -> JobLog:
    streamed = None
    if on_line is not None:

        def streamed(line: str) -> None:
            on_line(entry, redact(line, secrets))

    result = sky.logs(job_id, follow=follow, on_line=streamed)
    state = logtargets.read_state(result.returncode, follow=follow, timed_out=result.timed_out)
    detail = ""
    if state is not ReadState.READ:
        reason = "timed out" if result.timed_out else f"exit {result.returncode}"
        tail = result.stderr.strip().splitlines()[-1:] or [""]
        detail = redact(f"sky jobs logs {job_id} failed ({reason}) {tail[0]}".strip(), secrets)
    return entry.model_copy(
        update={
            "state": state,
            "exit_code": result.returncode,
            "log": redact(result.stdout, secrets),
            "detail": detail,
        }
    )


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret value replaced by ``<redacted>`` (longest first)."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text


def _secret_values(run: RunRow, env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the run's ``--secret-env`` names, resolved as submit resolves them."""
    from npa_infra.journal import guard
    from npa_infra.workflow.target import credentials

    names = [str(n) for n in (run.data or {}).get("secret_names") or []]
    if not names:
        return ()
    try:
        values = credentials.resolve_values(
            names, env, npa_home=npa_config.npa_home(env), stack=run.stack or None
        )
    except NpaError:  # an unreadable credentials file: the environment's values still count
        values = {n: env[n] for n in names if env.get(n)}
    return guard.usable_secrets(values.values())


def _sky(
    run: RunRow, env: Mapping[str, str], services: Services | None, warnings: list[str]
) -> SkyPilot:
    """SkyPilot on the run's recorded state directory, behind the drift gate."""
    from npa_infra.skypilot import isolation
    from npa_infra.workflow.execution import adapters
    from npa_infra.workflow.target.services import Services

    given = services or Services()
    if given.isolated_dir is not None:
        isolated = isolation.IsolatedDir(given.isolated_dir)
    else:
        recorded = adapters.recorded_state_dir(run.data)
        config = npa_config.load_config(env)
        isolated = isolation.resolve_isolated_dir(recorded, env, config, run.stack or None)

    def warn(advisory: Advisory) -> None:
        warnings.append(advisory.text())

    return adapters.gated_sky(given, isolated, env, None, warn)
