"""The public SDK of the read-only spec commands: validate, plan and preflight images.

Each CLI command is a thin wrapper over one function here with the same
parameters. Results are frozen records with ``to_json()`` in the shapes of
cli.md and an ``exit_code``. Expected failures raise ``NpaError``s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra.catalog.loader import select_catalog
from npa_infra.errors import SpecError
from npa_infra.plan import context, graph, graphtext, planner, textplan, waves
from npa_infra.plan.model import Plan, PlanError, Wave
from npa_infra.spec.issues import SpecIssue, issue_json
from npa_infra.spec.source import json_path
from npa_infra.workflow.planning import identity, loading
from npa_infra.workflow.planning.fingerprint import plan_fingerprint

if TYPE_CHECKING:
    from npa_infra.workflow.target.services import Services
    from preflight.images import ImagePreflightReport

__all__ = [
    "PlanReport",
    "ValidationReport",
    "plan_error",
    "plan_spec",
    "preflight_images",
    "select",
    "validate_spec",
]


@dataclass(frozen=True, slots=True)
class ValidationReport:
    name: str
    api_version: str
    initial: str
    states: list[str]
    warnings: list[SpecIssue]
    bucket_is_placeholder: bool
    exit_code: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "initial": self.initial,
            "name": self.name,
            "states": self.states,
            "status": "valid",
            "warnings": [issue_json(w) for w in self.warnings],  # issue 18: also when valid
        }
        if self.bucket_is_placeholder:
            out["bucket_is_placeholder"] = True
        return out


@dataclass(frozen=True, slots=True)
class PlanReport:
    plan: Plan
    fingerprint: str
    waves: list[Wave] | None
    bucket_is_placeholder: bool
    warnings: list[SpecIssue]
    state_graph: graph.Graph | None = None  # the state machine, when a drawing was asked
    exit_code: int = 0

    def text_lines(self) -> list[str]:
        """The text plan: every step (or wave) with its loop place and command."""
        return textplan.plan_lines(self.plan, self.waves, self.fingerprint)

    def drawing(self, fmt: str) -> str:
        """The state machine as Mermaid or DOT text (``plan_spec(with_graph=True)`` built it)."""
        assert self.state_graph is not None, "plan_spec(with_graph=True) builds the graph"
        return graphtext.render(self.state_graph, fmt)

    def drawing_json(self, fmt: str) -> dict[str, Any]:
        """``--json`` with ``--format mermaid|dot``: the drawing wrapped in one object."""
        return {
            "status": "planned",
            "workflow": self.plan.workflow,
            "format": fmt,
            "graph": self.drawing(fmt),
            "fingerprint": self.fingerprint,
            "warnings": [issue_json(w) for w in self.warnings],  # issue 18: always present
        }

    def to_json(self) -> dict[str, Any]:
        if self.waves is not None:
            out: dict[str, Any] = {
                "workflow": self.plan.workflow,
                "run_id": self.plan.run_id,
                "assume_decision": self.plan.assume_decision,
                "wave_count": len(self.waves),
                "parallel_waves": sum(1 for w in self.waves if w.kind == "parallel"),
                "waves": [w.to_json() for w in self.waves],
                "fingerprint": self.fingerprint,
            }
        else:
            out = {
                **self.plan.to_json(),
                "run_id": self.plan.run_id,
                "fingerprint": self.fingerprint,
            }
        out["status"] = "planned"  # issue 17: every --json object has a status
        out["warnings"] = [issue_json(w) for w in self.warnings]  # issue 18: always present
        if self.bucket_is_placeholder:
            out["bucket_is_placeholder"] = True
        return out


def select(catalog_path: Path | None, env: Mapping[str, str]) -> Any:
    return select_catalog(catalog_path, env)


def plan_error(v: loading.ValidatedSpec, err: PlanError) -> SpecError:
    pos = v.spec.source_map.locate(err.path)
    return SpecError(
        [SpecIssue(json_path(err.path), err.message, err.hint, pos.line, pos.column, err.state)],
        source=v.label,
    )


def validate_spec(
    spec_path: Path,
    *,
    variables: Mapping[str, str] | None = None,
    catalog_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    strict: bool = False,
) -> ValidationReport:
    """Validate a spec completely; raise ``SpecError`` listing every located issue.

    ``strict`` makes a ``--var`` key the spec never reads an error, not a warning.
    """
    environ = os.environ if env is None else env
    v = loading.load_validated(
        spec_path, select(catalog_path, environ), variables or {}, strict=strict
    )
    return ValidationReport(
        name=v.spec.name,
        api_version=v.spec.api_version,
        initial=v.spec.initial,
        states=sorted(v.spec.states),
        warnings=v.warnings,
        bucket_is_placeholder=context.bucket_is_placeholder(v.spec.config),
    )


def plan_spec(
    spec_path: Path,
    *,
    run_id: str | None = None,
    assume_decision: str = "",
    variables: Mapping[str, str] | None = None,
    with_waves: bool = False,
    max_concurrency: int = 0,
    catalog_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    with_graph: bool = False,
    strict: bool = False,
) -> PlanReport:
    """Validate and plan; ``with_waves`` groups the steps into waves.

    ``with_graph`` also builds the state machine's graph (with the waves when
    ``with_waves``) for ``PlanReport.drawing``. ``strict`` makes a ``--var`` key
    the spec never reads an error.
    """
    environ = os.environ if env is None else env
    catalog = select(catalog_path, environ)
    v = loading.load_validated(spec_path, catalog, variables or {}, strict=strict)
    rid = identity.check_run_id(run_id) if run_id else f"{v.spec.name}-plan"
    try:
        plan = planner.build_plan(v.spec, catalog, run_id=rid, assume_decision=assume_decision)
    except PlanError as err:
        raise plan_error(v, err) from None
    grouped = waves.compute(plan, max_concurrency_cap=max_concurrency) if with_waves else None
    return PlanReport(
        plan=plan,
        fingerprint=plan_fingerprint(plan),
        waves=grouped,
        bucket_is_placeholder=context.bucket_is_placeholder(plan.config),
        warnings=v.warnings,
        state_graph=graph.build(v.spec, config=plan.config, waves=grouped) if with_graph else None,
    )


def preflight_images(
    spec_path: Path,
    *,
    variables: Mapping[str, str] | None = None,
    assume_decision: str = "",
    image: str | None = None,
    image_overrides: Sequence[tuple[str, str]] = (),
    registry: str | None = None,
    insecure_registries: Sequence[str] = (),
    stack: str | None = None,
    project_root: Path | None = None,
    catalog_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    infra: str | None = None,
    image_bootstrap_timeout_seconds: float = 1800.0,
    services: Services | None = None,
    project: str | None = None,
) -> ImagePreflightReport:
    """Check every control-flow-reachable image of a spec against its registry (cli.md §1.3).

    Every decision outcome counts, so ``assume_decision`` (kept for parity
    with ``plan-spec``) never narrows the set. Each distinct image is checked
    once, concurrently, on the client ``services.registry`` opens. With ``infra`` = ``k8s/<context>``, each registry-``ok`` image of a
    Kubernetes step is then pulled in-cluster by a probe pod (kubernetes.md
    §9), watched for at most ``image_bootstrap_timeout_seconds`` (0 = no
    deadline), through ``services.prober``.
    Without ``infra`` those rows are ``target_pull_unverified``. ``project`` (an alias)
    adds its registry credentials after the environment's, and its release namespace to
    ``catalog_registry``'s order.

    Raises:
        SpecError: the spec is invalid.
        UsageError: ``infra`` is not ``k8s/<context>``, or the timeout is negative.
        ConfigError: the stack file, the configuration or the credentials file is unreadable.
        KubeError: no kubeconfig, or the context is not in it.
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
    """
    from npa_infra import config as npa_config
    from npa_infra.registry import credentials as registry_credentials
    from npa_infra.render import images
    from npa_infra.workflow.planning import imagecheck, pullcheck
    from npa_infra.workflow.target import credentials, stackfile
    from npa_infra.workflow.target import services as services_module

    del assume_decision  # preview-only: the union over all outcomes is always checked
    context_name = pullcheck.context_of(infra)
    environ = os.environ if env is None else env
    catalog = select(catalog_path, environ)
    v = loading.load_validated(spec_path, catalog, variables or {})
    root = project_root or Path.cwd()
    settings = stackfile.read_stack(stack, root) if stack else None
    given = services or services_module.Services()
    chosen = credentials.for_project(project, environ, root=root, engine_factory=given.stack_engine)
    release = chosen.release_namespace if chosen else None
    selection = images.ImageSelection(
        tuple(image_overrides),
        image,
        imagecheck.catalog_registry(registry, settings, environ, release),
    )
    names = registry_credentials.ENV_NAMES
    home = npa_config.npa_home(environ)
    with_project = credentials.overlay(environ, names, npa_home=home, project=chosen)
    checker = given.registry(with_project, stack, insecure_registries)
    run_id = f"{v.spec.name}-plan"
    try:
        report = imagecheck.run(
            v.spec,
            catalog,
            run_id=run_id,
            selection=selection,
            client=checker,
            env=environ,
        )
    except PlanError as err:
        raise plan_error(v, err) from None
    finally:
        checker.close()
    options = pullcheck.PullProbeOptions(
        context=context_name,
        infra=infra,
        deadline_seconds=image_bootstrap_timeout_seconds,
        stack=stack,
    )
    try:
        return pullcheck.probe(
            report,
            v.spec,
            catalog,
            run_id=run_id,
            selection=selection,
            options=options,
            env=environ,
            services=given,
        )
    except PlanError as err:
        raise plan_error(v, err) from None
