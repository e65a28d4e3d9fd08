"""The typer parameters of ``submit``, generated from ``workflow.submission.submitflags``.

``submit`` declares only its spec argument and ``**values``; this module
gives it the signature typer reads: one keyword parameter per table entry
(named by its ``SubmitOptions`` field, with the table's flags, default, help
and minimum), then the output-only parameters the command declares itself.
So a flag, its default and its help exist once, in the table.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from npa_infra.cli import optiontypes
from npa_infra.workflow.submission import submitflags
from npa_infra.workflow.submission.submitflags import Kind

__all__ = ["cli_default", "submit_options"]

F = TypeVar("F", bound=Callable[..., Any])

_TYPES: dict[Kind, Any] = {
    Kind.SWITCH: bool,
    Kind.SWITCH_OFF: bool,
    Kind.TOGGLE: bool,
    Kind.TEXT: str | None,
    Kind.DECISION: str | None,
    Kind.PATH: Path | None,
    Kind.INT: int,
    Kind.FLOAT: float,
    Kind.MULTI: list[str] | None,
    Kind.NAMES: list[str] | None,
    Kind.PAIRS: list[str] | None,
    Kind.MAPPING: list[str] | None,
}


# a text or path value is never empty (optiontypes); a float is finite, at least its minimum
_PARSERS: dict[Kind, Any] = {Kind.TEXT: optiontypes.text, Kind.PATH: optiontypes.path}


def cli_default(flag: submitflags.Flag) -> object:
    """What typer passes when the flag is absent (``fields_from_cli`` makes it the default)."""
    if flag.kind in (Kind.SWITCH, Kind.SWITCH_OFF, Kind.TOGGLE, Kind.INT, Kind.FLOAT):
        return flag.default
    return None  # one value or a repeatable list: absent


def _declarations(flag: submitflags.Flag) -> tuple[str, ...]:
    if flag.kind is Kind.SWITCH_OFF:
        return (f" /{flag.flags[0]}",)  # only the negative spelling exists
    if flag.kind is Kind.TOGGLE:
        return (f"{flag.flags[0]}/{flag.flags[1]}",)
    return flag.flags


def _parameter(flag: submitflags.Flag) -> inspect.Parameter:
    floats = flag.kind is Kind.FLOAT  # finite and at least the minimum (optiontypes)
    option = typer.Option(
        *_declarations(flag),
        help=flag.help,
        min=None if floats else flag.minimum,
        parser=_PARSERS.get(flag.kind)
        or (optiontypes.finite_at_least(flag.minimum or 0.0) if floats else None),
        hidden=flag.hidden,
        show_default=flag.kind is not Kind.SWITCH_OFF,
    )
    annotation: Any = Annotated[_TYPES[flag.kind], option]
    return inspect.Parameter(
        flag.field, inspect.Parameter.KEYWORD_ONLY, default=cli_default(flag), annotation=annotation
    )


def submit_options(outputs: Callable[..., None]) -> Callable[[F], F]:
    """Give a ``(spec, **values)`` command the table's options, then ``outputs``' parameters.

    ``outputs`` is a function whose signature declares the output-only flags
    (they are not options of the run, so never in its resume command).
    """

    def decorate(command: F) -> F:
        head = [
            p
            for p in inspect.signature(command).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        tail = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(outputs).parameters.values()
        ]
        table = [_parameter(flag) for flag in submitflags.OPTIONS]
        # typer reads the signature; the command receives every option as **values
        command.__signature__ = inspect.Signature([*head, *table, *tail])  # type: ignore[attr-defined]  # a function object accepts the attribute inspect.signature reads
        return command

    return decorate
