"""``npa stack preview|up|refresh|destroy|outputs``: the stack through Pulumi (cli.md §6).

Each command parses its options, calls one function of ``npa_infra.stack.api``
(``destroy``: ``npa_infra.workflow.operations.teardown``, which adds ``--cancel-runs``)
and renders the result; exit codes live beside the results
(``npa_infra.stack.models``). Without a ``pulumi`` binary every command exits
3 with ``Error: pulumi CLI not found`` and the install hint. The SDK modules
are imported inside the commands, so ``npa --help`` never loads pulumi.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from npa_infra.cli import output, selection

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pydantic import JsonValue

    from npa_infra.errors import NpaError
    from npa_infra.stack.api import EngineFactory, StackRequest
    from npa_infra.stack.models import UpdateSummary
    from npa_infra.stack.report import PreviewReport

__all__ = ["app"]

T = TypeVar("T")

app = typer.Typer(
    help="Preview, bring up, refresh and destroy a stack (Pulumi Automation API).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend-url", help="Pulumi backend (else PULUMI_BACKEND_URL, file://$NPA_HOME/…)."
    ),
]
ContextOpt = Annotated[
    str | None, typer.Option("--context", help="Refuse unless the stack's context is this one.")
]
ConfigFileOpt = Annotated[
    Path | None, typer.Option("--config-file", help="Use this stack config file instead.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
MarkdownOpt = Annotated[
    bool, typer.Option("--markdown", help="Print a pull-request comment body on stdout.")
]
YesOpt = Annotated[bool, typer.Option("--yes", help="Apply; without it nothing changes.")]
DetailedOpt = Annotated[
    bool, typer.Option("--detailed-exitcode", help="Exit 2 when changes are present.")
]
ExpectOpt = Annotated[
    bool, typer.Option("--expect-no-changes", help="Fail (exit 2) when changes are present.")
]


def _request(
    stack: str,
    backend: str | None,
    context: str | None,
    config_file: Path | None,
    *,
    quiet: bool,
) -> StackRequest:
    from npa_infra.stack.api import StackRequest

    return StackRequest(
        stack=stack,
        backend_url=backend,
        context=context,
        config_file=config_file,
        on_output=None if quiet else output.warn,
    )


def _engines(ctx: typer.Context) -> EngineFactory:
    """The Pulumi engine of ``Services`` (``cli.services``): the real one from the shell."""
    from npa_infra.cli import services

    return services.build(ctx.obj).stack_engine


def _call(
    fn: Callable[[StackRequest, Mapping[str, str]], T], request: StackRequest, *, as_json: bool
) -> T:
    """``fn(request, os.environ)``; an ``NpaError`` is rendered and exits (``_fail``)."""
    import os

    from npa_infra.errors import NpaError

    try:
        return fn(request, os.environ)
    except NpaError as exc:
        _fail(exc, as_json=as_json)


def _fail(exc: NpaError, *, as_json: bool) -> NoReturn:
    from npa_infra.errors import StackConfigError
    from npa_infra.spec.issues import format_issue

    if isinstance(exc, StackConfigError) and not as_json:
        path = Path(exc.source)
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else None
        for issue in exc.issues:
            output.warn(format_issue(issue, exc.source, lines))
        output.warn(f"Error: {len(exc.issues)} problem(s) in {exc.source}")
        output.warn(f"Hint: {exc.remedy}")
        raise SystemExit(exc.exit_code)
    output.fail(exc, as_json=as_json)


def _render_preview(report: PreviewReport, *, as_json: bool, as_markdown: bool) -> None:
    from npa_infra.stack import report as stack_report

    if as_json:
        output.emit_json(report.to_json())
        return
    if as_markdown:
        output.out(stack_report.markdown(report).rstrip("\n"))
        return
    s = report.change_summary
    for step in report.steps:
        keys = ", ".join(step.replace_keys or step.diff_keys or sorted(step.detailed_diff))
        output.out(f"  {step.op:<9} {step.type}  {step.name}" + (f"  [{keys}]" if keys else ""))
    for diag in report.diagnostics:
        output.warn(f"{diag.severity}: {diag.message}")
    verdict = "changes present" if report.changes_present else "no changes"
    output.out(
        f"{report.project}/{report.stack}: {verdict} ({s.create} create, {s.update} update, "
        f"{s.replace} replace, {s.delete} delete, {s.same} same)"
    )


def _preview_exit(report: PreviewReport, stack: str, detailed: bool, expect: bool) -> NoReturn:
    from npa_infra.stack.models import preview_exit_code

    code = preview_exit_code(report, detailed_exitcode=detailed, expect_no_changes=expect)
    if code and expect:
        output.warn(f"Error: stack {stack} has changes, and --expect-no-changes was given")
        output.warn(f"Hint: npa stack up --stack {stack} --yes")
    raise typer.Exit(code)


def _formats(as_json: bool, as_markdown: bool) -> None:
    if as_json and as_markdown:
        from npa_infra.errors import UsageError

        output.fail(UsageError("--json and --markdown exclude each other"), as_json=False)


@app.command("preview")
def preview_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    backend_url: BackendOpt = None,
    context: ContextOpt = None,
    config_file: ConfigFileOpt = None,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
    detailed_exitcode: DetailedOpt = False,
    expect_no_changes: ExpectOpt = False,
    diff: Annotated[bool, typer.Option("--diff", help="Ask the engine for a rich diff.")] = False,
) -> None:
    """Show what `up` would change: 0 none, 2 changes (with a flag), 3 no engine."""
    from npa_infra.stack import api

    _formats(as_json, as_markdown)
    stack = selection.stack_name(
        stack, project, as_json=as_json, command="npa stack preview", default="dev", context=context
    )
    request = _request(stack, backend_url, context, config_file, quiet=as_json or as_markdown)
    report = _call(
        lambda r, env: api.preview(r, env=env, diff=diff, engine_factory=_engines(ctx)),
        request,
        as_json=as_json,
    )
    _render_preview(report, as_json=as_json, as_markdown=as_markdown)
    _preview_exit(report, stack, detailed_exitcode, expect_no_changes)


@app.command("up")
def up_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    backend_url: BackendOpt = None,
    context: ContextOpt = None,
    config_file: ConfigFileOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Bring the stack up; without --yes, preview and exit 1 (confirmation_required)."""
    from npa_infra.stack import api

    stack = selection.stack_name(
        stack, project, as_json=as_json, command="npa stack up", default=None, context=context
    )
    request = _request(stack, backend_url, context, config_file, quiet=as_json)
    result = _call(
        lambda r, env: api.up(r, env=env, yes=yes, engine_factory=_engines(ctx)),
        request,
        as_json=as_json,
    )
    if as_json:
        output.emit_json(result.model_dump(mode="json", by_alias=True))
    elif result.preview is not None:
        _render_preview(result.preview, as_json=False, as_markdown=False)
        output.warn(f"Error: confirmation_required\nHint: npa stack up --stack {stack} --yes")
    else:
        _render_update(result.summary, result.outputs)
    raise typer.Exit(result.exit_code)


