"""One contract, two backends: the simulator and the real skypilot==0.12.2.

Every assertion here is about an answer the real SkyPilot gives offline (no
controller, no cluster), so the same test runs against both; the real
backend is slow (it needs the bootstrapped venv and starts a local server).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from npa_infra.skypilot.models import DownOutcome, ErrorKind, QueueVerdict
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.skypilot.simenv import make_sim

Backend = Callable[[], SkyCli]


@pytest.fixture(
    params=["simulator", pytest.param("real", marks=pytest.mark.slow)],
    ids=["simulator", "real"],
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> SkyCli:
    if request.param == "simulator":
        return make_sim(tmp_path).cli()
    real = request.getfixturevalue("real_sky")
    return real.cli  # type: ignore[no-any-return]  # the fixture is typed in its conftest


def test_contract_version_is_pinned_release(backend: SkyCli) -> None:
    assert backend.version() == "0.12.2"


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_contract_queue_without_controller_is_verified_empty(
    backend: SkyCli, verbose: bool
) -> None:
    answer = backend.queue(verbose=verbose)
    assert answer.verdict is QueueVerdict.VERIFIED_EMPTY
    assert answer.records == ()


def test_contract_cancel_without_controller_is_cluster_not_up(backend: SkyCli) -> None:
    answer = backend.cancel([1])
    assert answer.error_kind is ErrorKind.CLUSTER_NOT_UP
    assert answer.scheduled == ()
    assert answer.command.returncode == 1


def test_contract_down_of_absent_controller_is_already_absent(backend: SkyCli) -> None:
    answer = backend.down_controller()
    assert answer.outcome is DownOutcome.ALREADY_ABSENT
    assert answer.command.returncode == 0
