"""``npa cleanup [-s NAME | -p ALIAS] [--yes] [--json]``: what a teardown left behind.

The command parses, calls ``workflow.operations.leftovers.cleanup``, renders and
exits with the report's code (0 report or clean, 1 when something asked could
not be done). Without ``--yes`` nothing changes. ``-s``/``-p`` scope the report
and ``--yes`` to that selection; an unknown one is refused (exit 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output, selection

if TYPE_CHECKING:
    from npa_infra.workflow.operations.cleanupreport import CleanupReport

__all__ = ["cleanup_cmd"]


def cleanup_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Remove the local caches no live run needs.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Report teardown leftovers and the runbook; --yes removes local caches only.
    With -s/-p, only that stack's or project's part."""
    import os

    from npa_infra.cli import services
    from npa_infra.errors import NpaError
    from npa_infra.projects.models import Origin
    from npa_infra.stack import config as stack_config
    from npa_infra.workflow.operations import leftovers

    try:
        root: Path | None = stack_config.find_project_root(Path.cwd())
    except NpaError:
        root = None  # no project here: no stack files to report
    chosen = selection.select(stack, project, as_json=as_json, root=root)
    scope = chosen if chosen.origin is not Origin.NONE else None
    try:
        report = leftovers.cleanup(
            env=os.environ,
            yes=yes,
            project_root=root,
            services=services.build(ctx.obj, waits=None if as_json else output.warn),
            scope=scope,
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render, as_json=as_json)


def _render(report: CleanupReport) -> None:
    from npa_infra.workflow.operations.leftoverfiles import human_size

    output.out("local caches:" if report.caches else "local caches: none")
    for c in report.caches:
        state = "removed" if c.removed else ("kept: " + c.detail if c.reason else "removable")
        output.out(f"  {c.kind} {c.path} ({human_size(c.bytes)}, {c.bytes} bytes): {state}")
        if c.needed_by:
            output.out(f"    needed by run(s): {', '.join(c.needed_by)}")
    for skip in report.skipped:
        output.out(f"not looked into: {skip.path} ({skip.reason}): {skip.detail}")
    for s in report.stacks:
        output.out(f"stack: {s.name} ({s.path})")
    for p in report.projects:
        output.out(f"project: {p.alias} ({p.path})" + (f": {p.problem}" if p.problem else ""))
    for cred in report.credentials:
        names = ", ".join(cred.names) or "no names"
        output.out(f"credentials: {cred.stack} ({cred.path}): {cred.problem or names}")
    for m in report.managed_jobs:
        output.out(
            f"managed jobs in {m.state_dir}: {m.verdict}" + (f" ({m.detail})" if m.detail else "")
        )
        for job in m.jobs:
            output.out(f"  {job.id} {job.name} user {job.user}: {job.status}")
    for r in report.cluster_resources:
        where = f"{r.namespace}/" if r.namespace else ""
        output.out(f"cluster: {r.kind} {where}{r.name}, created by {r.created_by}")
    for error in report.errors:
        output.warn(f"Error: {error}")
    output.out("runbook:")
    for index, step in enumerate(report.runbook, 1):
        output.out(f"  {index}. {step}")
