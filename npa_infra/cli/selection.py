"""``-s/--stack`` and ``-p/--project``: one option each, with one meaning, for every command.

``StackOpt`` selects ``stacks/Pulumi.<NAME>.yaml``, as in Pulumi; ``ProjectOpt``
selects a project: its entry in ``$NPA_HOME/projects/``, else the stack of that
name (``npa_infra.projects.resolve`` has the rules). ``select`` turns the pair
into a ``Selection``; a refusal prints ``Error: …`` and ``Hint: …`` (with
``--json``, the error document) and exits 1, never a traceback. The SDK is
imported inside the functions, so ``npa --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from npa_infra.cli import optiontypes, output
from npa_infra.projects import PROJECT_HELP, STACK_HELP

if TYPE_CHECKING:
    from npa_infra.projects.models import Selection

__all__ = ["ProjectOpt", "StackOpt", "context_of", "given", "select", "stack_name"]

StackOpt = Annotated[
    str | None,
    typer.Option(
        "--stack",
        "-s",
        metavar="NAME",
        help=STACK_HELP,
        parser=optiontypes.text,
        show_default=False,
    ),
]
ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        metavar="ALIAS",
        help=PROJECT_HELP,
        parser=optiontypes.text,
        show_default=False,
    ),
]


def given(infra: str | None) -> str | None:
    """The context an ``--infra k8s/CTX`` names explicitly (checked against the project's)."""
    return infra.removeprefix("k8s/") or None if infra and infra.startswith("k8s/") else None


def select(
    stack: str | None,
    project: str | None,
    *,
    as_json: bool,
    context: str | None = None,
    extra: dict[str, Any] | None = None,
    root: Path | None = None,
) -> Selection:
    """The selection of ``--stack``/``--project`` (and an explicit context), or exit 1.

    ``root`` holds ``stacks/``: the working directory unless given (as submit reads stacks).
    """
    if stack is None and project is None:
        # projects.resolve rule 1: nothing selected, whatever the context; decided without
        # loading the resolver and the project entries (submit --plan-only, issue 19)
        from npa_infra.projects.models import Selection

        return Selection()
    import os

    from npa_infra.errors import NpaError
    from npa_infra.projects import selection

    try:
        return selection.select(
            stack=stack, project=project, env=os.environ, root=root or Path.cwd(), context=context
        )
    except NpaError as exc:
        output.fail(exc, as_json=as_json, extra=extra)


def context_of(chosen: Selection, given: str | None, *, as_json: bool, flag: str) -> str:
    """``given``, else the selection's context (its project's, else its stack file's).

    Exits 2 (usage) when there is none: the context is always explicit.
    """
    from npa_infra.errors import NpaError, UsageError
    from npa_infra.projects import selection

    if given:
        return given
    try:
        found = selection.context_of(chosen, Path.cwd())
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    if not found:
        output.fail(
            UsageError(
                f"no context: {flag} was not given and {chosen.describe()} names none",
                remedy=f"pass {flag} CONTEXT (the exact kubeconfig context), or a "
                "-p/--project ALIAS bound to one",
            ),
            as_json=as_json,
        )
    return found


def stack_name(
    stack: str | None,
    project: str | None,
    *,
    as_json: bool,
    command: str,
    default: str | None = None,
    context: str | None = None,
) -> str:
    """The stack of an ``npa stack`` command; ``default`` None: one must be given (exit 64)."""
    from npa_infra.errors import ConfigError, ProjectError, UsageError
    from npa_infra.stack import config as stack_config

    try:  # the stack commands' own root (npa_infra.stack.api)
        root = stack_config.find_project_root(Path.cwd())
    except ConfigError:
        root = Path.cwd()  # the command itself reports the missing Pulumi.yaml
    chosen = select(stack, project, as_json=as_json, context=context, root=root)
    if chosen.stack:
        return chosen.stack
    if chosen.project is not None:
        output.fail(
            ProjectError(
                f"{chosen.describe()} binds no stack; `{command}` acts on a stack",
                remedy=f"{command} --stack NAME",
                details={"reason": "no_stack", "project": chosen.project},
            ),
            as_json=as_json,
        )
    if default is None:
        output.fail(
            UsageError(
                f"`{command}` has no default stack: name the one it acts on",
                remedy=f"{command} --stack NAME (stacks/Pulumi.<NAME>.yaml)",
            ),
            as_json=as_json,
        )
    return default
