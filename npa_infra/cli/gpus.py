"""``npa workbench workflow gpus``: the GPU catalog of one exact context (cli.md §1.9).

Registered on the ``workflow`` sub-app by ``npa_infra.cli.workflow``. The
command parses its options, calls ``npa_infra.workflow.planning.accelerators.gpus``
and renders the result; the SDK and the Kubernetes adapter are imported
inside the body so ``npa --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output, selection, services

if TYPE_CHECKING:
    from npa_infra.workflow.planning.accelerators import GpusReport

__all__ = ["gpus_cmd"]


def gpus_cmd(
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
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    spec: Annotated[
        Path | None,
        typer.Option("--spec", help="Also judge each GPU step of this npa.workflow spec."),
    ] = None,
    var: Annotated[
        list[str] | None, typer.Option("--var", help="Config override KEY=VALUE (repeatable).")
    ] = None,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="Tool catalog JSON (else NPA_TOOL_CATALOG).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Show the context's GPUs, per-node requestable quantities and not-yet-labelled nodes.

    With --spec, each GPU step shows satisfiable, remapped → NAME, unsatisfiable or
    exceeds_per_node; the exit code is then 1 when any step would be refused at submit.
    """
    from npa_infra.errors import NpaError
    from npa_infra.workflow.planning import accelerators, options

    chosen = selection.select(stack, project, as_json=as_json, context=cluster)
    context = selection.context_of(chosen, cluster, as_json=as_json, flag="--cluster")
    try:
        report = accelerators.gpus(
            context,
            spec_path=spec,
            variables=options.parse_vars(var or []),
            catalog_path=catalog,
            services=services.build(ctx.obj),
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    if as_json:
        output.emit_json(report.to_json())
    else:
        _render(report)
    raise typer.Exit(report.exit_code)


def _render(report: GpusReport) -> None:
    cat = report.catalog
    output.out(f"context: {cat.context}")
    output.out(f"label key SkyPilot reads: {cat.label_key or 'none (no GPU label SkyPilot reads)'}")
    if cat.accelerators:
        rows = [("ACCELERATOR", "QTY/NODE", "ELIGIBLE", "LABEL VALUE")]
        for acc in cat.accelerators:
            eligible = sum(1 for n in acc.nodes if n.eligible)
            rows.append(
                (
                    acc.name,
                    str(acc.requestable_qty_per_node),
                    f"{eligible}/{len(acc.nodes)}",
                    acc.label_value,
                )
            )
        for line in output.table(rows):
            output.out(line)
        for acc in cat.accelerators:
            for n in acc.nodes:
                if not n.eligible:
                    output.out(f"  {n.name} ({acc.name}, {n.gpus} GPU): ineligible: {n.reason}")
    else:
        output.out("no GPU accelerators advertised")
    if cat.not_yet_labelled:
        output.out(f"not yet labelled (invisible to SkyPilot): {', '.join(cat.not_yet_labelled)}")
    for step in report.steps or []:
        res = step.resolution
        line = f"step {step.state}: {res.requested}: {res.display()}"
        output.out(line if res.verdict.ok else f"{line}: {res.message}")
