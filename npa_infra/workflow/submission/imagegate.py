"""``submit``'s image gate (cli.md §1.4): registry checks, digest pins, then the pull probe.

1. The registry manifest check of every control-flow-reachable image
   (``imagecheck.run``), unless ``--no-preflight-images``. A live submit
   refuses here when any row is not ``ok``: no probe pod is spent on an
   image the registry already refused.
2. The pins the renderer emits (``<registry>/<repo>@sha256:…``) come from
   that registry report, so ``--plan-only`` renders digests even though its
   Kubernetes rows end ``target_pull_unverified``.
3. The in-cluster pull probe (``pullcheck``, kubernetes.md §9) on the exact
   context the submit launches on. A live submit refuses unless every row is
   still ``ok``, so an image the cluster cannot pull costs no job launch; a
   probe whose cleanup failed is never ``ok`` and blocks the submit too.
   ``--plan-only`` creates no pod and never refuses on unproven rows. A live
   submit without an exact context probes nothing: ``supervision.runner.execute`` refuses
   it (a usage error, exit 64) before anything is launched, with the remedy to pass one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from npa_infra.errors import PreflightError
from npa_infra.plan.model import PlanError
from npa_infra.render import images
from npa_infra.workflow.planning import api, imagecheck, loading

if TYPE_CHECKING:
    from npa_infra.workflow.submission.submitflags import SubmitOptions
    from npa_infra.workflow.target.services import Services
    from npa_infra.workflow.target.stackfile import StackSettings
    from preflight.images import ImagePreflightReport

__all__ = ["check", "refusal"]


def _registry_report(
    v: loading.ValidatedSpec,
    catalog: Any,
    run_id: str,
    selection: images.ImageSelection,
    options: SubmitOptions,
    env: Mapping[str, str],
    services: Services,
) -> ImagePreflightReport:
    from npa_infra import config as npa_config
    from npa_infra.registry import credentials as registry_credentials
    from npa_infra.workflow.target import credentials

    project = credentials.for_project(
        options.project, env, root=options.project_root, engine_factory=services.stack_engine
    )
    with_project = credentials.overlay(
        env, registry_credentials.ENV_NAMES, npa_home=npa_config.npa_home(env), project=project
    )
    registry = services.registry(with_project, options.stack, options.insecure_registries)
    try:
        return imagecheck.run(
            v.spec, catalog, run_id=run_id, selection=selection, client=registry, env=env
        )
    except PlanError as err:
        raise api.plan_error(v, err) from None
    finally:
        registry.close()


def refusal(report: ImagePreflightReport, run_id: str) -> PreflightError:
    """cli.md §1.4: a live submit launches only when every image is ``ok``."""
    failed = report.failures()
    first = failed[0]
    listed = ", ".join(f"{row.image} {row.status}" for row in failed[:3])
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    return PreflightError(
        f"image preflight refused the submit: {len(failed)} of {len(report.rows)} image(s) "
        f"not usable ({listed}{more}); nothing was launched",
        remedy=f"{first.remedy or 'fix the image'}; or submit with --no-preflight-images to "
        "skip the registry check",
        details={"run_id": run_id, "preflight": report.summary_json()},
    )


def check(
    v: loading.ValidatedSpec,
    catalog: Any,
    run_id: str,
    selection: images.ImageSelection,
    options: SubmitOptions,
    env: Mapping[str, str],
    *,
    stack: StackSettings | None,
    services: Services,
) -> tuple[ImagePreflightReport | None, dict[str, str]]:
    """The report (None with ``--no-preflight-images``) and the digest pins to render.

    Raises:
        PreflightError: a live submit with any image not ``ok``.
        UsageError: a negative probe timeout.
        KubeError: no kubeconfig, or the context is not in it.
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
    """
    if not options.preflight_images:
        return None, {}
    from npa_infra.workflow.planning import pullcheck  # only with a preflight (issue 19)

    report = _registry_report(v, catalog, run_id, selection, options, env, services)
    if not options.plan_only and report.exit_code != 0:
        raise refusal(report, run_id)
    pins = report.pins()
    probe = pullcheck.submit_options(
        options.infra,
        stack,
        plan_only=options.plan_only,
        deadline_seconds=options.image_bootstrap_timeout_seconds,
    )
    if not options.plan_only and probe.context is None:
        return report, pins  # the launch refuses first: a live submit needs an exact context
    try:
        report = pullcheck.probe(
            report,
            v.spec,
            catalog,
            run_id=run_id,
            selection=selection,
            options=probe,
            env=env,
            services=services,
        )
    except PlanError as err:
        raise api.plan_error(v, err) from None
    if not options.plan_only and report.exit_code != 0:
        raise refusal(report, run_id)
    return report, pins
