"""``npa skypilot verify``: can pinned SkyPilot launch on this exact context? (cli.md §2.3)

Checks, in order, each a ``{name, ok, detail, remedy}`` record:

1. ``kubeconfig_context``: the context exists in the kubeconfig file SkyPilot
   will read (the first ``KUBECONFIG`` file, or ``--kubeconfig``);
2. ``readiness``: the ``/readyz`` gate passes (3 successes over ≥ 10 s,
   kubernetes.md §1.2), on the real clock unless one is injected;
3. ``namespace``: the namespace SkyPilot will use (the context's, else
   ``default``, skypilot-0.12.md §9.1) exists;
4. ``service_account``: the ServiceAccount its pods will use exists
   (skypilot-0.12.md §9.2: ``pod_config.spec.serviceAccountName``, else the
   context's ``kubernetes.remote_identity`` from the isolated SkyPilot
   config, else ``skypilot-service-account``); the detail says which one and
   where that name came from. SkyPilot creates its default account itself,
   so only a missing *named* account fails;
5. ``kubernetes_client_pin``: the ``kubernetes`` client in the SkyPilot venv
   is inside the pin (a client ≥ 36 fails every pod_config validation);
6. ``stale_iam_token``: no ``NEBIUS_IAM_TOKEN``/``NPA_NEBIUS_IAM_TOKEN`` in
   the environment, whose static token would override the kubeconfig's
   refreshing exec plugin and expire mid-run. Values are never shown;
7. ``sky_check_kubernetes`` and ``api_server``: SkyPilot's own ``sky check
   kubernetes`` in the isolated state a submit would use, and the API server
   that ran it (``skycheck``); the caller's ``sky_check`` runs it, so this
   module never builds the adapter;
8. ``client_tools``: ``socat``, ``nc`` and ``rsync`` on the operator's PATH
   (``clienttools``, through the injected ``which``).

Checks 2 to 4 talk to the cluster and run only when the one before them
passed; check 7 runs once the context is known. The report's ``status`` is
``ok`` only when every check passed.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, KubeError
from npa_infra.kube import kubeconfig, readiness
from npa_infra.kube.base import KubeCluster
from npa_infra.skypilot import clienttools, drift, isolation, livegate, pins, skycheck, status

__all__ = [
    "DEFAULT_SERVICE_ACCOUNT",
    "STALE_TOKEN_VARS",
    "Check",
    "ClusterFactory",
    "ReadinessSummary",
    "SkyCheck",
    "VerifyReport",
    "effective_service_account",
    "isolated_config",
    "probe_status",
    "verify",
]

DEFAULT_SERVICE_ACCOUNT = "skypilot-service-account"
# skypilot-0.12.md §9.2: these remote_identity values all mean SkyPilot's own account.
_DEFAULT_IDENTITIES = ("SERVICE_ACCOUNT", "LOCAL_CREDENTIALS", "NO_UPLOAD")
STALE_TOKEN_VARS = drift.STALE_TOKEN_VARS
_DEFAULT_SOURCE = "SkyPilot's default (remote_identity SERVICE_ACCOUNT)"
# All of these passing means SkyPilot can use the context (``kubernetes_enabled``).
_CLUSTER_CHECKS = frozenset({"kubeconfig_context", "readiness", "namespace", "service_account"})

ClusterFactory = Callable[[Path, str], KubeCluster]
StatusProbe = Callable[[Mapping[str, str]], status.StatusReport]
SkyCheck = skycheck.SkyCheck


class Check(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    ok: bool
    detail: str
    remedy: str = ""


class ReadinessSummary(BaseModel):
    """``readiness{state, samples}`` (cli.md §2.3); samples as the readiness evidence keeps them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: str  # a readiness.Verdict value, or "not_run"
    reason: str
    elapsed_s: float
    samples: list[dict[str, Any]]


