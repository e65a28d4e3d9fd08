"""The one interface the stack commands use to drive the Pulumi engine (style.md rule 4).

``runner.StackRunner`` is the real one (the Automation API); tests inject a
``PulumiCommand`` into it, or pass their own ``StackEngine``. Every method
takes and returns our models, never SDK objects, and raises ``NpaError``s
only (runner.translate).
"""

from __future__ import annotations

from typing import Protocol

from pydantic import SecretStr

from npa_infra.stack.models import EngineUpdate, OutputEntry, UpdateSummary
from npa_infra.stack.report import PreviewReport

__all__ = ["StackEngine"]


class StackEngine(Protocol):
    """One stack of the npa-infra project on one backend."""

    def preview(self, *, diff: bool = False) -> PreviewReport:
        """What ``up`` would change, as a structured diff."""
        ...

    def refresh_preview(self) -> PreviewReport:
        """How the live resources drifted from the state (nothing is written)."""
        ...

    def up(self) -> EngineUpdate: ...

    def refresh(self) -> UpdateSummary:
        """Write the live resources' state into the stack's state."""
        ...

    def destroy(self, *, exclude_protected: bool = False) -> UpdateSummary: ...

    def outputs(self) -> dict[str, OutputEntry]: ...

    def set_secret_config(self, key: str, value: SecretStr) -> None:
        """Store ``value`` as the stack's secret config ``key`` (encrypted by the engine)."""
        ...

    def secret_config(self, key: str) -> SecretStr | None:
        """The decrypted value of the stack's config ``key``; None when it is not set."""
        ...
