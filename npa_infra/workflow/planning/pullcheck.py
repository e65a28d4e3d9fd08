"""The in-cluster pull probe for ``preflight-images`` and ``submit`` (kubernetes.md §9).

Runs after the registry checks (``imagecheck.run``) on their report. It
decides the inputs ``preflight.pull_probe`` needs; the cluster adapter is
``Services.prober`` (``workflow.target.services``), opened only when a row needs a pod:

- **context:** ``preflight-images`` probes only with an exact ``--infra
  k8s/<ctx>``; ``submit`` passes its ``--infra`` context, else the stack's
  (the context a live submit launches on). Never the kubeconfig's current
  context. A context the first kubeconfig file lacks fails as a
  precondition (``KubeError``, exit 1), listing the contexts it has.
- **SkyPilot config:** the isolated config a live submit writes before it
  launches (``IsolatedDir.generated_config`` with ``target.stackbinding.controller_settings``),
  or, for ``preflight-images``, the isolated config file already generated for
  the stack (empty when there is none: SkyPilot's defaults).
- **ServiceAccount:** ``skypilot.verify.effective_service_account`` on that config.
- **cache:** ``$NPA_HOME/cache/image-pull-probe.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.catalog.model import Catalog
from npa_infra.errors import UsageError
from npa_infra.render import images
from npa_infra.spec.model import Spec
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    from npa_infra.workflow.target.stackfile import StackSettings
    from preflight.images import ImagePreflightReport
    from preflight.probe_runner import Tools
    from preflight.pull_probe import ProbeRequest

__all__ = [
    "DEFAULT_TIMEOUT",
    "GPU_OVERRIDE_ENV",
    "PullProbeOptions",
    "context_of",
    "probe",
    "submit_options",
]

DEFAULT_TIMEOUT = 1800.0  # cli.md §1.3: --image-bootstrap-timeout-seconds
GPU_OVERRIDE_ENV = "NPA_WORKFLOW_GPU_ACCELERATOR"


@dataclass(frozen=True, slots=True)
class PullProbeOptions:
    """What the probe needs to know beyond the report; ``context`` None: nothing is probed."""

    context: str | None = None
    infra: str | None = None  # what decides steps whose profile omits `cloud`
    deadline_seconds: float = DEFAULT_TIMEOUT  # 0 = no deadline
    plan_only: bool = False
    stack: str | None = None
    isolated_config_dir: str | None = None
    sky_config: Mapping[str, Any] | None = None  # None: read the stack's isolated config file


def context_of(infra: str | None) -> str | None:
    """The exact context of ``--infra k8s/<ctx>``.

    Raises:
        UsageError: ``--infra`` is given but is not ``k8s/<context>``.
    """
    if infra is None:
        return None
    if not infra.startswith("k8s/") or not infra.removeprefix("k8s/"):
        raise UsageError(
            f"--infra {infra!r} is not k8s/<context>",
            remedy="pass the exact kubeconfig context, e.g. --infra k8s/my-cluster",
        )
    return infra.removeprefix("k8s/")


def submit_options(
    infra: str | None,
    stack: StackSettings | None,
    *,
    plan_only: bool,
    deadline_seconds: float,
) -> PullProbeOptions:
    """The probe inputs of a submit: ``--infra``'s context, else the stack's, and the
    SkyPilot config the live submit will launch with (the stack's own once it is up)."""
    from npa_infra.workflow.target import stackbinding

    context = infra.removeprefix("k8s/") if infra and infra.startswith("k8s/") else None
    if not infra and stack is not None and stack.context:
        context = stack.context  # a live submit launches with --infra k8s/<stack context>
    effective = infra or (f"k8s/{context}" if context else None)
    sky_config: Mapping[str, Any] = {}
    if context and not plan_only:
        sky_config = stackbinding.sky_config(stack, context)
    return PullProbeOptions(
        context=context or None,
        infra=effective,
        deadline_seconds=deadline_seconds,
        plan_only=plan_only,
        stack=stack.name if stack is not None else None,
        sky_config=sky_config,
    )


def _sky_config(options: PullProbeOptions, env: Mapping[str, str]) -> Mapping[str, Any]:
    if options.sky_config is not None:
        return options.sky_config
    from npa_infra.skypilot import verify

    return verify.isolated_config(env, options.stack, options.isolated_config_dir)[0]


def _request(options: PullProbeOptions, env: Mapping[str, str], run_id: str) -> ProbeRequest:
    from npa_infra.registry import contract
    from npa_infra.skypilot import verify
    from preflight import pull_probe

    sky_config = _sky_config(options, env)
    account, _ = verify.effective_service_account(sky_config, options.context or "")
    return pull_probe.ProbeRequest(
        run_id=run_id,
        contract=contract.CONTRACT,
        context=options.context,
        infra=options.infra,
        deadline_seconds=options.deadline_seconds,
        plan_only=options.plan_only,
        sky_config=sky_config,
        base_account=account,
        gpu_override=env.get(GPU_OVERRIDE_ENV, ""),
    )


def probe(
    report: ImagePreflightReport,
    spec: Spec,
    catalog: Catalog,
    *,
    run_id: str,
    selection: images.ImageSelection,
    options: PullProbeOptions,
    env: Mapping[str, str],
    variables: Mapping[str, str] | None = None,
    services: Services | None = None,
    tools: Tools | None = None,
) -> ImagePreflightReport:
    """``report`` with every registry-``ok`` Kubernetes image proven in-cluster, or marked unproven.

    ``services.prober`` opens the cluster adapter; ``tools`` the nonces and clock.

    Raises:
        UsageError: a negative deadline.
        KubeError: no kubeconfig, or the context is not in it.
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
        PlanError: a profile token does not resolve (validation reports it first).
        KeyboardInterrupt: after every created probe pod was cleaned up.
    """
    from preflight import pull_probe, targets
    from preflight.probe_cache import CACHE_FILE, ProbeCache
    from preflight.probe_ledger import ProbeLedger

    if options.deadline_seconds < 0:
        raise UsageError(
            f"--image-bootstrap-timeout-seconds must be 0 or more, got {options.deadline_seconds}",
            remedy="pass 0 for no deadline, or a number of seconds",
        )
    steps = targets.step_images(
        spec, catalog, run_id=run_id, selection=selection, variables=variables
    )
    home = npa_config.npa_home(env)
    cache = ProbeCache(home / "cache" / CACHE_FILE)
    return pull_probe.probe_report(
        report,
        steps,
        _request(options, env, run_id),
        open_prober=lambda context: (services or Services()).prober(context, env),
        cache=cache,
        tools=tools,
        # every probe pod is recorded before it is created (preflight.probe_ledger)
        ledger=lambda context: ProbeLedger(home, context),
    )
