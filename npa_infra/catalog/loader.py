"""Load a tool catalog file (the JSON format of ``tool-catalog.json``).

``select_catalog`` decides which catalog a command uses: the built-in tools,
extended by ``--catalog FILE`` or else the file named by ``NPA_TOOL_CATALOG``.
Malformed files are a ``ConfigError`` naming the file and the entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal, NamedTuple

from npa_infra import regularfile
from npa_infra.catalog.builtin import BUILTIN
from npa_infra.catalog.model import Catalog, ToolEntry
from npa_infra.errors import ConfigError

__all__ = ["CatalogOrigin", "catalog_origin", "load_catalog_file", "select_catalog"]

MAX_BYTES = 8 * 1024 * 1024  # the reference tool-catalog.json is about 75 kB
_REMEDY = "pass a JSON list of tool entries (see tool-catalog.json), or unset NPA_TOOL_CATALOG"


def _entry(raw: object, index: int, label: str) -> ToolEntry:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"{label}: entry {index} is not an object with a 'name'", remedy=_REMEDY)
    argv = raw.get("argv_template", [])
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ConfigError(
            f"{label}: entry {raw['name']!r} has a malformed argv_template", remedy=_REMEDY
        )
    defaults = raw.get("config_defaults") or {}
    omit = raw.get("omit_flags_when_empty") or []
    if not isinstance(defaults, dict) or not isinstance(omit, list):
        raise ConfigError(
            f"{label}: entry {raw['name']!r} has malformed defaults or flags", remedy=_REMEDY
        )
    mode = str(raw.get("multi_node_mode") or "forbidden")
    if mode not in ("forbidden", "sharded"):
        raise ConfigError(
            f"{label}: entry {raw['name']!r} has multi_node_mode {mode!r}", remedy=_REMEDY
        )
    return ToolEntry(
        name=raw["name"],
        argv_template=tuple(argv),
        stub=bool(raw.get("stub", False)),
        multi_node_mode=mode,
        semantic_contract=str(raw.get("semantic_contract") or ""),
        variant_count_config=str(raw.get("variant_count_config") or ""),
        shard_activation_config=str(raw.get("shard_activation_config") or ""),
        shard_output_config=str(raw.get("shard_output_config") or ""),
        omit_flags_when_empty=tuple(str(f) for f in omit),
        config_defaults={str(k): str(v) for k, v in defaults.items()},
        description=str(raw.get("description") or ""),
    )


@lru_cache(maxsize=8)
def load_catalog_file(path: Path) -> tuple[ToolEntry, ...]:
    """Parse a catalog file; raise ``ConfigError`` with the file and entry on any problem."""
    label = str(path)
    try:
        data = json.loads(regularfile.read(path, MAX_BYTES).decode("utf-8"))
    except regularfile.RefusedFile as exc:
        raise ConfigError(f"tool catalog {exc.message}", remedy=exc.hint) from None
    except FileNotFoundError:
        raise ConfigError(f"tool catalog not found: {label}", remedy=_REMEDY) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"tool catalog {label} is unreadable: {exc}", remedy=_REMEDY) from exc
    if not isinstance(data, list):
        raise ConfigError(f"tool catalog {label} must be a JSON list", remedy=_REMEDY)
    return tuple(_entry(item, i, label) for i, item in enumerate(data))


class CatalogOrigin(NamedTuple):
    """Which catalog file extends the built-in tools, and what chose it."""

    source: Literal["built-in", "--catalog", "NPA_TOOL_CATALOG"]
    path: Path | None


def catalog_origin(explicit: Path | None, env: Mapping[str, str]) -> CatalogOrigin:
    """``--catalog FILE`` wins over ``NPA_TOOL_CATALOG``; neither means the built-in tools only."""
    if explicit is not None:
        return CatalogOrigin("--catalog", explicit)
    if env.get("NPA_TOOL_CATALOG"):
        return CatalogOrigin("NPA_TOOL_CATALOG", Path(env["NPA_TOOL_CATALOG"]))
    return CatalogOrigin("built-in", None)


def select_catalog(explicit: Path | None, env: Mapping[str, str]) -> Catalog:
    """The built-in catalog, extended by ``explicit`` or else ``NPA_TOOL_CATALOG``."""
    path = catalog_origin(explicit, env).path
    if path is None:
        return BUILTIN
    return BUILTIN.merged(load_catalog_file(path.resolve()), str(path))
