"""The project entry: what ``$NPA_HOME/projects/<alias>.yaml`` holds (``store``).

Non-secret names only, never a credential: the alias, and the stack or the
context, namespace and SkyPilot state directory it binds (an absolute path,
``projects.statedir``). A pydantic model
because it is read from and written to a file (extra keys refused); only the
commands that read or write an entry import it (``projects.models`` stays free
of pydantic, issue 19).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

from npa_infra.errors import UsageError
from npa_infra.projects import statedir
from npa_infra.projects.models import DEFAULT_RELEASE_NAMESPACE, valid_alias

__all__ = ["Project"]


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

    @field_validator("state_dir")
    @classmethod
    def _state_dir(cls, value: str | None) -> str | None:
        # an entry written before issue 24 may hold a relative or '~' path: unreadable,
        # never resolved against whichever directory a later command runs in
        if value is not None:
            try:
                statedir.check_text(value)
            except UsageError as exc:
                raise ValueError(exc.message) from None
        return value
