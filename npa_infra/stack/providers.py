"""Dynamic providers: the SkyPilot jobs controller and the staged source prefix (pulumi.md §3-§4).

**ControllerConfig** owns one isolated SkyPilot state directory
(skypilot-0.12.md §6-§7.2): ``create``/``update`` first check, through the
Kubernetes API of the exact context, that the namespace and ServiceAccount
the config will name exist (the engine created them first: they are
dependencies), then write its generated global config (the controller's
resources, ``allowed_contexts`` = the one exact context, the ``pod_config``
carrying the pull secrets and the ServiceAccount, ``remote_identity``),
claim the directory for the stack (``stack-owner``: submits, status and
cancel adopt that config and never rewrite it) and report the controller's
name.
``delete`` is the guarded teardown: it refuses while any run of the stack is
not terminal in the journal (``gate``), then runs the controller's gate on
the queue of every user (``controllerdown``: non-terminal jobs refuse, naming
id, name and user; CANCELLING ones are waited for within a deadline; the
journaled ``sky down sky-jobs-controller-<id>`` answers its ``delete`` prompt
and is retried after SkyPilot's own in-progress refusal once the queue
drained; any other failure stops with its text, leaving the stack intact);
once the controller is gone the directory's claim is released. A change of
context, state directory or stack replaces the controller, tearing the old
one down first. Resources and ``pod_config`` apply when SkyPilot next
creates the controller; a running controller is not resized.

**SourcePrefix** stages a source tree under ``s3://bucket/prefix/<sha>/``
with its marker written last (``npa_infra.source.staging``). The fingerprint is an
input, so a changed tree is a replacement, created before the old one is
deleted. ``delete`` removes the objects only when asked
(``delete_objects``) and only when no active run may use them; by default
the program also marks the resource ``retain_on_delete``.

Both providers are pickled into the stack's state (dill, by reference to
this module): they hold no clients, only optional factories that tests pass
and the program leaves ``None``. Clients are built inside each method, and
credentials come from the environment, never from inputs (pulumi.md §4.2).
Errors are ``NpaError``s whose message carries the remedy, because the engine
shows only the message.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
from pulumi import dynamic

from npa_infra.errors import (
    ConfigError,
    ExternalError,
    RunStateError,
    SkyPilotDriftError,
    StorageError,
    UncertainOutcomeError,
)
from npa_infra.kube.base import KubeCluster
from npa_infra.skypilot.base import SkyPilot
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir, controller_pod_config
from npa_infra.source import decision as source_decision
from npa_infra.stack import controllerdown, gate
from npa_infra.stack.models import ControllerReport, ControllerStatus
from npa_infra.storage.base import ObjectStore
from npa_infra.storage.models import S3Uri

__all__ = [
    "ControllerConfig",
    "ControllerProvider",
    "SourcePrefix",
    "SourcePrefixProvider",
    "controller_pod_config",
]

SkyFactory = Callable[[Path, IsolatedDir, Mapping[str, str]], SkyPilot]
ClusterFactory = Callable[[str, Mapping[str, str]], KubeCluster]
StoreFactory = Callable[[str | None], ObjectStore]

_PROVIDER_KEY = "__provider"
_CONTROLLER_REPLACE = ("stack", "state_dir", "context")
_CONTROLLER_UPDATE = (
    "namespace",
    "service_account",
    "pull_secret_names",
    "cpus",
    "memory_gb",
    "pod_config",
    "sky_bin",
)
_SOURCE_REPLACE = ("bucket", "prefix", "fingerprint")
_SOURCE_UPDATE = ("endpoint", "source_dir", "delete_objects", "stack")


def _changed(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    return [k for k in keys if olds.get(k) != news.get(k)]


def _inputs(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k != _PROVIDER_KEY}


def _progress(line: str) -> None:
    """The engine shows a provider's stderr; a wait of minutes must say what it waits for."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


_HELD = (ControllerStatus.REFUSED, ControllerStatus.TIMED_OUT)


