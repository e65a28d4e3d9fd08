"""Rendering a runtime run's waves, and re-identifying a wave from the spec on disk.

``Router.render`` is the one path from a spec and the decisions read so far to
the rendered waves: the planner, the GPU remap for ``--infra`` and the renderer,
with the render settings fixed at submit. ``submit``'s ``replan`` routes the run
with it, so every attempt's task YAML (and its recorded ``yaml_sha256``) comes
from it.

``Routes`` is the run's memo of ``Router.render`` over its submitted spec (issue
19): a routing is a value of the decisions it consulted, so the supervision of
every wave, its outputs and its schemas reuse it, and only a decision that
changes the route plans and renders again, once. The GPU catalog is read once
per run (``accelerators.Catalogs``, shared with the submit's own remap).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import NpaError, SpecError
from npa_infra.plan import decisions
from npa_infra.plan.model import Plan, PlanError
from npa_infra.render import documents
from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.planning import accelerators, loading
from npa_infra.workflow.submission.planners import Planning
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    from npa_infra.catalog.model import Catalog
    from npa_infra.spec.model import Spec
    from npa_infra.workflow.submission.submitflags import SubmitOptions

__all__ = ["Reidentify", "Rendered", "Router", "Routes"]

Reidentify = Callable[[Mapping[str, str], int], recovery.Recomputed]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One routing of the spec: the plan prefix, its GPU-remapped plan, and its waves."""

    routed: Plan
    remapped: Plan
    jobs: list[documents.RenderedJob]

    def outputs(self) -> dict[int, tuple[str, ...]]:
        """The declared outputs per job of the route, by position (the journal's wave index)."""
        return {index: job.outputs for index, job in enumerate(self.jobs)}

    def schemas(self) -> dict[str, str]:
        """Declared output URI -> its schema label, recorded with each probe."""
        return {
            str(out["uri"]): str(out["schema"])
            for step in self.remapped.steps
            for out in step.outputs
            if out.get("uri") and out.get("schema")
        }

    def fits(self, decided: Mapping[str, str]) -> bool:
        """Whether ``decided`` routes the spec exactly as this routing (pure).

        The walk is deterministic and consults only the decisions it used and the
        one it stopped at (dsl.md §5.4), so the route is the same exactly when
        ``decided`` gives each used decision the same value and still lacks the
        pending one.
        """
        plan = self.routed
        if plan.pending is not None and plan.pending.key in decided:
            return False
        return all(
            key in decided and decisions.normalize(decided[key]) == value
            for key, value in plan.decisions_used
        )


@dataclass(frozen=True, slots=True)
class Router:
    """The inputs of a runtime run that are fixed at submit, and the spec-dependent rest."""

    catalog: Catalog
    run_id: str
    options: SubmitOptions
    settings: RenderSettings
    env: Mapping[str, str]
    services: Services | None = None
    planning: Planning = field(default_factory=Planning)
    # the node listing of ``--infra k8s/<ctx>``, read once for the run (issue 19)
    catalogs: accelerators.Catalogs | None = None

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
        routed = self.planning.build(
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
            catalogs=self.catalogs,
        ).plan
        settings = dataclasses.replace(self.settings, workflow=spec.name, config=routed.config)
        jobs = self.planning.render(
            remapped, settings, runtime=True, max_concurrency_cap=options.max_concurrency
        )
        return Rendered(routed, remapped, jobs)

    def identify(
        self, spec_path: Path, decided: Mapping[str, str], index: int
    ) -> recovery.Recomputed:
        """Job ``index``'s task-YAML sha256, recomputed from the spec file as it is now.

        ``index`` is the job's position in the route (the journal's wave index: each
        batch of a wide parallel group is a job of its own). It always plans and
        renders afresh (never ``Routes``' memo of the spec in memory); only the GPU
        catalog is the run's.
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


@dataclass(slots=True)
class Routes:
    """The routings of a run's submitted spec, each planned and rendered once.

    ``routes(decided)`` is ``router.render(spec, decided)``, memoised: a routing is
    reused for every decision set it ``fits`` (the same consulted decisions), so
    an unchanged decision set returns the same ``Rendered`` and a decision that
    changes the route plans and renders exactly once.
    """

    router: Router
    spec: Spec
    _seen: list[Rendered] = field(default_factory=list)

    def __call__(self, decided: Mapping[str, str]) -> Rendered:
        """The routing of ``decided``.

        Raises:
            PlanError, PreflightError, KubeError, RenderError: as ``Router.render``
                (nothing is kept, so the next call tries again).
        """
        for seen in self._seen:
            if seen.fits(decided):
                return seen
        fresh = self.router.render(self.spec, decided)
        self._seen.append(fresh)
        return fresh
