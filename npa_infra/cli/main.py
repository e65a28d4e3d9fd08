"""The ``npa`` entry point: the root command group and the top-level error handler."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import typer

from npa_infra.cli import (
    cleanup,
    cluster,
    completion,
    configure,
    output,
    rootgroup,
    skypilot,
    stack,
    workflow,
)

if TYPE_CHECKING:
    from npa_infra.workflow.target.services import Services

__all__ = ["app", "run"]

app = typer.Typer(
    name="npa",
    help="Run multi-stage ML workflows on SkyPilot managed jobs over Kubernetes, safely.",
    no_args_is_help=True,
    add_completion=False,  # completion.ShowOpt/InstallOpt name the shell instead of guessing it
    cls=rootgroup.RootGroup,  # usage errors exit 64, unhandled errors rendered once
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every subcommand
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
workbench = typer.Typer(
    help="Operator commands for workflows.", no_args_is_help=True, rich_markup_mode=None
)
workbench.add_typer(workflow.app, name="workflow")
app.add_typer(workbench, name="workbench")
app.add_typer(skypilot.app, name="skypilot")
app.add_typer(stack.app, name="stack")
app.command("cleanup")(cleanup.cleanup_cmd)
app.add_typer(cluster.app, name="cluster")
app.command("configure")(configure.configure_cmd)


def _version(value: bool) -> None:
    if value:
        from importlib import metadata

        sys.stdout.write(f"npa {metadata.version('npa-infra')}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for unexpected errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    show_completion: completion.ShowOpt = None,
    install_completion: completion.InstallOpt = None,
) -> None:
    """npa-infra: validate, plan, render and launch npa.workflow specs."""
    if debug:
        os.environ["NPA_DEBUG"] = "1"


def run(services: Services | None = None) -> None:
    """Console-script entry: expected failures exit with their code, the rest with one line.

    ``services`` (an embedding caller's, a test's) becomes the root context's object, from
    which every command builds its adapters; None: the real ones.
    """
    from npa_infra import signals

    signals.install()  # SIGTERM and SIGHUP stop a command the way Ctrl-C does
    try:
        app(obj=services)
    except SystemExit as exc:
        output.flush_stdout()  # a reader gone by now ends it with 141, not a flush warning
        if exc.code == 130 and signals.received() is not None:
            raise SystemExit(signals.exit_code()) from None
        raise
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        raise SystemExit(signals.exit_code()) from None
    except Exception as exc:  # the one top-level handler (style.md rule 8)
        if os.environ.get("NPA_DEBUG"):
            raise
        error = rootgroup.internal_error(exc)  # its type and origin, never its text
        sys.stderr.write(f"Error: {error['message']}\nHint: {error['remedy']}\n")
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    run()
