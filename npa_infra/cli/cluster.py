"""``npa cluster``: the Kubernetes cluster the runs used; ``down`` previews its drain.

``npa cluster down --cluster CTX [--json]`` parses its options, calls
``workflow.operations.clusterdown.preview`` and renders the report: the
PodDisruptionBudgets that will hold up draining the cluster's nodes
(kubernetes.md §7). It changes nothing. The SDK is imported inside the body so
``npa --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output

if TYPE_CHECKING:
    from npa_infra.workflow.operations.clusterdown import ClusterDownReport

__all__ = ["app", "down_cmd"]

app = typer.Typer(
    help="The Kubernetes cluster: preview what holds up its teardown.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("down")
def down_cmd(
    ctx: typer.Context,
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster", "--context", help="The exact kubeconfig context.", show_default=False
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Preview the PodDisruptionBudgets that will hold up draining the cluster's nodes.

    Read-only: nothing on the cluster changes. Exit 0 with the preview; 1 when the
    context is unknown or the cluster cannot be read.
    """
    import os

    from npa_infra.cli import services
    from npa_infra.errors import NpaError
    from npa_infra.workflow.operations import clusterdown

    try:
        report = clusterdown.preview(cluster, env=os.environ, services=services.build(ctx.obj))
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render, as_json=as_json)


def _render(report: ClusterDownReport) -> None:
    output.out(f"context: {report.context} ({report.nodes} nodes); nothing was changed")
    if not report.budgets:
        output.out("no PodDisruptionBudgets: none will hold up the drain")
    else:
        rows = [("NAMESPACE", "NAME", "SELECTOR", "READY", "ALLOWED", "BLOCKS", "REASON")]
        for b in report.budgets:
            selector = "<none: null selector>" if b.selector is None else (b.selector or "<all>")
            allowed = "?" if b.disruptions_allowed is None else str(b.disruptions_allowed)
            blocks = "yes" if b.blocks else "no"
            row = (b.namespace, b.name, selector, str(b.matching_ready_pods), allowed, blocks)
            rows.append((*row, b.reason.value))
        for line in output.table(rows):
            output.out(line)
        for b in report.budgets:
            if b.blocks:
                output.out(f"  {b.namespace}/{b.name}: {b.note}")
    skipped = report.skipped_pods
    if skipped.daemonset or skipped.mirror:
        output.out(
            f"not evicted by a drain: {skipped.daemonset} DaemonSet pods, "
            f"{skipped.mirror} mirror pods"
        )
    if report.blocking:
        output.out(
            f"{report.blocking} of {len(report.budgets)} budgets will hold up the drain: expect "
            "it to take minutes while each held eviction is retried, not a hang"
        )
    elif report.budgets:
        output.out("no budget will hold up the drain")
