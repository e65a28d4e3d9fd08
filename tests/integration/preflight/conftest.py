"""The Kubernetes API double (kubernetes.md §10) for the preflight tests; the real test
registry's fixtures come from the root conftest's ``pytest_plugins``."""

from __future__ import annotations

from tests.support.fakekube.pytest_plugin import fake_kube

__all__ = ["fake_kube"]
