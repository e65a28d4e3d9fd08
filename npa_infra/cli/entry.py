"""The ``npa`` console script: start-up memory management, then the CLI.

Imports allocate tens of thousands of long-lived objects (typer, PyYAML, our
modules). Collecting them is wasted work: the cyclic GC is paused while they
load, and ``gc.freeze`` moves them out of every later collection, including
the full collection at interpreter exit. Together this saves about 60 ms on
each command (see BENCHMARKS.md) without changing what any command does.
"""

from __future__ import annotations

import gc

__all__ = ["run"]


def run() -> None:
    gc.disable()
    try:
        from npa_infra.cli import main
    finally:
        gc.freeze()
        gc.enable()
    main.run()
