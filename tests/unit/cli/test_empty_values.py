"""An empty argument or name is a usage error (exit 64) that says so, on every command.

``status ""`` used to report ``NOT_FOUND`` for the run id "", ``validate-spec ""`` a
spec problem in ".", and ``submit --resume-run ""`` silently started a fresh run
(a script's unset ``$RUN`` would launch a second job). The arguments are found by
walking the typer app, so an argument added later is covered without a list to keep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from npa_infra.cli import main

_COMMAND = typer.main.get_command(main.app)


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(group, "commands", None)
    if not subcommands:
        yield path, group
        return
    for name, command in sorted(subcommands.items()):
        yield from _commands(command, (*path, name))


def _arguments() -> list[tuple[tuple[str, ...], int, Any]]:
    return [
        (path, position, param)
        for path, command in _commands(_COMMAND)
        for position, param in enumerate(
            p for p in command.params if p.param_type_name == "argument"
        )
    ]


def _id(case: tuple[tuple[str, ...], int, Any]) -> str:
    path, _, param = case
    return f"{' '.join(path)} {param.name}"


ARGUMENTS = _arguments()
NAMED = [
    ("workbench", "workflow", "submit", "spec.yaml", "--run-id"),
    ("workbench", "workflow", "submit", "spec.yaml", "--resume-run"),
    ("workbench", "workflow", "submit", "spec.yaml", "--infra"),
    ("workbench", "workflow", "status", "r1", "--stack"),
    ("workbench", "workflow", "cancel", "r1", "--project"),
]


def test_empty_values_walk_finds_the_run_id_and_spec_arguments() -> None:
    found = {_id(case) for case in ARGUMENTS}
    assert {
        "workbench workflow status run_id",
        "workbench workflow cancel run_id",
        "workbench workflow logs run_id",
        "workbench workflow submit spec",
        "workbench workflow validate-spec spec",
    } <= found


@pytest.mark.parametrize("case", ARGUMENTS, ids=_id)
@pytest.mark.parametrize("empty", ["", "  "], ids=["empty", "blank"])
def test_empty_values_argument_is_usage_error(
    case: tuple[tuple[str, ...], int, Any], empty: str
) -> None:
    path, position, _ = case
    command = dict(_commands(_COMMAND))[path]
    required = [p for p in command.params if p.param_type_name == "argument"]
    values = ["x"] * len(required)
    values[position] = empty
    result = CliRunner().invoke(main.app, [*path, *values])
    assert result.exit_code == 64, (result.exit_code, result.output)
    assert "an empty value" in result.output


@pytest.mark.parametrize("argv", NAMED, ids=lambda a: f"{a[2]} {a[-1]}")
def test_empty_values_name_option_is_usage_error(argv: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main.app, [*argv, ""])
    assert result.exit_code == 64, (result.exit_code, result.output)
    assert "an empty value" in result.output and argv[-1] in result.output
