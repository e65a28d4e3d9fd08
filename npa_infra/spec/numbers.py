"""Integer fields that may be written as config references (dsl.md §1.3).

``parallelCount``, ``maxConcurrency`` and ``loop.max`` accept an int, a digit
string, ``config.k`` or a whole ``{{config.k}}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["resolve_int"]

_CONFIG_REF = re.compile(
    r"^\s*(?:\{\{\s*config\.([A-Za-z0-9_.-]+)\s*\}\}|config\.([A-Za-z0-9_.-]+))\s*$"
)


def resolve_int(value: object, config: Mapping[str, Any], _depth: int = 0) -> int:
    """An int, a digit string, ``config.k`` or a whole ``{{config.k}}``; ValueError otherwise."""
    if _depth > 8:
        raise ValueError("config references form a cycle")
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an integer, got {value!r}")
    text = value.strip()
    match = _CONFIG_REF.match(text)
    if match:
        key = match.group(1) or match.group(2)
        if key not in config:
            raise ValueError(f"config has no attribute '{key}'")
        return resolve_int(config[key], config, _depth + 1)
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    raise ValueError(f"expected an integer or config reference, got {value!r}")
