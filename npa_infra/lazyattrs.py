"""A package's public names, imported from their modules on first use (PEP 562).

A package ``__init__`` that re-exports its modules' names would import every one
of them with the package; with ``__getattr__ = lazyattrs.resolver(__name__, HOMES)``
a caller pays only for the module whose name it uses (issue 19: light paths).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["resolver"]


def resolver(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` that finds ``name`` in the module ``homes[name]``."""

    def resolve(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return resolve
