"""Fixtures for the Kubernetes API double's own tests: the double, kubectl, official-client APIs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.support.fakekube import FakeKube
from tests.support.fakekube.pytest_plugin import fake_kube, kubectl

__all__ = ["api", "core", "fake_kube", "kubectl"]


@pytest.fixture
def api(fake_kube: FakeKube) -> Iterator[client.ApiClient]:
    """An official-client ``ApiClient`` on context ``fake-a`` (namespace ``team-a``)."""
    api_client = config.new_client_from_config(str(fake_kube.kubeconfig), "fake-a")
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)
