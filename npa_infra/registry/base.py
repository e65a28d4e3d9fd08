"""The one interface preflight needs from a registry: check one manifest (style.md rule 4).

``client.RegistryClient`` is the real one (httpx); tests pass fakes that
return ``ManifestCheck`` records. An implementation classifies every answer
itself and never raises for anything a registry (or the network) does.
"""

from __future__ import annotations

from typing import Protocol

from npa_infra.registry.models import ImageRef, ManifestCheck, Platform

__all__ = ["Registry"]


class Registry(Protocol):
    def check_manifest(self, ref: ImageRef, platform: Platform) -> ManifestCheck:
        """The registry's own answer for ``ref``: status, digest and, for an index, the platform digest."""
        ...

    def close(self) -> None:
        """Release pooled connections."""
        ...
