"""The adapters of a live run: SkyPilot on its isolated state directory, the exact
Kubernetes context, and the clock.

``open_adapters`` is the one way a live action (submit, resume, cancel, status
reading the queue) gets its SkyPilot: it resolves and prepares the state
directory, binds it to the stack's outputs (``target.stackbinding``) and runs the
drift gate (``skypilot.livegate``) first, so no live action reaches a drifted
SkyPilot.

The adapters come from ``Services`` (``workflow.target.services``), the SDK's one
injection point; each field's default is the real adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.workflow.target import stackbinding
from npa_infra.workflow.target.services import Clock, Services, silent

if TYPE_CHECKING:
    from npa_infra.kube.base import KubeCluster
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.drift import Advisory
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.workflow.target.stackfile import StackSettings

__all__ = ["gated_sky", "open_adapters", "recorded_state_dir"]


def recorded_state_dir(data: Mapping[str, Any] | None) -> str | None:
    """The SkyPilot state directory a run was launched from (its journal's run data)."""
    value = (data or {}).get("isolated_config_dir")
    return str(value) if value else None


def open_adapters(
    env: Mapping[str, str],
    given: Services | None,
    *,
    context: str,
    stack_name: str | None,
    stack: StackSettings | None = None,
    sky_bin: str | None = None,
    isolated_config_dir: str | None = None,
    on_warning: Callable[[Advisory], None] | None = None,
) -> tuple[SkyPilot, KubeCluster, Clock, IsolatedDir]:
    """SkyPilot for the stack's isolated directory, the exact context, and the clock.

    A directory a stack's controller resource claimed is adopted as it is, and a
    submit from the stack's outputs must find exactly the directory, config and
    controller they name (``stackbinding.verify_adopted``). The SkyPilot drift
    gate (``skypilot.livegate``) runs before the adapter is returned: a refusal
    raises, each warning goes to ``on_warning`` and to ``given.progress``.

    Raises:
        SkyPilotDriftError: the binary's venv misses its pins, or another state
            directory's API server holds the port.
    """
    from npa_infra.kube import kubeconfig
    from npa_infra.skypilot import isolation

    given = given or Services()
    config = npa_config.load_config(env)
    if given.isolated_dir is not None:
        isolated = isolation.IsolatedDir(given.isolated_dir)
    else:
        isolated = isolation.resolve_isolated_dir(isolated_config_dir, env, config, stack_name)
    kube_config, _ = kubeconfig.resolve(context, env)  # an unknown context fails here, exit 1
    isolated.prepare(
        env, context=context, controller=stackbinding.controller_settings(stack), stack=stack_name
    )
    stackbinding.verify_adopted(stack, isolated, env)
    sky = gated_sky(given, isolated, env, sky_bin, on_warning)
    return sky, given.cluster(kube_config.path, context), given.clock, isolated


def gated_sky(
    given: Services,
    isolated: IsolatedDir,
    env: Mapping[str, str],
    sky_bin: str | None,
    on_warning: Callable[[Advisory], None] | None = None,
) -> SkyPilot:
    """``given.sky`` on ``isolated``, behind the drift gate (``skypilot.livegate``) and the
    seam that cleans its text (``skypilot.redaction``: ANSI removed, secret values masked).

    The adapter is only constructed before the gate; nothing runs. Each warning
    goes to ``on_warning`` and to ``given.progress``.

    Raises:
        SkyPilotDriftError: the binary's venv misses its pins, or another state
            directory's API server holds the port.
    """
    from npa_infra.skypilot import livegate, redaction

    sky = given.sky(isolated, env, sky_bin)
    # the real binary is read against its pins; a double's is not, its ports its own
    binary = getattr(sky, "binary", None) if given.real_sky() else None
    verdict = livegate.enforce(
        binary,
        env,
        sky_env=isolated.environment(env) if binary is not None else None,
        probes=livegate.Probes(port_check=given.api_ports),
    )
    for advisory in verdict.advisories:
        if on_warning is not None:
            on_warning(advisory)
        given.progress(advisory.text())
    report_waits = getattr(sky, "report_waits", None)  # the real SkyCli's: deadlines shown
    if report_waits is not None and given.progress is not silent:
        report_waits(given.progress)
    return redaction.redacting(sky)  # SkyPilot's text enters npa clean (skypilot.redaction)
