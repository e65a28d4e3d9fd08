"""``npa skypilot …``: bootstrap, status and verify of the pinned SkyPilot (cli.md §2).

Each command parses its options, calls one function of
``npa_infra.skypilot.bootstrap``, ``.status`` or ``.verify`` and renders
the result. Those modules are imported inside the command bodies so that
``npa --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import optiontypes, output, selection, services

if TYPE_CHECKING:
    from npa_infra.skypilot.bootstrap import BootstrapReport
    from npa_infra.skypilot.status import StatusReport
    from npa_infra.skypilot.verify import VerifyReport
    from npa_infra.stack.models import ControllerReport

__all__ = ["app"]

app = typer.Typer(
    help="Install and check the pinned SkyPilot.", no_args_is_help=True, rich_markup_mode=None
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


@app.command("bootstrap")
def bootstrap_cmd(
    path: Annotated[
        str | None,
        typer.Option(
            "--path", help="Venv path (else NPA_SKYPILOT_VENV_PATH, $NPA_HOME/skypilot-venv)."
        ),
    ] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="Python 3.9-3.12 interpreter to build with.")
    ] = None,
    save: Annotated[
        bool, typer.Option("--save/--no-save", help="Record skypilot.sky_bin in the npa config.")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Build the pinned SkyPilot virtualenv atomically (or verify the live one)."""
    import os

    from npa_infra.errors import NpaError
    from npa_infra.skypilot import bootstrap

    try:
        report = bootstrap.bootstrap(
            path, python, env=os.environ, save=save, progress=None if as_json else output.warn
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render_bootstrap, as_json=as_json)


def _render_bootstrap(report: BootstrapReport) -> None:
    output.out(f"{report.status.value}: SkyPilot {report.sky_version} at {report.venv}")
    output.out(f"sky binary: {report.sky_bin}")
    output.out(f"python: {report.python}")
    for name, pin in report.pins.items():
        output.out(f"  {name}: {pin.installed} ({pin.constraint})")
    output.out(f"journal: {report.journal}")


