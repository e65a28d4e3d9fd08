"""The README and ``docs/`` stay true to the CLI (issue 17).

Every command of the typer app is documented in ``docs/commands.md``, and every
``npa …`` line in a code block of the README or ``docs/`` names a real command
whose every ``--option`` / ``-o`` it spells is a real option of that command.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from npa_infra.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_FENCE = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.S)
_OPTION = re.compile(r"(?<![\w<])(--?[A-Za-z][\w-]*)")
# options every command takes from the root (``npa --debug``) or click itself
_GLOBAL = {"--help", "-h"}


# typer builds click objects (possibly its own vendored click), so they are read by shape
Command = Any


def _root() -> Command:
    command = typer.main.get_command(app)
    assert _is_group(command)
    return command


def _is_group(command: Command) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def _commands(group: Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        yield (*path, name)
        if _is_group(command):
            yield from _commands(command, (*path, name))


def _options(command: Command) -> set[str]:
    found = set(_GLOBAL)
    for param in command.params:
        if param.param_type_name == "option":
            found.update(param.opts)
            found.update(param.secondary_opts)
    return found


def _code_lines() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for block in _FENCE.findall(doc.read_text(encoding="utf-8")):
            for raw in block.splitlines():
                line = raw.split("#", 1)[0].strip()
                for part in re.split(r"&&|;|\|\|", line):
                    part = part.strip()
                    if part.startswith(("npa ", ".venv/bin/npa ")):
                        yield doc.name, part.split("npa ", 1)[1]


def _resolve(words: list[str]) -> tuple[Command, list[str]]:
    """The deepest command the leading words name, and the words after it."""
    command = _root()
    rest = list(words)
    while rest and _is_group(command) and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    return command, rest


def test_every_command_is_documented_in_docs_commands() -> None:
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    missing = [
        " ".join(path)
        for path in _commands(_root())
        if not re.search(rf"\bnpa {re.escape(' '.join(path))}\b", text)
    ]
    assert missing == [], f"commands not documented in docs/commands.md: {missing}"


CODE_LINES = sorted(set(_code_lines()))


def test_docs_have_code_lines() -> None:
    assert len(CODE_LINES) > 30  # the walk below checks something


@pytest.mark.parametrize(("doc", "line"), CODE_LINES, ids=[f"{d}:{x}" for d, x in CODE_LINES])
def test_documented_command_line_names_real_command_and_options(doc: str, line: str) -> None:
    words = line.split()
    command, rest = _resolve(words)
    assert command is not _root(), f"{doc}: `npa {line}` names no command"
    if _is_group(command):
        assert not rest or rest[0].startswith("-"), f"{doc}: `npa {line}`: no command {rest[0]}"
    spelled = {m.split("=", 1)[0] for w in rest for m in _OPTION.findall(w)}
    unknown = sorted(spelled - _options(command) - {"--debug"})
    assert unknown == [], f"{doc}: `npa {line}`: not options of that command: {unknown}"
