"""npa-infra: validate, plan, render and launch npa.workflow specs on SkyPilot.

The public SDK. Names resolve lazily (PEP 562) so that importing the CLI,
which imports this package, stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
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

_HOMES = {
    "NpaError": "npa_infra.errors",
    "SpecError": "npa_infra.errors",
    "PlanReport": "npa_infra.workflow.planning.api",
    "ValidationReport": "npa_infra.workflow.planning.api",
    "plan_spec": "npa_infra.workflow.planning.api",
    "preflight_images": "npa_infra.workflow.planning.api",
    "ImagePreflightReport": "preflight.images",
    "validate_spec": "npa_infra.workflow.planning.api",
    "SubmitOptions": "npa_infra.workflow.submission.submitflags",
    "SubmitReport": "npa_infra.workflow.submission.pipeline",
    "submit": "npa_infra.workflow.submission.pipeline",
    "LiveResult": "npa_infra.workflow.execution.liverun",
    "StatusReport": "npa_infra.workflow.operations.runstatus",
    "run_status": "npa_infra.workflow.operations.runstatus",
    "CancelReport": "npa_infra.workflow.operations.cancellation",
    "cancel_run": "npa_infra.workflow.operations.cancellation",
    "StageResult": "npa_infra.source.staging",
    "stage_src": "npa_infra.workflow.submission.sourcing",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
