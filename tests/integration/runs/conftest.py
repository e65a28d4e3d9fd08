"""Fixtures for live-run tests: a started FakeKube and a ``World`` around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube
from tests.support.moto_plugin import moto_server, s3_server

__all__ = ["fake_kube", "moto_server", "s3_server", "world"]


@pytest.fixture
def fake_kube(tmp_path: Path) -> Iterator[FakeKube]:
    fake = FakeKube.start(tmp_path / "fakekube")
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def world(tmp_path: Path, fake_kube: FakeKube) -> World:
    return make_world(tmp_path, fake_kube)
