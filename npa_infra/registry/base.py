"""The one interface preflight needs from a registry (style.md rule 4).

``check_manifest`` checks one manifest; ``image_labels`` reads the image
config labels of a checked image (only for trusted images, whose bootstrap
contract label is enforced: ``contract.is_trusted``). ``client.RegistryClient``
is the real one (httpx); ``npa_infra.testing.registry.FakeRegistry`` is the
fake. An implementation classifies every answer itself and never raises for
anything a registry (or the network) does.
"""

from __future__ import annotations

from typing import Protocol

from npa_infra.registry.contract import LabelsResult
from npa_infra.registry.models import ImageRef, ManifestCheck, Platform

__all__ = ["Registry"]


class Registry(Protocol):
    def check_manifest(self, ref: ImageRef, platform: Platform) -> ManifestCheck:
        """The registry's own answer for ``ref``: status, digest and, for an index, the platform digest."""
        ...

    def image_labels(self, ref: ImageRef, check: ManifestCheck) -> LabelsResult:
        """``config.Labels`` of the manifest ``check`` resolved (its platform child for an index).

        Raises:
            InvariantError: ``check`` is not an ``ok`` check with a digest.
        """
        ...

    def close(self) -> None:
        """Release pooled connections."""
        ...
