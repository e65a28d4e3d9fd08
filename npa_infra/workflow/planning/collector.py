"""The cyclic garbage collector, paused while a spec is loaded and validated (issue 19).

Loading a spec allocates a tree of containers (composed nodes, parsed states,
issues, plans) that all stay alive until validation ends, so every automatic
collection on the way walks a growing young heap and frees nothing: for a
5,000-state spec that made validation grow as ``n ** 1.3`` instead of linearly
(BENCHMARKS.md, spec size). ``paused`` turns automatic collection off for the
duration and restores the state it found, whatever happens inside; cycles made
meanwhile are collected by the next automatic collection after it. Memory stays
bounded by the spec, which the loader itself caps.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


@contextmanager
def paused() -> Iterator[None]:
    """Automatic cyclic collection off inside the block, as it was after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
