"""The ``Registry`` protocol's contract, run against the fake and the real client (style.md rule 5).

The same three images on both: one carrying the bootstrap-contract label, one
without labels, one whose config cannot be read. The real client talks to
``MockRegistry`` through ``httpx.MockTransport``; the fake is told the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from npa_infra.errors import InvariantError
from npa_infra.registry import classify, contract, reference
from npa_infra.registry.base import Registry
from npa_infra.registry.client import RegistryClient
from npa_infra.registry.contract import LabelsResult
from npa_infra.registry.models import LINUX_AMD64, CheckStatus, ImageRef, ManifestCheck
from npa_infra.testing.registry import FakeRegistry
from tests.unit.registry import mockregistry as mock
from tests.unit.registry.mockregistry import MockRegistry

HOST = "registry.example.com"
ATTESTED = f"{HOST}/team/npa-good:1"
BARE = f"{HOST}/team/npa-bare:1"
BROKEN = f"{HOST}/team/npa-broken:1"


def _ref(text: str) -> ImageRef:
    parsed = reference.parse(text)
    assert isinstance(parsed, ImageRef), parsed
    return parsed


def _real() -> RegistryClient:
    registry = MockRegistry()
    registry.add_image("team/npa-good", "1", mock.CONTRACT_LABEL, index=True)
    registry.add_image("team/npa-bare", "1", None)
    _, _, config = registry.add_image("team/npa-broken", "1", {})
    del registry.blobs[("team/npa-broken", config)]
    return RegistryClient(transport=registry.transport())


def _fake() -> FakeRegistry:
    lost = classify.malformed("404 BLOB_UNKNOWN", 404)
    return FakeRegistry(labels={BARE: {}, BROKEN: LabelsResult(failure=lost)})


@pytest.fixture(params=["fake", "client"])
def registry(request: pytest.FixtureRequest) -> Iterator[Registry]:
    implementation: Registry = _fake() if request.param == "fake" else _real()
    try:
        yield implementation
    finally:
        implementation.close()


def _labels(registry: Registry, text: str) -> LabelsResult:
    checked = registry.check_manifest(_ref(text), LINUX_AMD64)
    assert checked.status is CheckStatus.OK
    return registry.image_labels(_ref(text), checked)


def test_registry_labels_attested_image_carries_the_contract(registry: Registry) -> None:
    read = _labels(registry, ATTESTED)

    assert read.failure is None
    assert read.labels.get(contract.LABEL) == contract.CONTRACT
    assert read.config_digest is not None and read.config_digest.startswith("sha256:")


def test_registry_labels_bare_image_has_none(registry: Registry) -> None:
    read = _labels(registry, BARE)

    assert (read.failure, contract.LABEL in read.labels) == (None, False)


def test_registry_labels_unreadable_config_is_a_classified_failure(registry: Registry) -> None:
    read = _labels(registry, BROKEN)

    assert read.failure is not None
    assert read.failure.status is not CheckStatus.OK
    assert contract.decide(read).status is CheckStatus.PROBE_INDETERMINATE


def test_registry_labels_of_a_check_that_is_not_ok_is_a_bug(registry: Registry) -> None:
    with pytest.raises(InvariantError):
        registry.image_labels(_ref(ATTESTED), ManifestCheck(CheckStatus.UNREACHABLE))
