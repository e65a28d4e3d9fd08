"""``npa workbench workflow stage-src``: upload the content-addressed NPA source (cli.md §1.10).

Registered on the ``workflow`` sub-app by ``npa_infra.cli.workflow``. The
command parses its options, calls ``npa_infra.workflow.submission.sourcing.stage_src``
and renders the result; the SDK (and boto3 through it) is imported inside
the body so ``npa --help`` stays fast. stdout carries the URI and an
``export NPA_SRC_S3_URI=…`` line that ``eval "$(npa … stage-src)"`` accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from npa_infra.cli import output, selection

__all__ = ["SourceOpt", "print_plan", "stage_src_cmd"]

SourceOpt = Annotated[
    Path | None,
    typer.Option(
        "--source",
        help="The checkout to stage (default: npa-infra's own, when installed editable).",
    ),
]


def stage_src_cmd(
    source: SourceOpt = None,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    bucket: Annotated[
        str | None, typer.Option("--bucket", help="Bucket (else the stack's npa-infra:bucket).")
    ] = None,
    prefix: Annotated[
        str | None,
        typer.Option(
            "--prefix", help="Key prefix (else the stack's sourcePrefix, else npa-src/npa)."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Upload even when a verified copy is there.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Upload the content-addressed NPA source; print the URI and `export NPA_SRC_S3_URI=…`.

    Exit codes: 0 staged, or a verified copy reused; 1 the checkout, the
    credentials or the upload failed; 2 usage (no source directory, no bucket).
    """
    import os
    import shlex

    from npa_infra.errors import NpaError
    from npa_infra.workflow.submission import sourcing

    chosen = selection.select(stack, project, as_json=as_json)  # its stack's bucket and prefix
    try:
        result = sourcing.stage_src(
            source, bucket=bucket, prefix=prefix, stack=chosen.stack, force=force, env=os.environ
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    if as_json:
        output.emit_json(result.to_json())
        return
    done = "reused (marker verified)" if result.reused else f"uploaded {result.uploaded} file(s)"
    output.out(f"# {done}; {result.file_count} file(s), {result.total_bytes} bytes: {result.uri}")
    output.out(f"export NPA_SRC_S3_URI={shlex.quote(result.uri)}")


def print_plan(plan: dict[str, Any]) -> None:
    """The ``submit --plan-only`` text line for the source: what would be used or staged."""
    status = plan.get("status")
    if status == "not_required":
        return
    uri, fingerprint = plan.get("uri"), plan.get("fingerprint")
    if status == "stage":
        output.out(
            f"source: would stage {plan.get('root') or 'the checkout'} to {uri} "
            f"({plan.get('reason')}; uploads nothing if that prefix is already complete)"
        )
    elif status == "reuse":
        output.out(
            f"source: would reuse {uri} after checking its marker (fingerprint {fingerprint})"
        )
    else:
        output.out(f"source: {uri} ({plan.get('origin')}, kept as given)")
