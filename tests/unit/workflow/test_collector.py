"""The GC pause around spec loading (issue 19): off inside, as it was after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.workflow.planning import collector, loading

REPO = Path(__file__).resolve().parents[3]
MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"


@pytest.fixture
def gc_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("enabled", [True, False], ids=["was-enabled", "was-disabled"])
def test_paused_inside_off_after_restored(gc_restored: None, enabled: bool) -> None:
    gc.enable() if enabled else gc.disable()

    with collector.paused():
        inside = gc.isenabled()

    assert inside is False
    assert gc.isenabled() is enabled


def test_paused_exception_inside_restores_enabled(gc_restored: None) -> None:
    gc.enable()

    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")

    assert gc.isenabled()


def test_load_validated_validates_with_gc_paused_then_restores(
    gc_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.enable()
    seen: list[bool] = []
    real = loading.validate_document

    def spy(*args: object, **kwargs: object) -> loading.ValidatedSpec:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]  # the same call, observed

    monkeypatch.setattr(loading, "validate_document", spy)

    loading.load_validated(MINIMAL, BUILTIN)

    assert seen == [False]
    assert gc.isenabled()


def test_load_validated_invalid_spec_raises_and_restores_gc(
    gc_restored: None, tmp_path: Path
) -> None:
    gc.enable()
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\n", encoding="utf-8")

    with pytest.raises(SpecError):
        loading.load_validated(bad, BUILTIN)

    assert gc.isenabled()
