"""The project record and the selection a command's ``--stack``/``--project`` resolve to.

``Project`` is what ``$NPA_HOME/projects/<alias>.yaml`` holds (``store``):
non-secret names only, never a credential. ``Selection`` is what a command
targets after ``resolve``: a stack and/or a context, namespace and SkyPilot
state directory, and where that came from (``Origin``).
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["ALIAS", "DEFAULT_RELEASE_NAMESPACE", "Origin", "Project", "Selection", "valid_alias"]

# An alias names a file, so it follows the run id rule (cli.md §0).
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
DEFAULT_RELEASE_NAMESPACE = "ghcr.io/nebius/nebius-physical-ai"


def valid_alias(alias: str) -> bool:
    """Whether ``alias`` can name a project file."""
    return bool(ALIAS.match(alias))


class Project(BaseModel):
    """One project entry: what its alias binds (a stack, or a context and namespace)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str
    stack: str | None = None
    context: str | None = None
    namespace: str | None = None
    state_dir: str | None = None
    release_namespace: str = DEFAULT_RELEASE_NAMESPACE

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        if not valid_alias(value):
            raise ValueError(
                "an alias is 1-96 characters: a letter or digit, then letters, digits, "
                "'.', '_' or '-'"
            )
        return value


class Origin(StrEnum):
    """Where a selection came from."""

    NONE = "none"  # neither --stack nor --project: the command's own default
    STACK = "stack"  # --stack NAME
    PROJECT = "project"  # --project ALIAS, bound by its project entry
    STACK_PROJECT = "stack_project"  # --project NAME, no entry: the stack of that name


class Selection(BaseModel):
    """What a command targets: a stack and/or a context, namespace and state directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
