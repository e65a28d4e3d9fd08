"""What a command's ``--stack``/``--project`` pair selects: one pure decision (issue 16).

The inputs are observations: the request (the two options and the context the
command was given explicitly), the project entry as read (present, absent as
an authoritative answer, or unreadable: never guessed past), whether a stack
file named like the alias exists, and the names known, for the message. The
answer is a ``Selection`` or a ``Refusal`` whose ``Reason`` names the remedy.

The rules, in order:

1. no option: nothing selected (the command's own default applies);
2. ``--stack S`` alone: stack ``S`` (its file is read, and reported, by the command);
3. an alias that cannot name a file: refused;
4. an unreadable entry: refused, naming the file (unknown is not absent,
   faults.md invariant 4: never fall back to the stack of that name);
5. an entry: its binding; a ``--stack`` or explicit context it does not bind
   is refused (one target per command);
6. no entry but a stack file of that name: that stack, the stack-backed
   project ("a stack is its own project until a project entry binds the
   alias"); a different ``--stack`` is refused;
7. neither: refused, listing the known projects and stacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from npa_infra.projects.models import Origin, Selection, valid_alias

if TYPE_CHECKING:
    from npa_infra.projects.record import Project

__all__ = ["Entry", "EntryState", "Known", "Reason", "Refusal", "Request", "resolve"]


class EntryState(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"  # the file is authoritatively not there
    UNREADABLE = "unreadable"  # there, but not readable or not a valid entry


@dataclass(frozen=True, slots=True)
class Entry:
    """The observation of ``$NPA_HOME/projects/<alias>.yaml``."""

    state: EntryState
    path: str
    project: Project | None = None  # PRESENT only
    problem: str = ""  # UNREADABLE only: why


@dataclass(frozen=True, slots=True)
class Request:
    stack: str | None = None
    project: str | None = None
    context: str | None = None  # given explicitly (--cluster, --infra k8s/CTX)


@dataclass(frozen=True, slots=True)
class Known:
    """What exists, for the refusal's message."""

    projects: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()


class Reason(StrEnum):
    INVALID_ALIAS = "invalid_alias"
    UNREADABLE_ENTRY = "unreadable_entry"
    STACK_DISAGREES = "stack_disagrees"
    CONTEXT_DISAGREES = "context_disagrees"
    UNKNOWN_PROJECT = "unknown_project"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: Reason
    message: str
    remedy: str
    details: dict[str, str | list[str]] = field(default_factory=dict)


def _names(items: tuple[str, ...]) -> str:
    return ", ".join(sorted(items)) or "none"


def _bound(project: Project, request: Request) -> Selection | Refusal:
    """Rule 5: the entry's binding, unless the request names another target."""
    alias = project.alias
    if request.stack is not None and request.stack != project.stack:
        bound = f"stack {project.stack}" if project.stack else "no stack"
        return Refusal(
            Reason.STACK_DISAGREES,
            f"--stack {request.stack} disagrees with project {alias}, which binds {bound}",
            f"drop --stack (project {alias} selects its target), or drop --project",
            {"project": alias, "stack": request.stack},
        )
    if request.context and project.context and request.context != project.context:
        return Refusal(
            Reason.CONTEXT_DISAGREES,
            f"context {request.context} disagrees with project {alias}, which binds context "
            f"{project.context}",
            f"drop the context (project {alias} selects {project.context}), or drop --project",
            {"project": alias, "context": request.context},
        )
    return Selection(
        origin=Origin.PROJECT,
        project=alias,
        stack=project.stack,
        context=project.context,
        namespace=project.namespace,
        state_dir=project.state_dir,
    )


def resolve(
    request: Request, entry: Entry | None, *, stack_exists: bool, known: Known
) -> Selection | Refusal:
    """The selection of ``request``; ``entry`` None when no ``--project`` was given."""
    alias = request.project
    if alias is None:  # rules 1 and 2
        if request.stack is None:
            return Selection()
        return Selection(origin=Origin.STACK, stack=request.stack)
    if not valid_alias(alias):  # rule 3
        return Refusal(
            Reason.INVALID_ALIAS,
            f"project alias {alias!r} is not usable",
            "use 1-96 characters: a letter or digit, then letters, digits, '.', '_' or '-'",
            {"project": alias},
        )
    if entry is not None and entry.state is EntryState.UNREADABLE:  # rule 4
        return Refusal(
            Reason.UNREADABLE_ENTRY,
            f"project {alias}'s entry {entry.path} cannot be read: {entry.problem}",
            f"fix or remove {entry.path}",
            {"project": alias, "path": entry.path},
        )
    if entry is not None and entry.state is EntryState.PRESENT and entry.project is not None:
        return _bound(entry.project, request)  # rule 5
    if stack_exists:  # rule 6
        if request.stack is not None and request.stack != alias:
            return Refusal(
                Reason.STACK_DISAGREES,
                f"--stack {request.stack} disagrees with --project {alias} (the stack {alias})",
                "give one of them",
                {"project": alias, "stack": request.stack},
            )
        return Selection(origin=Origin.STACK_PROJECT, project=alias, stack=alias)
    return Refusal(  # rule 7
        Reason.UNKNOWN_PROJECT,
        f"no project {alias}: neither a project entry nor a stack of that name "
        f"(projects: {_names(known.projects)}; stacks: {_names(known.stacks)})",
        f"pass one of those, select a stack with -s/--stack NAME, or create "
        f"stacks/Pulumi.{alias}.yaml (a stack is its own project)",
        {"project": alias, "projects": sorted(known.projects), "stacks": sorted(known.stacks)},
    )
