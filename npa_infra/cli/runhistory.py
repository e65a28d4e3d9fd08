"""``npa workbench workflow logs RUN`` and ``npa workbench workflow list``.

Both parse their options, call one SDK function (``operations.runlogs.run_logs``,
``operations.runlist.list_runs``), render the result and exit with its code. ``logs``
reads each job's log by its exact job id on the run's own SkyPilot state directory;
``list`` reads the journal only. The SDK is imported inside the commands, so
``npa --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import optiontypes, output, selection, services

if TYPE_CHECKING:
    from npa_infra.workflow.operations.runlist import RunList
    from npa_infra.workflow.operations.runlogs import JobLog, LogsReport

__all__ = ["list_cmd", "logs_cmd"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def logs_cmd(
    ctx: typer.Context,
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID", help="The run id.", parser=optiontypes.text, show_default=False
        ),
    ],
    wave: Annotated[
        int | None,
        typer.Option(
            "--wave", min=0, help="Only this wave (default: every wave).", show_default=False
        ),
    ] = None,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=1,
            help="This attempt (default: the latest of each wave).",
            show_default=False,
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow",
            help="Stream each log until its job ends (with --json: print the whole document then).",
        ),
    ] = False,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the logs of a run's jobs, by exact job id (never by name).

    Default: the latest attempt of each wave; --wave N one wave; --attempt N that
    attempt. An attempt that never adopted a job id is reported, not looked up.

    Exit codes: 0 every log read; 1 unknown run, a plan-only run, no such wave
    or attempt; 2 a job without a job id or whose logs could not be read.
    """
    import os

    from npa_infra.errors import NpaError
    from npa_infra.workflow.operations import runlogs

    chosen = selection.select(stack, project, as_json=as_json, extra={"run_id": run_id})
    stream = _Stream() if follow and not as_json else None
    try:
        report = runlogs.run_logs(
            run_id,
            env=os.environ,
            wave=wave,
            attempt=attempt,
            follow=follow,
            on_line=stream.line if stream is not None else None,
            services=services.build(ctx.obj, waits=None if as_json else output.warn),
            scope=chosen,
        )
    except NpaError as exc:  # the drift gate, an unreadable journal
        output.fail(exc, as_json=as_json, extra={"run_id": run_id})
    if as_json:
        output.emit_json(report.model_dump(mode="json"))
    else:
        _print_logs(report, stream)
    raise typer.Exit(report.exit_code)


class _Stream:
    """``--follow`` in text mode: each line the moment it is read, under its job's header."""

    def __init__(self) -> None:
        self.headed: set[tuple[int, int]] = set()

    def line(self, job: JobLog, text: str) -> None:
        if (job.wave, job.attempt) not in self.headed:
            self.headed.add((job.wave, job.attempt))
            output.out(_header(job))
        output.out(text)


def _header(job: JobLog) -> str:
    ident = f"job {job.job_id}" if job.job_id is not None else "no job id"
    return f"==> wave {job.wave:02d} attempt {job.attempt}: {job.job_name} ({ident}) <=="


def _print_logs(report: LogsReport, stream: _Stream | None) -> None:
    for job in report.jobs:
        if stream is None or (job.wave, job.attempt) not in stream.headed:
            output.out(_header(job))
            if stream is None and job.log:
                output.out(job.log.rstrip("\n"))
        if job.detail:
            output.warn(f"wave {job.wave:02d} attempt {job.attempt}: {job.detail}")
    for warning in report.warnings:
        output.warn(f"Warning: {warning}")
    if report.status == "ok":
        return
    output.warn(f"Error: {report.detail or 'not every log could be read'}")
    remedy = (
        "npa workbench workflow list (the runs this journal knows)"
        if report.status == "not_found"
        else f"npa workbench workflow status {report.run_id}"
    )
    output.warn(f"Hint: {remedy}")


def list_cmd(
    ctx: typer.Context,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Every run (default: active runs and the newest 50).")
    ] = False,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the runs of this npa home's journal, finished and plan-only ones included.

    Journal only: no SkyPilot call (a status is the journal's; `status RUN`
    verifies one). Newest first: every active run and the newest 50, or --all.
    """
    import os

    from npa_infra.errors import NpaError
    from npa_infra.workflow.operations import runlist

    chosen = selection.select(stack, project, as_json=as_json)
    try:
        report = runlist.list_runs(
            env=os.environ, all_runs=all_runs, services=services.build(ctx.obj), scope=chosen
        )
    except NpaError as exc:  # an unreadable journal
        output.fail(exc, as_json=as_json)
    output.finish(report, _print_list, as_json=as_json)


def _print_list(report: RunList) -> None:
    if not report.runs:
        output.out("no run in the journal")
    else:
        header = ("RUN", "STACK", "WORKFLOW", "MODE", "STATUS", "WAVES", "JOB_IDS", "AGE")
        rows = [
            (
                r.run_id,
                r.stack or "-",
                r.workflow,
                r.mode.value,
                r.status,
                str(r.waves),
                ",".join(map(str, r.job_ids)) or "-",
                _age(r.age_seconds),
            )
            for r in report.runs
        ]
        for line in output.table([header, *rows]):
            output.out(line)
    if report.omitted:
        output.warn(f"{report.omitted} older run(s) not shown: --all lists every run")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
