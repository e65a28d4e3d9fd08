"""One catalog entry (dsl.md §7) and the catalog as a closed set of tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

__all__ = ["Catalog", "ToolEntry"]


class ToolEntry(NamedTuple):
    name: str
    argv_template: tuple[str, ...]
    stub: bool = False
    multi_node_mode: str = "forbidden"
    semantic_contract: str = ""
    variant_count_config: str = ""
    shard_activation_config: str = ""
    shard_output_config: str = ""
    omit_flags_when_empty: tuple[str, ...] = ()
    config_defaults: Mapping[str, str] = {}
    description: str = ""


class Catalog(NamedTuple):
    """A closed set of tools by name; ``sources`` names where they came from."""

    tools: Mapping[str, ToolEntry]
    sources: tuple[str, ...] = ("built-in",)

    def get(self, name: str) -> ToolEntry | None:
        return self.tools.get(name)

    def names(self) -> list[str]:
        return sorted(self.tools)

    def merged(self, entries: Iterable[ToolEntry], source: str) -> Catalog:
        tools = dict(self.tools)
        for entry in entries:
            tools[entry.name] = entry
        return Catalog(tools, (*self.sources, source))
