"""The adapters every SDK command reaches the world through, each with its real default.

``Services`` is the one injection point of the SDK (issue 15): the CLI builds it
once (``cli.services.build``), tests and embedding callers replace a field with
their double, and a field left alone is the real adapter, defined in this module
and nowhere else. It sits in ``workflow.target`` (below planning and execution) so
that every layer that opens an adapter can take it; the real adapters themselves
are imported only when a factory is called, so building ``Services()`` costs
nothing and reaches nothing.

Each factory takes what the real adapter needs from the command (the environment,
a context, an endpoint), never a secret value; credentials are resolved inside the
factory from the environment and the npa home.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra.workflow.target import credentials

if TYPE_CHECKING:
    from npa_infra.kube.base import KubeCluster, PodProber
    from npa_infra.registry.base import Registry
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.skypilot.port import PortCheck
    from npa_infra.stack.base import StackEngine
    from npa_infra.stack.runner import RunnerSettings
    from npa_infra.storage.base import ObjectStore

__all__ = [
    "Clock",
    "ClusterFactory",
    "GpuClusterFactory",
    "ProberFactory",
    "RegistryFactory",
    "Services",
    "SkyFactory",
    "StoreFactory",
    "check_api_port",
    "find_tool",
    "open_cluster",
    "open_engine",
    "open_gpu_cluster",
    "open_prober",
    "open_registry",
    "open_sky",
    "open_store",
    "silent",
]


@dataclass(frozen=True, slots=True)
class Clock:
    """Time, sleep and jitter, injected so tests move time instead of waiting."""

    now: Callable[[], float]
    sleep: Callable[[float], None]
    jitter: Callable[[], float]

    @classmethod
    def real(cls) -> Clock:
        """Wall time, real sleeps and uniform jitter: every command's default."""
        import random
        import time

        return cls(time.time, time.sleep, random.random)


# (isolated state directory, environment, ``--sky-bin`` or None) -> SkyPilot
SkyFactory = Callable[["IsolatedDir", Mapping[str, str], "str | None"], "SkyPilot"]
# (kubeconfig file, exact context) -> the live run's cluster
ClusterFactory = Callable[[Path, str], "KubeCluster"]
# (exact context, environment) -> the cluster whose GPU catalog ``--infra k8s/<ctx>`` reads
GpuClusterFactory = Callable[[str, Mapping[str, str]], "KubeCluster"]
# (exact context, environment) -> the in-cluster pull probe
ProberFactory = Callable[[str, Mapping[str, str]], "PodProber"]
# (environment, stack or None, ``--insecure-registry`` hosts) -> the registry client
RegistryFactory = Callable[[Mapping[str, str], "str | None", Sequence[str]], "Registry"]
# (S3 endpoint or None for boto3's own resolution) -> the object store
StoreFactory = Callable[["str | None"], "ObjectStore"]
EngineFactory = Callable[["RunnerSettings"], "StackEngine"]
# (local API server port, the environment its listener must have to be ours) -> who listens
ApiPortChecker = Callable[[int, Mapping[str, str]], "PortCheck"]


def open_engine(settings: RunnerSettings) -> StackEngine:
    """The Pulumi engine (Automation API) of one stack: ``stack.api.open_engine``."""
    from npa_infra.stack import api

    return api.open_engine(settings)


def open_sky(
    isolated: IsolatedDir,
    env: Mapping[str, str],
    sky_bin: str | None,
    *,
    progress: Callable[[str], None] | None = None,
) -> SkyPilot:
    """``sky`` of ``--sky-bin``, the configuration or the pinned venv, on ``isolated``.

    Nothing runs here; the caller puts the drift gate (``skypilot.livegate``) on
    the adapter's ``binary`` before its first call. With ``progress`` (``with_progress``),
    a call that keeps npa waiting says what it waits for and its deadline.

    Raises:
        ConfigError: no binary is configured at any of those places.
    """
    from npa_infra.skypilot import resolve
    from npa_infra.skypilot.skycli import SkyCli

    binary = resolve.resolve_binary(sky_bin, env, npa_config.load_config(env))
    # the gate checks the ports
    return SkyCli(binary.path, isolated, env, check_ports=False, progress=progress)


def open_cluster(kubeconfig: Path, context: str) -> KubeCluster:
    """The official Kubernetes client on exactly ``context`` of ``kubeconfig``."""
    from npa_infra.kube.client import KubeApi

    return KubeApi(kubeconfig, context)