def _raise_unless_gone(report: ControllerReport) -> None:
    """The gate's result as the engine shows it: only the message (module docstring)."""
    if report.status in (ControllerStatus.REMOVED, ControllerStatus.ALREADY_GONE):
        return
    jobs = [j.model_dump() for j in report.blocking_jobs]
    if report.launches_in_flight and report.status in _HELD:
        raise RunStateError(
            f"refusing to tear down the SkyPilot controller of stack {report.stack}: launches "
            f"in flight may still create jobs on it: {report.detail}. Hint: continue or cancel "
            f"each run ({'; '.join(report.next[:-1])}), then rerun the destroy",
            remedy=report.next[0] if report.next else "npa workbench workflow cancel <run> --json",
            details={
                "launches_in_flight": [launch.model_dump() for launch in report.launches_in_flight],
                "reason": report.reason,
            },
        )
    if report.status in (ControllerStatus.REFUSED, ControllerStatus.TIMED_OUT):
        why = "timed out waiting for" if report.status is ControllerStatus.TIMED_OUT else "found"
        raise RunStateError(
            f"refusing to tear down the SkyPilot controller of stack {report.stack}: {why} "
            f"managed jobs not terminal: {report.detail}. Hint: cancel them "
            "(`npa workbench workflow cancel <run> --json`; another user's job by its owner), "
            "wait until they are terminal, then rerun the destroy",
            remedy="npa workbench workflow cancel <run> --json",
            details={"blocking_jobs": jobs, "reason": report.reason},
        )
    if report.status is ControllerStatus.FAILED:
        raise ExternalError(
            f"`sky down` of the controller failed: {report.detail[:300]}. Hint: check "
            "`npa skypilot status`, then rerun the destroy",
            remedy="npa skypilot status",
            details={"reason": report.reason},
        )
    raise UncertainOutcomeError(
        f"cannot prove the SkyPilot controller of stack {report.stack} may go: its queue of "
        f"all users is unknown ({report.detail[:300]}); nothing was torn down. Hint: check "
        "`npa skypilot status`, then rerun the destroy",
        remedy="npa skypilot status",
        details={"reason": report.reason},
    )


