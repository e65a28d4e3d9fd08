"""CLI tests never reach a real registry or cluster: image preflight answers from fakes.

Every image is ``ok`` unless a test puts an answer in ``fake_registry.answers``;
``fake_registry.opened_with`` records how the command asked for the client.
The in-cluster pull probe runs against ``fake_prober`` (``FakePodProber``),
whose probe pods succeed unless a test sets its ``kubelet``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow.planning import imagecheck, pullcheck


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


class CliFakeProber(FakePodProber):
    """The pull probe's cluster: every probe pod succeeds unless a test sets ``kubelet``."""

    def __init__(self) -> None:
        super().__init__("ctx")
        self.opened: list[str] = []


@pytest.fixture(autouse=True)
def fake_prober(monkeypatch: pytest.MonkeyPatch) -> CliFakeProber:
    """``pullcheck.open_prober`` answers with this fake; ``opened`` records the contexts asked for."""
    fake = CliFakeProber()

    def open_prober(context: str, env: Mapping[str, str]) -> FakePodProber:
        fake.opened.append(context)
        return fake

    monkeypatch.setattr(pullcheck, "open_prober", open_prober)
    return fake
