"""``npa workbench workflow list``.

It parses its options, calls one SDK function (``operations.runlist.list_runs``),
renders the result and exits with its code; ``list`` reads the journal only. The SDK is imported inside the commands, so
``npa --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output, selection, services

if TYPE_CHECKING:
    from npa_infra.workflow.operations.runlist import RunList

__all__ = ["list_cmd"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


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
