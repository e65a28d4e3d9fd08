"""Which ``sky`` binary to run (skypilot-0.12.md §7.1).

Explicit ``--sky-bin``, then ``NPA_SKYPILOT_BIN``, then ``skypilot.sky_bin``
saved by bootstrap in the npa config. There is no ``PATH`` fallback: a bare
``sky`` is used only when the user passes it explicitly.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError

__all__ = ["BinarySource", "SkyBinary", "resolve_binary"]

REMEDY = (
    "run `npa skypilot bootstrap` (it saves the path), or set NPA_SKYPILOT_BIN=/path/to/bin/sky"
)


class BinarySource(StrEnum):
    EXPLICIT = "explicit"
    ENV = "env"
    CONFIG = "config"


class SkyBinary(NamedTuple):
    path: Path
    source: BinarySource


def _usable(candidate: str, source: BinarySource) -> SkyBinary:
    path = Path(candidate).expanduser()
    if source is BinarySource.EXPLICIT and os.sep not in candidate:
        found = shutil.which(candidate)  # the user named a bare command on purpose
        if found is None:
            raise ConfigError(f"--sky-bin {candidate!r} is not on PATH", remedy=REMEDY)
        path = Path(found)
    if not path.is_file() or not os.access(path, os.X_OK):
        where = {
            "explicit": "--sky-bin",
            "env": "NPA_SKYPILOT_BIN",
            "config": "skypilot.sky_bin in the npa config",
        }
        raise ConfigError(
            f"{where[source]} names {path}, which is not an executable file",
            remedy=REMEDY,
            details={"path": str(path), "source": source.value},
        )
    return SkyBinary(path, source)


def resolve_binary(
    explicit: str | None, env: Mapping[str, str], config: Mapping[str, Any] | None = None
) -> SkyBinary:
    """The binary to run, with where it came from; ``ConfigError`` when none is configured."""
    if explicit:
        return _usable(explicit, BinarySource.EXPLICIT)
    if env.get("NPA_SKYPILOT_BIN"):
        return _usable(env["NPA_SKYPILOT_BIN"], BinarySource.ENV)
    saved = npa_config.get_value(
        config if config is not None else npa_config.load_config(env), "skypilot.sky_bin"
    )
    if isinstance(saved, str) and saved:
        return _usable(saved, BinarySource.CONFIG)
    raise ConfigError(
        "no SkyPilot binary is configured (checked --sky-bin, NPA_SKYPILOT_BIN, the npa config)",
        remedy=REMEDY,
    )
