"""The parsers every number, name and path parameter of the CLI shares.

click's ``FloatRange(min=0)`` lets ``nan`` through (no comparison with NaN is
true) and ``inf`` (and ``1e999``, which parses as infinity): a timeout of
``nan`` then never expires and a deadline of ``inf`` waits forever. Every float
option of the CLI parses through ``seconds`` instead: a finite number at least
its minimum, else a usage error (exit 64) naming the option and what it takes.

An empty argument or name (``status ""``, ``--resume-run "$UNSET"``) is a
quoting mistake, never a value: ``text`` and ``path`` refuse it as a usage
error, where it would otherwise read as "no value" (a fresh run id instead of
the run to resume) or as the current directory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import typer

__all__ = ["finite_at_least", "path", "seconds", "text"]

_EMPTY = "an empty value: give one, or leave the parameter out"


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


def text(value: object) -> str:
    """A typer ``parser``: the value, which must hold more than whitespace.

    Raises:
        typer.BadParameter: the value is empty or only whitespace.
    """
    word = str(value)
    if not word.strip():
        raise typer.BadParameter(_EMPTY)
    return word


def path(value: object) -> Path:
    """A typer ``parser``: ``text``, as a path (an empty one would name the current directory).

    Raises:
        typer.BadParameter: the value is empty or only whitespace.
    """
    return value if isinstance(value, Path) else Path(text(value))
