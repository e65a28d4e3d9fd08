"""Shell completion for ``npa``: ``--show-completion SHELL`` and ``--install-completion SHELL``.

typer's own pair of options guesses the shell from the parent process and
ignores a shell named on the command line; these take the shell explicitly
(bash, zsh or fish), so ``npa --show-completion zsh > ~/.zfunc/_npa`` works
from any shell, in scripts and in CI. The script is always for the installed
``npa`` command (completion variable ``_NPA_COMPLETE``), also when run as
``python -m npa_infra``. ``register`` adds typer's completion classes, which
answer the shell's ``_NPA_COMPLETE=complete_<shell>`` requests; without them
every request failed with "Shell bash not supported".
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

# typer.completion re-exports these without declaring them; import them where defined
from typer import _completion_classes, _completion_shared

__all__ = ["InstallOpt", "Shell", "ShowOpt", "register"]

PROG = "npa"
COMPLETE_VAR = "_NPA_COMPLETE"


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def register() -> None:
    """Register typer's bash, zsh and fish completion classes (idempotent, no I/O)."""
    _completion_classes.completion_init()


def _show(value: Shell | None) -> None:
    if value is None:
        return
    register()
    script = _completion_shared.get_completion_script(
        prog_name=PROG, complete_var=COMPLETE_VAR, shell=value.value
    )
    sys.stdout.write(script.rstrip("\n") + "\n")
    raise typer.Exit(0)


def _install(value: Shell | None) -> None:
    if value is None:
        return
    register()
    shell, path = _completion_shared.install(
        shell=value.value, prog_name=PROG, complete_var=COMPLETE_VAR
    )
    sys.stderr.write(f"{shell} completion installed in {path}; it applies in new shells\n")
    raise typer.Exit(0)


ShowOpt = Annotated[
    Shell | None,
    typer.Option(
        "--show-completion",
        callback=_show,
        is_eager=True,
        expose_value=False,
        metavar="SHELL",
        help="Print the completion script for SHELL (bash, zsh or fish) and exit.",
    ),
]
InstallOpt = Annotated[
    Shell | None,
    typer.Option(
        "--install-completion",
        callback=_install,
        is_eager=True,
        expose_value=False,
        metavar="SHELL",
        help="Install completion for SHELL (bash, zsh or fish) in its startup files and exit.",
    ),
]
