"""The selection a command's ``--stack``/``--project`` resolve to, and the alias rule.

``Selection`` is what a command targets after ``resolve``: a stack and/or a
context, namespace and SkyPilot state directory, and where that came from
(``Origin``). It is a frozen slotted dataclass, not a pydantic model: every
submit and status selects, and this module must not import pydantic (issue 19:
``submit --plan-only`` stays light). The project entry itself, what
``$NPA_HOME/projects/<alias>.yaml`` holds, is ``projects.record.Project``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ALIAS",
    "DEFAULT_RELEASE_NAMESPACE",
    "Origin",
    "RunIdentity",
    "Selection",
    "valid_alias",
]

# An alias names a file, so it follows the run id rule (cli.md §0).
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
DEFAULT_RELEASE_NAMESPACE = "ghcr.io/nebius/nebius-physical-ai"


def valid_alias(alias: str) -> bool:
    """Whether ``alias`` can name a project file."""
    return bool(ALIAS.match(alias))


class Origin(StrEnum):
    """Where a selection came from."""

    NONE = "none"  # neither --stack nor --project: the command's own default
    STACK = "stack"  # --stack NAME
    PROJECT = "project"  # --project ALIAS, bound by its project entry
    STACK_PROJECT = "stack_project"  # --project NAME, no entry: the stack of that name


def _text(value: object) -> str | None:
    return str(value) if value else None


def _same_dir(chosen: str | None, recorded: str | None) -> bool:
    if not chosen or not recorded:
        return False
    return os.path.normpath(os.path.expanduser(chosen)) == os.path.normpath(recorded)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
    """Whose a journaled run (or plan) is, as its row recorded it at submit."""

    stack: str | None = None
    context: str | None = None
    project: str | None = None  # the ``--project`` alias it was submitted under
    state_dir: str | None = None  # the SkyPilot state directory it was launched from

    @classmethod
    def of(cls, stack: str | None, data: Mapping[str, object] | None) -> RunIdentity:
        """From a run or plan row: its stack column and its data's recorded target."""
        recorded = data or {}
        return cls(
            stack=stack or None,
            context=_text(recorded.get("context")),
            project=_text(recorded.get("project")),
            state_dir=_text(recorded.get("isolated_config_dir")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What a command targets: a stack and/or a context, namespace and state directory."""

    origin: Origin = Origin.NONE
    project: str | None = None
    stack: str | None = None
    context: str | None = None
    namespace: str | None = None
    state_dir: str | None = None

    def admits(self, run: RunIdentity) -> bool:
        """Whether ``run`` belongs to this selection, by the target's own identity.

        A stack selects its runs. A project bound to a context (no stack)
        selects the runs submitted under its alias, and a run that recorded no
        alias only when it was launched from the project's own state
        directory: a Kubernetes context is no identity, since two projects may
        share one (issue 24). A bare context (no project) selects the runs on
        it that no stack owns; no selection admits every run.
        """
        if self.stack is not None:
            return run.stack == self.stack
        if run.stack is not None and self.context is not None:
            return False
        if self.project is not None and self.context is not None:
            if run.project is not None:
                return run.project == self.project
            return _same_dir(self.state_dir, run.state_dir)
        if self.context is not None:
            return run.context == self.context
        return True

    def infra(self, given: str | None) -> str | None:
        """``--infra`` as given, else ``k8s/<the project's context>`` (None: neither)."""
        if given is not None:
            return given
        return f"k8s/{self.context}" if self.context else None

    def describe(self) -> str:
        """``project A (stack S)``, ``stack S``, or ``project A (context C)``, for messages."""
        if self.origin is Origin.STACK:
            return f"stack {self.stack}"
        target = f"stack {self.stack}" if self.stack else f"context {self.context or '-'}"
        return f"project {self.project} ({target})" if self.project else "no stack or project"
