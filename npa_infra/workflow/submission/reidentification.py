"""Rendering a runtime run's waves, and re-identifying a wave from the spec on disk.

``Router.render`` is the one path from a spec and the decisions read so far to
the rendered waves: the planner, the GPU remap for ``--infra`` and the renderer,
with the render settings fixed at submit. ``submit``'s ``replan`` routes the run
with it, so every attempt's task YAML (and its recorded ``yaml_sha256``) comes
from it.

``Router.identify`` is what a verified relaunch checks (issue 9,
runtime-reference.md §3): the wave's identity recomputed independently from
the current inputs, never copied from the attempt being replaced. It re-reads
the spec file from disk (same path, same ``--var`` values, same catalog),
re-plans it with the same decisions, re-renders the wave through ``render`` and
returns the sha256 of its task YAML, for ``recovery.identity_unchanged`` to
compare with the attempt's recorded one. A spec that no longer loads, validates,
plans or renders yields no digest and the reason, so the relaunch is blocked as
indeterminate instead of raising out of supervision.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import NpaError, SpecError
from npa_infra.plan import planner
from npa_infra.plan.model import Plan, PlanError
from npa_infra.render import documents
from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.planning import accelerators, loading
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    from npa_infra.catalog.model import Catalog
    from npa_infra.spec.model import Spec
    from npa_infra.workflow.submission.submitflags import SubmitOptions

__all__ = ["Reidentify", "Rendered", "Router"]

Reidentify = Callable[[Mapping[str, str], int], recovery.Recomputed]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One routing of the spec: the plan prefix, its GPU-remapped plan, and its waves."""

    routed: Plan
    remapped: Plan
    jobs: list[documents.RenderedJob]


@dataclass(frozen=True, slots=True)
class Router:
    """The inputs of a runtime run that are fixed at submit, and the spec-dependent rest."""

    catalog: Catalog
    run_id: str
    options: SubmitOptions
    settings: RenderSettings
    env: Mapping[str, str]
    services: Services | None = None

    def render(self, spec: Spec, decided: Mapping[str, str]) -> Rendered:
        """Plan ``spec`` with the decisions read so far (dsl.md §5.4) and render its waves.

        The image pins resolved at submit and the staged source URI stay those of
        ``settings``: they are the source selection the run was launched with, part
        of its recorded identity; the spec's name and config come from ``spec``.

        Raises:
            PlanError: the spec does not plan.
            PreflightError, KubeError: the GPU remap on the ``--infra`` context.
            RenderError: the plan does not render.
        """
        options = self.options
        routed = planner.build_plan(
            spec,
            self.catalog,
            run_id=self.run_id,
            assume_decision=options.assume_decision,
            decisions=decided,
        )
        remapped = accelerators.resolve_for_plan(
            routed,
            infra=options.infra,
            enabled=options.resolve_accelerators,
            env=self.env,
            services=self.services,
        ).plan
        settings = dataclasses.replace(self.settings, workflow=spec.name, config=routed.config)
        jobs = documents.render_plan(
            remapped, settings, runtime=True, max_concurrency_cap=options.max_concurrency
        )
        return Rendered(routed, remapped, jobs)

    def identify(
        self, spec_path: Path, decided: Mapping[str, str], index: int
    ) -> recovery.Recomputed:
        """Job ``index``'s task-YAML sha256, recomputed from the spec file as it is now.

        ``index`` is the job's position in the route (the journal's wave index: each
        batch of a wide parallel group is a job of its own).
        """
        try:
            spec = loading.load_validated(spec_path, self.catalog, self.options.variables).spec
            jobs = self.render(spec, decided).jobs
        except SpecError as err:
            return recovery.Recomputed(None, f"the spec on disk no longer validates: {err.message}")
        except PlanError as err:
            return recovery.Recomputed(None, f"the spec {spec_path} no longer plans: {err.message}")
        except NpaError as err:  # RenderError, PreflightError, KubeError
            return recovery.Recomputed(
                None, f"wave {index:02d} could not be re-rendered from {spec_path}: {err.message}"
            )
        job = jobs[index] if 0 <= index < len(jobs) else None
        if job is None:
            return recovery.Recomputed(
                None, f"wave {index:02d} is no longer in the plan of {spec_path}"
            )
        # the digest ``attempts`` records as the attempt's ``yaml_sha256``
        return recovery.Recomputed(hashlib.sha256(job.text.encode()).hexdigest())

    def reidentifier(self, spec_path: Path) -> Reidentify:
        """``LiveRequest.reidentify``: ``identify`` bound to the submitted spec's path."""
        return lambda decided, index: self.identify(spec_path, decided, index)
