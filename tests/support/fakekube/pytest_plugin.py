"""Pytest fixtures for the Kubernetes API double.

Use them from a conftest with a plain import (``pytest_plugins`` is only
allowed in the root conftest)::

    from tests.support.fakekube.pytest_plugin import fake_kube, kubectl  # noqa: F401
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fakekube.fake import FakeKube

__all__ = ["fake_kube", "kubectl", "kubectl_binary"]


@pytest.fixture
def fake_kube(tmp_path: Path) -> Iterator[FakeKube]:
    """A started double with its kubeconfig under ``tmp_path``; stopped at teardown."""
    fake = FakeKube.start(tmp_path / "fakekube")
    try:
        yield fake
    finally:
        fake.stop()


def kubectl_binary() -> str:
    """``$NPA_TEST_KUBECTL`` or the ``kubectl`` on PATH (``.ci/run`` installs Debian's)."""
    found = os.environ.get("NPA_TEST_KUBECTL") or shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl is not installed; .ci/run installs Debian's kubernetes-client")
    return found


@pytest.fixture
def kubectl(fake_kube: FakeKube, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run kubectl against the double: ``kubectl("get", "pods", context="fake-a")``."""
    binary = kubectl_binary()
    cache = tmp_path / "kubectl-cache"

    def run(
        *args: str, context: str = "fake-a", timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        argv = [binary, "--kubeconfig", str(fake_kube.kubeconfig), "--cache-dir", str(cache)]
        argv += ["--context", context, *args]
        env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(fake_kube.kubeconfig)}
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )

    return run
