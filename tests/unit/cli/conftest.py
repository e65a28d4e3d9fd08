"""CLI tests never reach a real registry or cluster: they inject ``Services``.

``cli_services`` is what each test file's ``npa`` runner passes as the root
context's object (``CliRunner.invoke(app, args, obj=…)``), exactly as an
embedding caller would: the registry is ``fake_registry`` (every image ``ok``
unless a test puts an answer in ``fake_registry.answers``; ``opened_with``
records how the command asked for the client) and the in-cluster pull probe
runs against ``fake_prober`` (``FakePodProber``), whose probe pods succeed
unless a test sets its ``kubelet``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow.target.services import Services


class CliFakeRegistry(FakeRegistry):
    def __init__(self) -> None:
        super().__init__()
        self.opened_with: list[dict[str, object]] = []

    def open(
        self, env: Mapping[str, str], stack: str | None, insecure_hosts: Sequence[str]
    ) -> FakeRegistry:
        """The ``Services.registry`` factory: records how it was asked, answers with itself."""
        self.opened_with.append({"stack": stack, "insecure_hosts": list(insecure_hosts)})
        return self


@pytest.fixture
def fake_registry() -> CliFakeRegistry:
    return CliFakeRegistry()


class CliFakeProber(FakePodProber):
    """The pull probe's cluster: every probe pod succeeds unless a test sets ``kubelet``."""

    def __init__(self) -> None:
        super().__init__("ctx")
        self.opened: list[str] = []

    def open(self, context: str, env: Mapping[str, str]) -> FakePodProber:
        """The ``Services.prober`` factory: records the context asked for."""
        self.opened.append(context)
        return self


@pytest.fixture
def fake_prober() -> CliFakeProber:
    return CliFakeProber()


@pytest.fixture
def cli_services(fake_registry: CliFakeRegistry, fake_prober: CliFakeProber) -> Services:
    """The real adapters, except the registry and the pull probe's cluster."""
    return Services(registry=fake_registry.open, prober=fake_prober.open)
