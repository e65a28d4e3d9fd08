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
from npa_infra.workflow.target import services as sdk_services
from npa_infra.workflow.target.services import Services

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
    for obj in (None, {"other": "object"}):
        built = services.build(obj)
        assert built.sky is sdk_services.open_sky and built.real_sky()
        assert built.cluster is sdk_services.open_cluster
        assert built.gpu_cluster is sdk_services.open_gpu_cluster
        assert built.prober is sdk_services.open_prober
        assert built.registry is sdk_services.open_registry
        assert built.store is sdk_services.open_store
        assert built.stack_engine is sdk_services.open_engine
        assert built.progress is sdk_services.silent
        assert built.isolated_dir is None and built.readiness is None


def test_services_real_defaults_open_nothing_until_called() -> None:
    given = Services()

    registry = given.registry({}, None, ())  # a client, no request made yet
    try:
        assert type(registry).__name__ == "RegistryClient"
    finally:
        registry.close()


def test_build_given_services_kept_progress_added() -> None:
    lines: list[str] = []

    def factory(*_: object) -> FakeRegistry:
        return FakeRegistry()

    given = Services(registry=factory)

    built = services.build(given, progress=lines.append)

    assert built.registry is factory and built.real_sky()  # sky was not injected
    assert built.progress == lines.append
    assert services.build(given) is given


def test_preflight_images_injected_registry_and_prober_replace_the_real_ones() -> None:
    registry = FakeRegistry()
    asked: list[str] = []
    probers: list[FakePodProber] = []

    def prober(context: str, env: object) -> FakePodProber:
        asked.append(context)
        probers.append(FakePodProber(context))
        return probers[-1]

    result = _preflight(Services(registry=lambda *_: registry, prober=prober), "--infra", "k8s/ctx")

    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert {r["image"] for r in rows} == {ISAAC, WORKBENCH, VIEWER}
    assert {r["probe"]["status"] for r in rows} == {"compatible"}
    assert sorted(registry.calls) == sorted({ISAAC, WORKBENCH, VIEWER})
    assert registry.closed  # the caller of the factory closes what it returned
    assert asked and set(asked) == {"ctx"} and any(p.created for p in probers)


def test_preflight_images_injected_registry_not_found_exit_1() -> None:
    missing = ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)
    registry = FakeRegistry({VIEWER: missing})

    result = _preflight(Services(registry=lambda *_: registry))

    assert result.exit_code == 1
    rows = json.loads(result.stdout)["rows"]
    assert {r["image"]: r["status"] for r in rows}[VIEWER] == "not_found"


def _preflight(given: Services, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["workbench", "workflow", "preflight-images", str(LOOP_DECISION), *args, "--json"],
        obj=given,
        catch_exceptions=False,
    )
