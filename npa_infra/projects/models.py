"""The selection a command's ``--stack``/``--project`` resolve to, and the alias rule.

``Selection`` is what a command targets after ``resolve``: a stack and/or a
context, namespace and SkyPilot state directory, and where that came from
(``Origin``). It is a frozen slotted dataclass, not a pydantic model: every
submit and status selects, and this module must not import pydantic (issue 19:
``submit --plan-only`` stays light). The project entry itself, what
``$NPA_HOME/projects/<alias>.yaml`` holds, is ``projects.record.Project``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ALIAS", "DEFAULT_RELEASE_NAMESPACE", "Origin", "Selection", "valid_alias"]

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What a command targets: a stack and/or a context, namespace and state directory."""

    origin: Origin = Origin.NONE
    project: str | None = None
    stack: str | None = None
    context: str | None = None
    namespace: str | None = None
    state_dir: str | None = None

    def admits(self, stack: str | None, context: str | None) -> bool:
        """Whether a run bound to ``stack`` on ``context`` belongs to this selection.

        A stack selects its runs; a project bound to a context only selects the
        runs on that context that no stack owns; no selection admits every run.
        """
        if self.stack is not None:
            return stack == self.stack
        if self.context is not None:
            return not stack and context == self.context
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