class VerifyReport(BaseModel):
    """``npa skypilot verify --json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok", "failed"]
    kubernetes_required: bool
    kubernetes_enabled: bool
    context: str
    kubeconfig: str | None
    namespace: str | None
    service_account: str | None
    readiness: ReadinessSummary
    checks: list[Check]
    sky_version: str | None
    sky_check: skycheck.SkyCheckSummary
    api_server: skycheck.ApiServerUsed
    client_tools: clienttools.ClientToolsReport

    @property
    def exit_code(self) -> int:
        """0 when every check passed, 1 otherwise (cli.md §2.3)."""
        return 0 if self.status == "ok" else 1


def _identity(value: Any, context: str) -> str | None:
    """A ``remote_identity`` value (string, or list of ``{context glob: identity}``) for ``context``."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list):
        for entry in value:
            if isinstance(entry, dict):
                for pattern, identity in entry.items():
                    if fnmatch.fnmatchcase(context, str(pattern)) and isinstance(identity, str):
                        return identity
    return None


def _pod_service_account(layer: Any) -> str | None:
    pod = layer.get("pod_config") if isinstance(layer, dict) else None
    spec = pod.get("spec") if isinstance(pod, dict) else None
    name = spec.get("serviceAccountName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else None


def effective_service_account(config: Mapping[str, Any], context: str) -> tuple[str, str]:
    """The ServiceAccount SkyPilot's pods use on ``context`` and where the name came from.

    skypilot-0.12.md §9.2, §9.3: the context's ``remote_identity`` (a context
    entry overrides the global one), then any ``pod_config.spec.serviceAccountName``
    of the global or context layer on top.
    """
    kube = config.get("kubernetes")
    kube = kube if isinstance(kube, dict) else {}
    contexts = kube.get("context_configs")
    layer = contexts.get(context) if isinstance(contexts, dict) else None
    layer = layer if isinstance(layer, dict) else {}
    for source, candidate in (
        ("kubernetes.context_configs pod_config.spec.serviceAccountName", layer),
        ("kubernetes.pod_config.spec.serviceAccountName", kube),
    ):
        name = _pod_service_account(candidate)
        if name:
            return name, source
    identity = _identity(layer.get("remote_identity"), context) or _identity(
        kube.get("remote_identity"), context
    )
    if identity is None:
        return DEFAULT_SERVICE_ACCOUNT, _DEFAULT_SOURCE
    if identity in _DEFAULT_IDENTITIES:
        return DEFAULT_SERVICE_ACCOUNT, f"kubernetes.remote_identity {identity}"
    return identity, "kubernetes.remote_identity"


def _skypilot_config(
    env: Mapping[str, str], stack: str | None, state_dir: Path | None
) -> tuple[dict[str, Any], str]:
    return isolated_config(env, stack, str(state_dir) if state_dir is not None else None)


def isolated_config(
    env: Mapping[str, str], stack: str | None, explicit_dir: str | None = None
) -> tuple[dict[str, Any], str]:
    """The isolated SkyPilot config of ``stack`` and its path (empty when never generated)."""
    try:
        directory = isolation.resolve_isolated_dir(
            explicit_dir, env, npa_config.load_config(env), stack
        )
        text = directory.config_file.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (ConfigError, OSError, yaml.YAMLError):
        return {}, ""
    return (data, str(directory.config_file)) if isinstance(data, dict) else ({}, "")


def _kube_failure(name: str, exc: KubeError) -> Check:
    return Check(name=name, ok=False, detail=exc.message, remedy=exc.remedy)


def _context_check(
    context: str, path: Path | None, env: Mapping[str, str]
) -> tuple[Check, kubeconfig.Kubeconfig | None]:
    try:
        config = kubeconfig.load(path if path is not None else kubeconfig.first_path(env))
        config.context(context)
    except KubeError as exc:
        return _kube_failure("kubeconfig_context", exc), None
    return Check(
        name="kubeconfig_context",
        ok=True,
        detail=f"context '{context}' is defined in {config.path}",
    ), config


def _readiness_check(
    cluster: KubeCluster,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    on_sample: Callable[[readiness.ReadinessProgress], None] | None,
) -> tuple[Check, ReadinessSummary]:
    evidence = readiness.wait_ready(cluster, clock=clock, sleep=sleep, on_sample=on_sample)
    data = evidence.to_json()
    summary = ReadinessSummary(
        state=evidence.state.value,
        reason=evidence.reason.value,
        elapsed_s=round(evidence.elapsed, 3),
        samples=[s.to_json() for s in evidence.samples],
    )
    last = evidence.samples[-1].detail if evidence.samples else ""
    if evidence.ready:
        detail = f"/readyz passed: {len(evidence.samples)} samples over {data['elapsed_s']} s"
        return Check(name="readiness", ok=True, detail=detail), summary
    detail = f"/readyz {evidence.state.value} after {len(evidence.samples)} sample(s)"
    return Check(
        name="readiness",
        ok=False,
        detail=f"{detail}: {last}" if last else detail,
        remedy=f"check the API server and credentials with `kubectl --context {cluster.context} "
        "get --raw=/readyz`, then rerun `npa skypilot verify`",
    ), summary


def _namespace_check(cluster: KubeCluster, namespace: str) -> Check:
    try:
        exists = cluster.namespace_exists(namespace)
    except KubeError as exc:
        return _kube_failure("namespace", exc)
    if exists:
        return Check(name="namespace", ok=True, detail=f"namespace '{namespace}' exists")
    return Check(
        name="namespace",
        ok=False,
        detail=f"namespace '{namespace}' (the context's namespace, else default) does not exist",
        remedy=f"create it (`kubectl --context {cluster.context} create namespace {namespace}`) "
        "or set `namespace` on the kubeconfig context",
    )


def _service_account_check(
    cluster: KubeCluster, namespace: str, account: str, source: str
) -> Check:
    try:
        exists = cluster.service_account_exists(namespace, account)
    except KubeError as exc:
        return _kube_failure("service_account", exc)
    checked = f"ServiceAccount {namespace}/{account} (from {source})"
    if exists:
        return Check(name="service_account", ok=True, detail=f"{checked} exists")
    if account == DEFAULT_SERVICE_ACCOUNT:
        # skypilot-0.12.md §9.2: SkyPilot creates its own account and RBAC at the first launch.
        return Check(
            name="service_account",
            ok=True,
            detail=f"{checked} does not exist yet; SkyPilot creates it with its Role and "
            "bindings at the first launch (that needs RBAC to create them)",
        )
    return Check(
        name="service_account",
        ok=False,
        detail=f"{checked} does not exist; pod admission will refuse SkyPilot's pods",
        remedy=f"create it in {namespace} (the stack owns it: `npa stack up`), or fix "
        "kubernetes.remote_identity",
    )


def _pin_check(report: status.StatusReport) -> Check:
    spec = next(p.specifier for p in pins.PINS if p.name == "kubernetes")
    version = report.kubernetes_client_version
    where = f" in the SkyPilot venv of {report.bin_path}" if report.bin_path else ""
    if version is not None and pins.satisfies(version, spec):
        return Check(
            name="kubernetes_client_pin",
            ok=True,
            detail=f"kubernetes {version}{where} is within {spec}",
        )
    found = f"kubernetes {version}{where} is outside {spec}" if version else ""
    detail = found or "; ".join(report.warnings) or "the SkyPilot venv could not be inspected"
    return Check(
        name="kubernetes_client_pin", ok=False, detail=detail, remedy=status.BOOTSTRAP_REMEDY
    )


def _token_check(env: Mapping[str, str]) -> Check:
    advisory = drift.token_advisory(livegate.token_vars(env))  # the live gate's own warning
    if advisory is None:
        return Check(
            name="stale_iam_token", ok=True, detail="no static Nebius IAM token is exported"
        )
    return Check(name="stale_iam_token", ok=False, detail=advisory.message, remedy=advisory.remedy)


def _cluster_checks(
    cluster: KubeCluster,
    namespace: str,
    account: str,
    source: str,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    on_sample: Callable[[readiness.ReadinessProgress], None] | None,
) -> tuple[list[Check], ReadinessSummary]:
    """Readiness, then the namespace, then the ServiceAccount: each only after the one before."""
    try:
        ready, summary = _readiness_check(cluster, clock, sleep, on_sample)
        checks = [ready]
        if ready.ok:
            checks.append(_namespace_check(cluster, namespace))
        if ready.ok and checks[-1].ok:
            checks.append(_service_account_check(cluster, namespace, account, source))
        return checks, summary
    finally:
        close = getattr(cluster, "close", None)
        if callable(close):
            close()


def probe_status(env: Mapping[str, str], sky_bin: str | None = None) -> status.StatusReport:
    """The SkyPilot version gate (``npa skypilot status``)."""
    return status.status(sky_bin, env)


def verify(
    context: str,
    *,
    kubeconfig_path: Path | None = None,
    stack: str | None = None,
    sky_bin: str | None = None,
    env: Mapping[str, str] | None = None,
    cluster_factory: ClusterFactory,
    status_probe: StatusProbe | None = None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    sky_check: SkyCheck,
    which: clienttools.Which,
    state_dir: Path | None = None,
    on_sample: Callable[[readiness.ReadinessProgress], None] | None = None,
) -> VerifyReport:
    """Run every check against ``context``; never raises for an expected problem.

    ``cluster_factory``, ``clock``, ``sleep``, ``sky_check`` and ``which`` are the
    caller's adapters (the CLI's come from ``Services`` through
    ``workflow.operations.skypilotverify``); ``state_dir`` is the isolated state
    whose SkyPilot config names the ServiceAccount (None: the stack's, as resolved
    from the configuration); ``status_probe`` defaults to ``probe_status``, the
    SkyPilot version gate on the real binary.
    """
    environ = os.environ if env is None else env
    checks: list[Check] = []
    summary = ReadinessSummary(state="not_run", reason="", elapsed_s=0.0, samples=[])
    namespace = account = None
    context_check, config = _context_check(context, kubeconfig_path, environ)
    checks.append(context_check)
    if config is not None:
        namespace = config.namespace(context)
        sky_config, config_file = _skypilot_config(environ, stack, state_dir)
        account, source = effective_service_account(sky_config, context)
        if config_file and source != _DEFAULT_SOURCE:
            source = f"{source} in {config_file}"
        cluster = cluster_factory(config.path, context)
        found, summary = _cluster_checks(
            cluster, namespace, account, source, clock, sleep, on_sample
        )
        checks += found
    report = status_probe(environ) if status_probe else probe_status(environ, sky_bin)
    checks.append(_pin_check(report))
    checks.append(_token_check(environ))
    sky = skycheck.run(sky_check if config is not None else None, context, environ)
    tools = clienttools.check(which)
    checks += [Check(**f._asdict()) for f in (*sky.findings, skycheck.tools_finding(tools))]
    # SkyPilot can use the context: the cluster answers and SkyPilot's own check agrees
    kube_ok = _CLUSTER_CHECKS.issubset(c.name for c in checks if c.ok) and sky.enabled
    return VerifyReport(
        status="ok" if all(c.ok for c in checks) else "failed",
        kubernetes_required=True,
        kubernetes_enabled=kube_ok,
        context=context,
        kubeconfig=str(config.path) if config is not None else None,
        namespace=namespace,
        service_account=account,
        readiness=summary,
        checks=checks,
        sky_version=report.skypilot_version,
        sky_check=sky.summary,
        api_server=sky.server,
        client_tools=tools,
    )
