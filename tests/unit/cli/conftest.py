"""CLI tests never reach a real registry: image preflight answers from a ``FakeRegistry``.

Every image is ``ok`` unless a test puts an answer in ``fake_registry.answers``;
``fake_registry.opened_with`` records how the command asked for the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow import imagecheck


class CliFakeRegistry(FakeRegistry):
    def __init__(self) -> None:
        super().__init__()
        self.opened_with: list[dict[str, object]] = []


@pytest.fixture(autouse=True)
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> CliFakeRegistry:
    fake = CliFakeRegistry()

    def open_client(
        env: Mapping[str, str], *, stack: str | None = None, insecure_hosts: Sequence[str] = ()
    ) -> FakeRegistry:
        fake.opened_with.append({"stack": stack, "insecure_hosts": list(insecure_hosts)})
        return fake

    monkeypatch.setattr(imagecheck, "open_client", open_client)
    return fake