class ControllerProvider(dynamic.ResourceProvider):
    """CRUD of the isolated SkyPilot state directory and its controller (module docstring)."""

    def __init__(
        self,
        *,
        sky: SkyFactory | None = None,
        cluster: ClusterFactory | None = None,
        env: Mapping[str, str] | None = None,
        deadline_seconds: float = controllerdown.DEFAULT_DEADLINE,
        now: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__()
        self._sky = sky
        self._cluster = cluster
        self._env = dict(env) if env is not None else None
        self._deadline = deadline_seconds
        self._now = now  # None: the wall clock (tests move a fake one)
        self._sleep = sleep

    def environment(self) -> Mapping[str, str]:
        return self._env if self._env is not None else os.environ

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        failures = [
            dynamic.CheckFailure(key, f"{key} is required")
            for key in ("stack", "state_dir", "context")
            if not news.get(key)
        ]
        return dynamic.CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        replaces = _changed(olds, news, _CONTROLLER_REPLACE)
        updates = _changed(olds, news, _CONTROLLER_UPDATE)
        return dynamic.DiffResult(
            changes=bool(replaces or updates),
            replaces=replaces,
            stables=[k for k in _CONTROLLER_REPLACE if k not in replaces],
            delete_before_replace=True,  # tear the old controller down before a new identity
        )

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        outs = self._write(props)
        return dynamic.CreateResult(id_=str(outs["controller_name"]), outs=outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult(outs=self._write(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Refuse while a run of the stack is active; else ``sky down`` the controller."""
        env = self.environment()
        stack = str(props.get("stack") or "")
        decision = gate.decide(gate.observe_home(env, stack=stack))
        if not decision.clear:
            raise RunStateError(
                f"refusing to tear down the SkyPilot controller of stack {stack}: "
                f"{decision.describe()}. Hint: wait for them, or run "
                f"`npa stack destroy --stack {stack} --cancel-runs --yes`",
                remedy=f"npa stack destroy --stack {stack} --cancel-runs --yes",
                details={"active_runs": [r.run_id for r in decision.active]},
            )
        isolated = IsolatedDir(Path(str(props["state_dir"])).expanduser())
        client = self._client(props, env)
        # the one controller gate (all-users queue, drain, journaled down, retry)
        plan = controllerdown.Teardown(
            isolated=isolated,
            stack=stack,
            controller=isolated.controller_name(env),
            yes=True,
            deadline_seconds=self._deadline,
        )
        outcome = controllerdown.execute(
            client,
            plan,
            now=self._now or time.time,
            sleep=self._sleep or time.sleep,
            progress=_progress,
        )
        _raise_unless_gone(controllerdown.report(plan, outcome))
        isolated.release()

    # -- helpers --------------------------------------------------------------------
    def _verify_cluster(self, props: Mapping[str, Any], env: Mapping[str, str]) -> None:
        """The namespace and ServiceAccount the config names exist in the exact context."""
        context, namespace = str(props["context"]), str(props.get("namespace") or "")
        account = str(props.get("service_account") or "")
        if not namespace:
            return
        if self._cluster is not None:
            self._check_exists(self._cluster(context, env), context, namespace, account)
            return
        from npa_infra.kube.client import KubeApi

        with KubeApi.for_context(context, env) as api:
            self._check_exists(api, context, namespace, account)

    @staticmethod
    def _check_exists(cluster: KubeCluster, context: str, namespace: str, account: str) -> None:
        if not cluster.namespace_exists(namespace):
            raise ConfigError(
                f"namespace {namespace} does not exist in context {context}. "
                "Hint: rerun `npa stack up`; the namespace is created before the controller",
                remedy="npa stack up --yes",
            )
        if account and not cluster.service_account_exists(namespace, account):
            raise ConfigError(
                f"ServiceAccount {namespace}/{account} does not exist in context {context}, "
                "and SkyPilot would run every pod as it. Hint: rerun `npa stack up`",
                remedy="npa stack up --yes",
            )

    def _write(self, props: Mapping[str, Any]) -> dict[str, Any]:
        env = self.environment()
        self._verify_cluster(props, env)
        isolated = IsolatedDir(Path(str(props["state_dir"])).expanduser())
        pull = [str(n) for n in props.get("pull_secret_names") or []]
        account = str(props.get("service_account") or "")
        settings = ControllerSettings(
            cpus=int(props.get("cpus") or 2),
            memory_gb=int(props.get("memory_gb") or 8),
            pod_config=controller_pod_config(props.get("pod_config"), pull, account) or None,
            remote_identity=account or None,
        )
        isolated.prepare(
            env,
            context=str(props["context"]),
            controller=settings,
            stack=str(props["stack"]),
            own=True,
        )
        return {
            **_inputs(props),
            "controller_name": isolated.controller_name(env),
            "config_path": str(isolated.config_file),
        }

    def _client(self, props: Mapping[str, Any], env: Mapping[str, str]) -> SkyPilot:
        from npa_infra.skypilot import livegate, resolve

        isolated = IsolatedDir(Path(str(props["state_dir"])).expanduser())
        try:
            binary = resolve.resolve_binary(str(props.get("sky_bin") or "") or None, env).path
        except ConfigError as exc:
            raise ConfigError(
                f"cannot verify the controller is gone: {exc.message}. Hint: {exc.remedy}",
                remedy=exc.remedy,
            ) from exc
        # the drift gate before `sky down` (faults.md, drifted tools); an injected client
        # checks its own ports, the real one is checked here once
        try:
            livegate.enforce(
                binary, env, sky_env=None if self._sky is not None else isolated.environment(env)
            )
        except SkyPilotDriftError as exc:  # the engine shows the message only
            raise SkyPilotDriftError(
                f"refusing to tear down the controller: {exc.message}. Hint: {exc.remedy}",
                remedy=exc.remedy,
                details=exc.details,
            ) from exc
        if self._sky is not None:
            return self._sky(binary, isolated, env)
        from npa_infra.skypilot.skycli import SkyCli

        return SkyCli(binary, isolated, env, check_ports=False)


class SourcePrefixProvider(dynamic.ResourceProvider):
    """CRUD of a content-addressed source prefix (module docstring)."""

    def __init__(
        self, *, store: StoreFactory | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self._store = store
        self._env = dict(env) if env is not None else None

    def environment(self) -> Mapping[str, str]:
        return self._env if self._env is not None else os.environ

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        failures = []
        uri = source_decision.prefix_uri(
            str(news.get("bucket") or ""), str(news.get("prefix") or ""), "0" * 64
        )
        try:
            S3Uri.parse(uri)
        except StorageError as exc:
            failures.append(dynamic.CheckFailure("bucket", exc.message))
        if not news.get("fingerprint"):
            failures.append(dynamic.CheckFailure("fingerprint", "fingerprint is required"))
        return dynamic.CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        replaces = _changed(olds, news, _SOURCE_REPLACE)
        updates = _changed(olds, news, _SOURCE_UPDATE)
        return dynamic.DiffResult(
            changes=bool(replaces or updates),
            replaces=replaces,
            stables=[k for k in _SOURCE_REPLACE if k not in replaces],
            delete_before_replace=False,  # the new prefix exists before the old one may go
        )

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        from npa_infra.source import staging, tree

        root = Path(str(props["source_dir"]))
        scanned = tree.scan(root)
        if scanned.fingerprint != props["fingerprint"]:
            raise ConfigError(
                f"the source tree {root} changed after the program read it "
                f"(fingerprint {scanned.fingerprint[:12]}…, expected "
                f"{str(props['fingerprint'])[:12]}…). Hint: rerun `npa stack up`",
                remedy="rerun npa stack up",
            )
        staged = staging.stage_source(
            root,
            str(props["bucket"]),
            str(props["prefix"]),
            store=self._client(props),
            scanned=scanned,
            env=self.environment(),
        )
        outs = {
            **_inputs(props),
            "uri": staged.uri,
            "file_count": staged.file_count,
            "reused": staged.reused,
        }
        return dynamic.CreateResult(id_=staged.uri, outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        keep: dict[str, Any] = {k: olds[k] for k in ("uri", "file_count", "reused") if k in olds}
        return dynamic.UpdateResult(outs={**_inputs(news), **keep})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Keep the objects unless asked; never delete what an active run may use."""
        if not props.get("delete_objects"):
            return
        uri = str(props.get("uri") or "")
        stack = str(props.get("stack") or "")
        decision = gate.decide_source(gate.observe_home(self.environment()), stack, uri)
        if not decision.clear:
            raise RunStateError(
                f"refusing to delete the staged source {uri}: {decision.describe()}. "
                "Hint: let those runs finish (or cancel them), then rerun the destroy",
                remedy=f"npa stack destroy --stack {stack} --cancel-runs --yes",
                details={"active_runs": [r.run_id for r in decision.active]},
            )
        parsed = S3Uri.parse(uri)
        self._client(props).delete_prefix(parsed)

    def _client(self, props: Mapping[str, Any]) -> ObjectStore:
        endpoint = str(props.get("endpoint") or "") or None
        if self._store is not None:
            return self._store(endpoint)
        from npa_infra.storage.s3 import BotoStore

        return BotoStore.create(endpoint_url=endpoint)


class ControllerConfig(dynamic.Resource, module="skypilot", name="ControllerConfig"):
    """The stack's SkyPilot controller (type ``pulumi-python:dynamic/skypilot:ControllerConfig``)."""

    controller_name: pulumi.Output[str]
    config_path: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: Mapping[str, pulumi.Input[Any]],
        opts: pulumi.ResourceOptions | None = None,
        provider: ControllerProvider | None = None,
    ) -> None:
        props = {"controller_name": None, "config_path": None, **args}
        super().__init__(provider or ControllerProvider(), name, props, opts)


class SourcePrefix(dynamic.Resource, module="storage", name="SourcePrefix"):
    """A staged source prefix (type ``pulumi-python:dynamic/storage:SourcePrefix``)."""

    uri: pulumi.Output[str]
    file_count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        args: Mapping[str, pulumi.Input[Any]],
        opts: pulumi.ResourceOptions | None = None,
        provider: SourcePrefixProvider | None = None,
    ) -> None:
        props = {"uri": None, "file_count": None, "reused": None, **args}
        super().__init__(provider or SourcePrefixProvider(), name, props, opts)
