"""The selection of one command: gather what ``resolve`` reads, decide, raise its refusal.

Reads the project entry (``store.load``), whether ``stacks/Pulumi.<alias>.yaml``
exists under the project root (the stack files' own rule,
``npa_infra.stack.config.stack_file_path``) and the known names, then applies
``resolve.resolve``. A refusal is raised as a ``ProjectError`` (exit 1) whose
message and remedy are the refusal's: the CLI prints ``Error: …`` and
``Hint: …``, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from npa_infra.errors import ConfigError, ProjectError
from npa_infra.projects import resolve
from npa_infra.projects.models import Selection, valid_alias

__all__ = ["context_of", "known_stacks", "select"]


def _stack_exists(name: str, root: Path) -> bool:
    from npa_infra.stack import config as stack_config

    try:
        return stack_config.stack_file_path(name, root).is_file()
    except ConfigError:  # not a usable stack name: no stack can have it
        return False


def _load(alias: str, env: Mapping[str, str]) -> resolve.Entry:
    # The store (and the pydantic entry model) is imported only when a --project is
    # given: a command without one selects without it (issue 19).
    from npa_infra.projects import store

    return store.load(alias, env)


def _known_aliases(env: Mapping[str, str]) -> tuple[str, ...]:
    from npa_infra.projects import store

    return store.known_aliases(env)


def known_stacks(root: Path) -> tuple[str, ...]:
    """The stacks with a file under ``root/stacks``, sorted."""
    try:
        names = [p.name for p in (root / "stacks").iterdir()]
    except OSError:
        return ()
    return tuple(
        sorted(
            n[len("Pulumi.") : -len(".yaml")]
            for n in names
            if n.startswith("Pulumi.") and n.endswith(".yaml")
        )
    )


def select(
    *,
    stack: str | None,
    project: str | None,
    env: Mapping[str, str],
    root: Path,
    context: str | None = None,
) -> Selection:
    """What ``--stack``/``--project`` (and an explicit ``context``) select.

    Raises:
        ProjectError: an unknown or unreadable project, an unusable alias, or options
            that name different targets (the remedy says which to drop).
    """
    request = resolve.Request(stack=stack, project=project, context=context)
    entry = _load(project, env) if project is not None and valid_alias(project) else None
    exists = project is not None and _stack_exists(project, root)
    missing = (
        project is not None
        and not exists
        and (entry is None or entry.state is resolve.EntryState.ABSENT)
    )
    known = resolve.Known(_known_aliases(env), known_stacks(root)) if missing else resolve.Known()
    decided = resolve.resolve(request, entry, stack_exists=exists, known=known)
    if isinstance(decided, resolve.Refusal):
        raise ProjectError(
            decided.message,
            remedy=decided.remedy,
            details={"reason": decided.reason.value, **decided.details},
        )
    return decided


def context_of(selection: Selection, root: Path) -> str | None:
    """The selection's context: the project's own, else its stack file's ``npa-infra:context``.

    Raises:
        ConfigError, StackConfigError: the stack's file is missing or invalid.
    """
    if selection.context or not selection.stack:
        return selection.context
    from npa_infra.stack import config as stack_config

    return stack_config.load_stack_file(selection.stack, root).config.context or None
