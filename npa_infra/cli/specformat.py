"""``npa workbench workflow schema`` and ``catalog``: the spec format as tools see it.

Registered on the ``workflow`` sub-app by ``npa_infra.cli.workflow``.
``schema`` prints the JSON Schema of the format (``npa_infra.spec.schema``);
its default output is the bare schema document, so that it can be redirected
into a file an editor reads, and ``--json`` wraps it as ``{status, schema}``
like every other command. ``catalog`` lists the active tool catalog
(``npa_infra.workflow.planning.toolcatalog``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output

if TYPE_CHECKING:
    from npa_infra.workflow.planning.toolcatalog import CatalogReport

__all__ = ["catalog_cmd", "schema_cmd"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def schema_cmd(as_json: JsonOpt = False) -> None:
    """Print the JSON Schema (draft 2020-12) of npa.workflow specs, for editors.

    The default output is the schema document itself:
    npa workbench workflow schema > npa-workflow.schema.json, then put
    "# yaml-language-server: $schema=./npa-workflow.schema.json" on a spec's
    first line. --json prints {"status": "ok", "schema": {...}}.
    """
    from npa_infra.spec import schema

    document = schema.workflow_schema()
    output.emit_json({"status": "ok", "schema": document} if as_json else document)


def catalog_cmd(
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="Tool catalog JSON (else NPA_TOOL_CATALOG).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the tools of the active catalog (name, image, command) and where it came from."""
    from npa_infra.errors import NpaError
    from npa_infra.workflow.planning import toolcatalog

    try:
        report = toolcatalog.list_catalog(catalog)
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render, as_json=as_json)


def _render(report: CatalogReport) -> None:
    origin = report.catalog
    if origin.path is None:
        output.out(
            f"catalog: built-in ({len(report.tools)} tools; no --catalog or NPA_TOOL_CATALOG)"
        )
    else:
        output.out(
            f"catalog: built-in + {origin.path} (from {origin.source}; {len(report.tools)} tools)"
        )
    rows = [("TOOL", "IMAGE", "COMMAND")]
    for tool in report.tools:
        command = " ".join(tool.argv)
        if len(command) > 90:
            command = command[:89] + "…"
        rows.append((tool.name, tool.image or "(staged source)", command))
    for line in output.table(rows):
        output.out(line)
