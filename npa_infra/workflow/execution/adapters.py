"""The adapters of a live run: SkyPilot on its isolated state directory, the exact
Kubernetes context, and the clock.

``open_adapters`` is the one way a live action (submit, resume, cancel, status
reading the queue) gets its SkyPilot: it resolves and prepares the state
directory, binds it to the stack's outputs (``target.stackbinding``) and runs the
drift gate (``skypilot.livegate``) first, so no live action reaches a drifted
SkyPilot.

``Services`` is the one injection point of the SDK (issue 15): the CLI builds it
once, tests and embedding callers pass their doubles in it, and each field left
``None`` is the real adapter, opened where it is first needed (the real default
of each is named beside its field). ``LiveServices`` is its older name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.workflow.execution.launcher import Clock
from npa_infra.workflow.target import stackbinding

if TYPE_CHECKING:
    from npa_infra.kube.base import KubeCluster
    from npa_infra.registry.base import Registry
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.drift import Advisory
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.stack.api import EngineFactory
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.planning.accelerators import ClusterFactory
    from npa_infra.workflow.planning.pullcheck import ProberFactory
    from npa_infra.workflow.target.stackfile import StackSettings

__all__ = ["LiveServices", "Services", "open_adapters", "recorded_state_dir"]


@dataclass(frozen=True, slots=True)
class Services:
    """The adapters of the SDK's commands; each ``None`` means the real one."""

    # SkyPilot on the isolated state directory (default: ``SkyCli`` behind the drift gate)
    sky: Callable[[IsolatedDir, Mapping[str, str]], SkyPilot] | None = None
    # the live run's exact context, by kubeconfig path (default: ``kube.client.KubeApi``)
    cluster: Callable[[Path, str], KubeCluster] | None = None
    # GPU catalog of ``--infra k8s/<ctx>``, by context (default: ``accelerators.open_cluster``)
    gpu_cluster: ClusterFactory | None = None
    # the in-cluster pull probe, by context (default: ``pullcheck.open_prober``)
    prober: ProberFactory | None = None
    # image preflight's registry; an injected one is not closed (default: ``imagecheck.open_client``)
    registry: Callable[[], Registry] | None = None
    store: Callable[[], ObjectStore] | None = None  # decision artifacts (default: boto3)
    stack_engine: EngineFactory | None = None  # the stack's outputs (default: the Pulumi engine)
    clock: Clock | None = None  # default: ``time.time``, ``time.sleep``, ``random.random``
    readiness: Callable[..., Any] | None = None  # default: ``launcher``'s readiness probe
    progress: Callable[[str], None] | None = None  # one line per change, for people (stderr)
    isolated_dir: Path | None = None  # default: resolved from the stack and configuration


LiveServices = Services  # the name before it covered planning's adapters too


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
    from npa_infra.skypilot import isolation, livegate
    from npa_infra.skypilot import resolve as sky_resolve

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
    if given.sky is not None:  # an injected adapter: no binary to read, its ports its own
        verdict = livegate.enforce(None, env, sky_env=None)
        sky = given.sky(isolated, env)
    else:
        from npa_infra.skypilot.skycli import SkyCli

        binary = sky_resolve.resolve_binary(sky_bin, env, config)
        verdict = livegate.enforce(binary.path, env, sky_env=isolated.environment(env))
        sky = SkyCli(binary.path, isolated, env, check_ports=False)  # the gate checked them
    for advisory in verdict.advisories:
        if on_warning is not None:
            on_warning(advisory)
        if given.progress is not None:
            given.progress(advisory.text())
    if given.cluster is not None:
        cluster = given.cluster(kube_config.path, context)
    else:
        from npa_infra.kube.client import KubeApi

        cluster = KubeApi(kube_config.path, context)
    clock = given.clock or Clock.real()
    return sky, cluster, clock, isolated
