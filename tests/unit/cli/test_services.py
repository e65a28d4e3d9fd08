"""The CLI's one injection point: the ``Services`` in the root context reaches the SDK."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.catalog import images as pins
from npa_infra.cli import services
from npa_infra.cli.main import app
from npa_infra.registry.models import CheckStatus, ManifestCheck
from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow.execution import adapters
from tests.unit.cli.conftest import CliFakeProber, CliFakeRegistry

LOOP_DECISION = Path(__file__).resolve().parents[3] / "workflows" / "testing" / "loop-decision.yaml"
WORKBENCH = pins.catalog_image("npa-workbench", pins.DEFAULT_REGISTRY)
VIEWER = pins.catalog_image("npa-viewer", pins.DEFAULT_REGISTRY)
ISAAC = pins.catalog_image("npa-isaac-lab", pins.DEFAULT_REGISTRY)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    for name in ("NPA_TOOL_CATALOG", "NPA_REGISTRY", "NPA_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def test_build_not_services_real_defaults() -> None:
    assert services.build(None) == adapters.Services()
    assert services.build({"other": "object"}) == adapters.Services()


def test_build_given_services_kept_progress_added() -> None:
    lines: list[str] = []
    given = adapters.Services(registry=FakeRegistry)

    built = services.build(given, progress=lines.append)

    assert built.registry is FakeRegistry
    assert built.progress == lines.append
    assert services.build(given) is given


def test_preflight_images_injected_registry_and_prober_replace_the_real_ones(
    fake_registry: CliFakeRegistry, fake_prober: CliFakeProber
) -> None:
    registry = FakeRegistry()
    asked: list[str] = []
    probers: list[FakePodProber] = []

    def prober(context: str) -> FakePodProber:
        asked.append(context)
        probers.append(FakePodProber(context))
        return probers[-1]

    result = _preflight(
        adapters.Services(registry=lambda: registry, prober=prober), "--infra", "k8s/ctx"
    )

    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["image"] for r in rows} == {ISAAC, WORKBENCH, VIEWER}
    assert {r["probe"]["status"] for r in rows} == {"compatible"}
    assert sorted(registry.calls) == sorted({ISAAC, WORKBENCH, VIEWER})
    assert not registry.closed  # an injected client belongs to the caller
    assert asked and set(asked) == {"ctx"} and any(p.created for p in probers)
    assert fake_registry.opened_with == [] and fake_prober.opened == []  # real ones never opened


def test_preflight_images_injected_registry_not_found_exit_1(
    fake_registry: CliFakeRegistry,
) -> None:
    missing = ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)
    registry = FakeRegistry({VIEWER: missing})

    result = _preflight(adapters.Services(registry=lambda: registry))

    assert result.exit_code == 1
    assert {r["image"]: r["status"] for r in json.loads(result.stdout)}[VIEWER] == "not_found"
    assert fake_registry.opened_with == []


def _preflight(given: adapters.Services, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["workbench", "workflow", "preflight-images", str(LOOP_DECISION), *args, "--json"],
        obj=given,
        catch_exceptions=False,
    )
