"""Every number option of every command refuses nan, infinities and negatives (exit 64).

The options are found by walking the typer app (``typer.main.get_command``), so
an option added later is covered without a list to keep: a parameter whose
type turns ``"2.5"`` into a float is a float option, ``"2"`` into an int an
int option.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from npa_infra.cli import main

_COMMAND = typer.main.get_command(main.app)
_NOT_FINITE = ("nan", "NaN", "inf", "-inf", "Infinity", "1e999")


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(group, "commands", None)
    if not subcommands:
        yield path, group
        return
    for name, command in sorted(subcommands.items()):
        yield from _commands(command, (*path, name))


def _parses_as(param: Any, text: str, kind: type) -> bool:
    try:
        return type(param.type.convert(text, param, None)) is kind
    except Exception:
        return False


def _options(kind: type, sample: str) -> list[tuple[tuple[str, ...], Any]]:
    return [
        (path, param)
        for path, command in _commands(_COMMAND)
        for param in command.params
        if param.param_type_name == "option" and _parses_as(param, sample, kind)
    ]


FLOATS = _options(float, "2.5")
INTS = _options(int, "2")


def _id(case: tuple[tuple[str, ...], Any]) -> str:
    path, param = case
    return f"{' '.join(path)} {param.opts[0]}"


def test_number_options_walk_finds_every_known_float_option() -> None:
    found = {_id(case) for case in FLOATS}
    assert {
        "workbench workflow submit --poll-seconds",
        "workbench workflow submit --max-wait-seconds",
        "workbench workflow status --interval",
        "workbench workflow preflight-images --image-bootstrap-timeout-seconds",
        "skypilot cleanup-controller --deadline-seconds",
    } <= found


def _argv(path: tuple[str, ...], param: Any, value: str) -> list[str]:
    """The command with every required argument filled, and ``param`` set to ``value``."""
    command = dict(_commands(_COMMAND))[path]
    positional = ["x" for p in command.params if p.param_type_name == "argument" and p.required]
    return [*path, param.opts[0], value, *positional]


@pytest.mark.parametrize("case", FLOATS, ids=_id)
@pytest.mark.parametrize("value", [*_NOT_FINITE, "-1", "-0.5"])
def test_number_options_float_not_finite_or_negative_is_usage_error(
    case: tuple[tuple[str, ...], Any], value: str
) -> None:
    path, param = case
    result = CliRunner().invoke(main.app, _argv(path, param, value))
    assert result.exit_code == 64, (result.exit_code, result.output)
    assert param.opts[0] in result.output  # the error names the option, not a missing argument


@pytest.mark.parametrize("case", INTS, ids=_id)
def test_number_options_int_negative_is_usage_error(case: tuple[tuple[str, ...], Any]) -> None:
    path, param = case
    result = CliRunner().invoke(main.app, _argv(path, param, "-1"))
    assert result.exit_code == 64, (result.exit_code, result.output)
    assert param.opts[0] in result.output


@pytest.mark.parametrize("case", FLOATS, ids=_id)
def test_number_options_float_finite_value_is_accepted_by_its_type(
    case: tuple[tuple[str, ...], Any],
) -> None:
    _, param = case
    assert param.type.convert("1e6", param, None) == 1e6
