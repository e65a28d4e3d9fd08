"""The planner and the renderer a submit and its runtime run use, as one injectable value.

``Planning`` holds ``planner.build_plan`` and ``documents.render_plan`` by default.
A runtime run plans and renders its route once per decision set that changes it
(``reidentification.Routes``, issue 19); tests pass counting wrappers here to
assert that, instead of timing it. Light on purpose: ``--plan-only`` imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from npa_infra.plan import planner
from npa_infra.render import documents

if TYPE_CHECKING:
    from npa_infra.catalog.model import Catalog
    from npa_infra.plan.model import Plan
    from npa_infra.render.tasks import RenderSettings
    from npa_infra.spec.model import Spec

__all__ = ["PlanBuilder", "Planning", "WaveRenderer"]


class PlanBuilder(Protocol):
    """``planner.build_plan``'s signature, as a run plans with it."""

    def __call__(
        self,
        spec: Spec,
        catalog: Catalog,
        *,
        run_id: str,
        assume_decision: str = "",
        variables: Mapping[str, str] | None = None,
        decisions: Mapping[str, str] | None = None,
    ) -> Plan: ...


class WaveRenderer(Protocol):
    """``documents.render_plan``'s signature, as a run renders with it."""

    def __call__(
        self, plan: Plan, s: RenderSettings, *, runtime: bool, max_concurrency_cap: int = 0
    ) -> list[documents.RenderedJob]: ...


@dataclass(frozen=True, slots=True)
class Planning:
    """The planner and the renderer of one submit: the real ones unless replaced."""

    build: PlanBuilder = planner.build_plan
    render: WaveRenderer = documents.render_plan
