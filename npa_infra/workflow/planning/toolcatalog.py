"""``workflow catalog``: the tools the active catalog provides, and where it came from.

The active catalog is the one ``validate-spec``, ``plan-spec`` and ``submit``
would use with the same ``--catalog`` and environment (``catalog.loader``).
Each tool is shown with the image it runs in (``catalog.images``: the longest
matching toolRef prefix; none for tools that run from staged source), its
exec vector and the ``config.*`` keys that vector reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from npa_infra.catalog import images, loader
from npa_infra.catalog.builtin import BUILTIN
from npa_infra.catalog.model import ToolEntry
from npa_infra.spec import tokens

__all__ = ["CatalogReport", "CatalogSource", "ToolRow", "list_catalog"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CatalogSource(_Record):
    source: str  # "built-in", "--catalog" or "NPA_TOOL_CATALOG"
    path: str | None  # the catalog file that extends the built-in tools


class ToolRow(_Record):
    name: str
    description: str
    image: str | None  # "<name>:<tag>" (or @digest); None: runs from staged source
    argv: list[str]
    config_keys: list[str]
    config_defaults: dict[str, str]
    multi_node_mode: str
    stub: bool
    origin: str  # "built-in", or the catalog file's path


class CatalogReport(_Record):
    status: str = "ok"
    catalog: CatalogSource
    tools: list[ToolRow]

    @property
    def exit_code(self) -> int:
        return 0


def _image(tool: str) -> str | None:
    name = images.image_name_for_tool(tool)
    if name is None:
        return None
    # the registry in front is chosen at render time (dsl.md §6.2), so only name and pin
    ref = images.catalog_image(name, "registry")
    return ref.removeprefix("registry/")


def _row(entry: ToolEntry, origin: str) -> ToolRow:
    keys = {key for arg in entry.argv_template for key in _config(arg)}
    return ToolRow(
        name=entry.name,
        description=entry.description,
        image=_image(entry.name),
        argv=list(entry.argv_template),
        config_keys=sorted(keys),
        config_defaults=dict(entry.config_defaults),
        multi_node_mode=entry.multi_node_mode,
        stub=entry.stub,
        origin=origin,
    )


def _config(text: str) -> set[str]:
    return {key for _, scope, key in tokens.find_tokens(text) if scope == "config"}


def list_catalog(
    catalog_path: Path | None = None, env: Mapping[str, str] | None = None
) -> CatalogReport:
    """Every tool of the active catalog, sorted by name.

    Raises:
        ConfigError: the catalog file is missing, unreadable or malformed.
    """
    environ = os.environ if env is None else env
    origin = loader.catalog_origin(catalog_path, environ)
    catalog = loader.select_catalog(catalog_path, environ)
    label = str(origin.path) if origin.path is not None else "built-in"
    rows = [
        _row(entry, "built-in" if BUILTIN.get(name) == entry else label)
        for name, entry in sorted(catalog.tools.items())
    ]
    return CatalogReport(
        catalog=CatalogSource(
            source=origin.source, path=str(origin.path) if origin.path is not None else None
        ),
        tools=rows,
    )