def open_gpu_cluster(context: str, env: Mapping[str, str]) -> KubeCluster:
    """``context`` of the first kubeconfig file, exactly (no fallback to the current one).

    Raises:
        KubeError: no kubeconfig, or no such context (the message lists the ones that exist).
    """
    from npa_infra.kube import kubeconfig

    config, _ = kubeconfig.resolve(context, env)
    return open_cluster(config.path, context)


def open_prober(context: str, env: Mapping[str, str]) -> PodProber:
    """The pull probe on ``context`` of the first kubeconfig file (no cluster call yet).

    Raises:
        KubeError: no kubeconfig, or no such context (the message lists the ones that exist).
    """
    from npa_infra.kube import kubeconfig, probe

    config, _ = kubeconfig.resolve(context, env)
    return probe.ProbeApi(config.path, context)


def open_registry(
    env: Mapping[str, str], stack: str | None, insecure_hosts: Sequence[str]
) -> Registry:
    """The registry client with this environment's (or the stack's) credentials; no I/O yet.

    Raises:
        ConfigError: the configuration or the stack's credentials file is unreadable.
    """
    from npa_infra.registry import client
    from npa_infra.registry import credentials as registry_credentials

    values = credentials.resolve_values(
        registry_credentials.ENV_NAMES, env, npa_home=npa_config.npa_home(env), stack=stack
    )
    return client.RegistryClient(
        credentials=registry_credentials.from_environment(values),
        trusted_realms=_trusted_realms(env),
        insecure_hosts=insecure_hosts,
    )


def _trusted_realms(env: Mapping[str, str]) -> list[str]:
    raw = npa_config.get_value(npa_config.load_config(env), "registry.trusted_token_realms")
    if isinstance(raw, str):
        return [raw]
    return [str(h) for h in raw] if isinstance(raw, list) else []


def open_store(endpoint: str | None) -> ObjectStore:
    """boto3's S3 client, on ``endpoint`` or on boto3's own endpoint resolution."""
    from npa_infra.storage.s3 import BotoStore

    return BotoStore.create(endpoint_url=endpoint or None)


def check_api_port(number: int, expected: Mapping[str, str]) -> PortCheck:
    """Who listens on this host's 127.0.0.1:``number`` (``skypilot.port.check_port``)."""
    from npa_infra.skypilot import port

    return port.check_port(number, expected)


def find_tool(name: str) -> str | None:
    """The executable ``name`` on this process's PATH (``shutil.which``), or None."""
    import shutil

    return shutil.which(name)


def silent(_line: str) -> None:
    """Progress nobody reads (the SDK's default; the CLI prints to stderr)."""


@dataclass(frozen=True, slots=True)
class Services:
    """The adapters of the SDK's commands; every field's default is the real one."""

    sky: SkyFactory = open_sky
    cluster: ClusterFactory = open_cluster
    gpu_cluster: GpuClusterFactory = open_gpu_cluster
    prober: ProberFactory = open_prober
    # the caller of a factory owns what it returns, and closes it
    registry: RegistryFactory = open_registry
    store: StoreFactory = open_store  # decision artifacts and staged source
    stack_engine: EngineFactory = open_engine
    clock: Clock = field(default_factory=Clock.real)
    # the launch driver's readiness gate; None: ``kube.readiness`` on ``cluster``
    readiness: Callable[..., Any] | None = None
    progress: Callable[[str], None] = silent  # one line per change, for people
    isolated_dir: Path | None = None  # None: resolved from the stack and configuration
    which: Callable[[str], str | None] = find_tool  # the operator's own tools (socat, rsync)
    # the drift gate's and `skypilot status`'s look at the local API server ports
    api_ports: ApiPortChecker = check_api_port

    def real_sky(self) -> bool:
        """Whether ``sky`` is the real SkyPilot, whose binary the drift gate reads."""
        return self.sky is open_sky or getattr(self.sky, "func", None) is open_sky

    def with_progress(
        self, progress: Callable[[str], None] | None, *, waits: Callable[[str], None] | None
    ) -> Services:
        """These services with ``progress`` (when given), and a real ``sky`` that says on
        ``waits`` what each call waits for and its deadline (``SkyCli.report_waits``)."""
        import dataclasses
        import functools

        sky = self.sky
        if waits is not None and self.real_sky():
            sky = functools.partial(open_sky, progress=waits)
        return dataclasses.replace(self, progress=progress or self.progress, sky=sky)