@app.command("status")
def status_cmd(
    ctx: typer.Context,
    sky_bin: Annotated[
        str | None,
        typer.Option("--sky-bin", help="The sky binary (else NPA_SKYPILOT_BIN, config)."),
    ] = None,
    bin_path: Annotated[
        bool, typer.Option("--bin-path", help="Print only the resolved sky binary path.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the SkyPilot binary against the pins; exit 0 healthy, 1 otherwise."""
    import os

    if bin_path:  # a lookup only: no gate, no pydantic (scripts call this often)
        from npa_infra.errors import NpaError
        from npa_infra.skypilot import resolve

        try:
            output.out(str(resolve.resolve_binary(sky_bin, os.environ).path))
        except NpaError as exc:
            output.fail(exc, as_json=False)
        raise typer.Exit(0)
    from npa_infra.skypilot import status

    report = status.status(sky_bin, os.environ, port_check=services.build(ctx.obj).api_ports)
    output.finish(report, _render_status, as_json=as_json)


def _render_status(report: StatusReport) -> None:
    source = f" (from {report.source.value})" if report.source else ""
    output.out(f"sky binary: {report.bin_path or 'not configured'}{source}")
    output.out(f"skypilot: {report.skypilot_version or '-'}")
    output.out(f"python: {report.python or '-'}")
    output.out(f"kubernetes client: {report.kubernetes_client_version or '-'}")
    output.out(f"fastapi: {report.fastapi_version or '-'}")
    output.out(f"click: {report.click_version or '-'}")
    server = report.api_server
    owner = {None: "", True: ", ours", False: ", NOT ours"}[server.owner_matches]
    output.out(f"api server: {'listening' if server.listening else 'not running'}{owner}")
    output.out(f"gate: {'ok' if report.ok else 'FAILED'}")
    for line in report.warnings:
        output.warn(f"warning: {line}")
    for line in report.remedies:
        output.warn(f"Hint: {line}")


@app.command("verify")
def verify_cmd(
    ctx: typer.Context,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "--context",
            help="The exact kubeconfig context (else the project's or stack's).",
            show_default=False,
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Kubeconfig file (else the first KUBECONFIG file)."),
    ] = None,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    sky_bin: Annotated[
        str | None,
        typer.Option("--sky-bin", help="The sky binary (else NPA_SKYPILOT_BIN, config)."),
    ] = None,
    output_format: Annotated[
        str | None, typer.Option("--output-format", help="text | json")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that SkyPilot can launch on the context: kubeconfig, /readyz, namespace,
    ServiceAccount, the kubernetes client pin, stale IAM tokens, `sky check kubernetes`
    in the isolated state and its API server, socat/nc/rsync. Exit 0 ok, 1 failed."""
    import os

    from npa_infra.errors import UsageError
    from npa_infra.workflow.operations import skypilotverify

    if output_format and output_format.lower() not in ("text", "json"):
        output.fail(
            UsageError(f"invalid --output-format {output_format!r}", remedy="use text or json"),
            as_json=False,
        )
    json_out = as_json or (output_format or "").lower() == "json"
    given = services.build(ctx.obj)
    chosen = selection.select(stack, project, as_json=json_out, context=cluster)
    report = skypilotverify.verify(
        selection.context_of(chosen, cluster, as_json=json_out, flag="--cluster"),
        env=os.environ,
        services=given,
        kubeconfig_path=kubeconfig,
        stack=chosen.stack,  # whose SkyPilot state and config to use
        state_dir=chosen.state_dir,
        sky_bin=sky_bin,
        on_sample=None if json_out else (lambda p: output.warn(p.text())),
    )
    output.finish(report, _render_verify, as_json=json_out)


def _render_verify(report: VerifyReport) -> None:
    output.out(f"context: {report.context} ({report.kubeconfig or 'no kubeconfig'})")
    for check in report.checks:
        detail = check.detail.replace("\n", "\n" + " " * 9)  # SkyPilot's reason is multi-line
        output.out(f"{'ok' if check.ok else 'FAILED':6} {check.name}: {detail}")
    where = "remote" if report.api_server.remote else "local"
    output.out(f"api server: {report.api_server.endpoint} ({where})")
    output.out(f"verify: {report.status}")
    for remedy in dict.fromkeys(c.remedy for c in report.checks if not c.ok and c.remedy):
        output.warn(f"Hint: {remedy}")


@app.command("cleanup-controller")
def cleanup_controller_cmd(
    ctx: typer.Context,
    stack: selection.StackOpt = None,  # required, as -s NAME or -p ALIAS: no default stack
    project: selection.ProjectOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Tear it down; without it, only report.")
    ] = False,
    deadline_seconds: Annotated[
        float,
        typer.Option(
            "--deadline-seconds",
            parser=optiontypes.seconds,
            help="How long to wait for CANCELLING jobs.",
        ),
    ] = 600.0,
    sky_bin: Annotated[
        str | None,
        typer.Option("--sky-bin", help="The sky binary (else NPA_SKYPILOT_BIN, config)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove the stack's shared jobs controller once every job of every user is terminal.
    Exit 0 removed or already gone, 1 refused/would remove/failed/timed out, 2 unproven."""
    import os

    from npa_infra.cli import services as cli_services
    from npa_infra.errors import NpaError
    from npa_infra.workflow.operations import controllercleanup

    name = selection.stack_name(
        stack, project, as_json=as_json, command="npa skypilot cleanup-controller"
    )
    given = cli_services.build(ctx.obj, progress=None if as_json else output.warn)
    try:
        report = controllercleanup.cleanup_controller(
            name,
            env=os.environ,
            yes=yes,
            deadline_seconds=deadline_seconds,
            sky_bin=sky_bin,
            services=given,
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render_cleanup, as_json=as_json)


def _render_cleanup(report: ControllerReport) -> None:
    controller = report.controller or "no controller"
    output.out(f"{report.status.value}: {controller} ({report.reason})")
    output.out(f"state directory: {report.state_dir}")
    for job in report.blocking_jobs:
        output.out(f"  blocking: job {job.id} {job.name!r} of user {job.user} ({job.status})")
    if report.detail and not report.blocking_jobs:
        output.out(f"  {report.detail}")
    for command in report.next:
        output.warn(f"Next: {command}")