def _render_update(summary: UpdateSummary | None, outputs: dict[str, JsonValue]) -> None:
    changes = summary.resource_changes if summary is not None else {}
    counts = ", ".join(f"{n} {op}" for op, n in sorted(changes.items())) or "no changes"
    output.out(f"{summary.result if summary is not None else '?'}: {counts}")
    for key, value in outputs.items():
        output.out(f"  {key}: {value}")


@app.command("refresh")
def refresh_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    backend_url: BackendOpt = None,
    context: ContextOpt = None,
    config_file: ConfigFileOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
    detailed_exitcode: DetailedOpt = False,
    expect_no_changes: ExpectOpt = False,
) -> None:
    """Report drift (nothing written); with --yes, write the live state into the stack."""
    from npa_infra.stack import api
    from npa_infra.stack.report import PreviewReport

    _formats(as_json, as_markdown)
    stack = selection.stack_name(
        stack, project, as_json=as_json, command="npa stack refresh", default="dev", context=context
    )
    request = _request(stack, backend_url, context, config_file, quiet=as_json or as_markdown)
    result = _call(
        lambda r, env: api.refresh(r, env=env, yes=yes, engine_factory=_engines(ctx)),
        request,
        as_json=as_json,
    )
    if isinstance(result, PreviewReport):
        _render_preview(result, as_json=as_json, as_markdown=as_markdown)
        _preview_exit(result, stack, detailed_exitcode, expect_no_changes)
    if as_json:
        output.emit_json(result.model_dump(mode="json", by_alias=True))
    else:
        _render_update(result.summary, {})
    raise typer.Exit(result.exit_code)


@app.command("destroy")
def destroy_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    backend_url: BackendOpt = None,
    context: ContextOpt = None,
    config_file: ConfigFileOpt = None,
    yes: YesOpt = False,
    exclude_protected: Annotated[
        bool, typer.Option("--exclude-protected", help="Leave protected resources in place.")
    ] = False,
    cancel_runs: Annotated[
        bool, typer.Option("--cancel-runs", help="Cancel the stack's active runs first (--yes).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Tear the stack down, controller first; refused while its runs are not terminal."""
    from npa_infra.workflow.operations import teardown

    stack = selection.stack_name(
        stack, project, as_json=as_json, command="npa stack destroy", default=None, context=context
    )
    request = _request(stack, backend_url, context, config_file, quiet=as_json)
    result = _call(
        lambda r, env: teardown.destroy_stack(
            r,
            env=env,
            yes=yes,
            exclude_protected=exclude_protected,
            cancel_runs=cancel_runs,
            engine_factory=_engines(ctx),
        ),
        request,
        as_json=as_json,
    )
    if as_json:
        output.emit_json(result.model_dump(mode="json", by_alias=True))
        raise typer.Exit(result.exit_code)
    for row in result.cancelled_runs:
        output.warn(f"cancel {row['run_id']}: {row['outcome']}")
    for run in result.gate.active_runs:
        output.warn(f"active run: {run['run_id']} ({run['status']})")
    hints = {
        "blocked_active_jobs": f"npa stack destroy --stack {stack} --cancel-runs --yes",
        "confirmation_required": f"npa stack destroy --stack {stack} --yes",
    }
    if result.status.value in hints:
        output.warn(f"Error: {result.status.value}\nHint: {hints[result.status.value]}")
    else:
        _render_update(result.summary, {})
    raise typer.Exit(result.exit_code)


@app.command("outputs")
def outputs_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    backend_url: BackendOpt = None,
    config_file: ConfigFileOpt = None,
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="Print secret values instead of [secret].")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """The stack's outputs (what `submit --stack` consumes)."""
    from npa_infra.stack import api

    stack = selection.stack_name(
        stack, project, as_json=as_json, command="npa stack outputs", default="dev"
    )
    request = _request(stack, backend_url, None, config_file, quiet=True)
    result = _call(
        lambda r, env: api.outputs(
            r, env=env, show_secrets=show_secrets, engine_factory=_engines(ctx)
        ),
        request,
        as_json=as_json,
    )
    if as_json:
        output.emit_json(result.model_dump(mode="json"))
    else:
        for key, value in result.outputs.items():
            output.out(f"{key}: {value}")
    raise typer.Exit(result.exit_code)
