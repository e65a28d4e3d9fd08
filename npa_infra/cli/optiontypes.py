"""The one parser of every seconds/number option that takes a float.

click's ``FloatRange(min=0)`` lets ``nan`` through (no comparison with NaN is
true) and ``inf`` (and ``1e999``, which parses as infinity): a timeout of
``nan`` then never expires and a deadline of ``inf`` waits forever. Every float
option of the CLI parses through ``seconds`` instead: a finite number at least
its minimum, else a usage error (exit 64) naming the option and what it takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import typer

__all__ = ["finite_at_least", "seconds"]


def finite_at_least(minimum: float) -> Callable[[object], float]:
    """A typer ``parser``: the value as a finite float, at least ``minimum``.

    Raises (from the returned parser):
        typer.BadParameter: not a number, not finite, or below ``minimum``.
    """

    def seconds(value: object) -> float:
        try:
            number = float(value)  # type: ignore[arg-type]  # click hands over text or the default
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            raise typer.BadParameter(f"{value!r} is not a finite number")
        if number < minimum:
            raise typer.BadParameter(f"{value!r} is below the minimum {minimum:g}")
        return number

    return seconds


seconds = finite_at_least(0.0)  # the common case: a non-negative, finite number of seconds
