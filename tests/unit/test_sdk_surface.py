"""The public SDK surface is pinned (style.md rule 15) and resolves lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import npa_infra

EXPECTED = [
    "CancelReport",
    "ImagePreflightReport",
    "LiveResult",
    "NpaError",
    "PlanReport",
    "SpecError",
    "StageResult",
    "StatusReport",
    "SubmitOptions",
    "SubmitReport",
    "ValidationReport",
    "cancel_run",
    "plan_spec",
    "preflight_images",
    "run_status",
    "stage_src",
    "submit",
    "validate_spec",
]


def test_sdk_all_is_pinned() -> None:
    assert sorted(npa_infra.__all__) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED, ids=EXPECTED)
def test_sdk_name_resolves(name: str) -> None:
    assert getattr(npa_infra, name) is not None


def test_sdk_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = npa_infra.nope  # type: ignore[attr-defined]  # the point of the test


def test_sdk_import_package_loads_no_submodules() -> None:
    code = (
        "import sys, npa_infra; print(sorted(m for m in sys.modules if m.startswith('npa_infra.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
