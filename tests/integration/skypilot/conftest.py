"""Fixtures running the real ``SkyCli`` against the ``sky`` simulator (skypilot-0.12.md §12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.skypilot.simenv import Sim, make_sim


@pytest.fixture
def sim(tmp_path: Path) -> Sim:
    return make_sim(tmp_path)
