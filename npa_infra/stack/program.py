"""The Pulumi program of an npa-infra stack: what one exact context needs (pulumi.md §3).

Declared, in dependency order:

- a Kubernetes provider pinned to the stack's exact context and namespace,
  with ``enableSecretMutable`` so that rotating a registry password updates
  the pull Secret in place (pulumi.md §6.2-§6.3; no delete-then-create window
  in which pods fail with ``FailedToRetrieveImagePullSecret``);
- the namespaces (``protect`` by default; adopted ones are imported and
  ``retain_on_delete``);
- per namespace, one ``kubernetes.io/dockerconfigjson`` Secret per private
  registry, its value built from secret stack config and kept secret;
- per namespace, when ``serviceAccount`` is set, that ServiceAccount (its
  ``imagePullSecrets`` reference the Secrets through their outputs) and the
  Role and RoleBinding it needs to run SkyPilot's pods (SkyPilot creates RBAC
  only for its own default account, skypilot-0.12.md §9.2);
- when ``bucket`` is set, the staged source prefix (``providers.SourcePrefix``),
  retained on delete unless ``deleteSourceOnDestroy``;
- the SkyPilot controller (``providers.ControllerConfig``), which depends on
  everything above, so ``destroy`` runs its guarded teardown first and a
  refusal leaves everything else in place (pulumi.md §6.5).

Every reference goes through an Output (``ns.metadata.name``, never the
literal), so the engine knows the edges. ``build`` is the program for a
validated ``ProgramInputs``: ``npa stack`` runs it inline through the
Automation API (``api``), and ``main`` is what ``pulumi preview -s dev`` runs
(``__main__.py``), reading the engine's config through the same model.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from npa_infra.stack import config as stack_config
from npa_infra.stack.config import StackConfig
from npa_infra.stack.providers import (
    ControllerConfig,
    ControllerProvider,
    SourcePrefix,
    SourcePrefixProvider,
)

__all__ = [
    "OUTPUT_KEYS",
    "ProgramInputs",
    "StackResources",
    "build",
    "main",
    "program_inputs",
]

LABELS = {"app.kubernetes.io/managed-by": "npa-infra"}
OUTPUT_KEYS = (
    "context",
    "namespace",
    "namespaces",
    "service_account",
    "pull_secret_names",
    "src_s3_uri",
    "controller_name",
    "skypilot_config_path",
    "isolated_config_dir",
)
# What SkyPilot's pods and its controller do in their namespace (skypilot-0.12.md §9.2).
_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
_RULES = [
    {
        "api_groups": [""],
        "resources": [
            "pods",
            "pods/exec",
            "pods/log",
            "pods/status",
            "services",
            "secrets",
            "configmaps",
            "persistentvolumeclaims",
            "events",
        ],
        "verbs": _VERBS,
    },
    {"api_groups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "list"]},
    {"api_groups": ["apps"], "resources": ["deployments", "replicasets"], "verbs": _VERBS},
    {"api_groups": ["batch"], "resources": ["jobs"], "verbs": _VERBS},
]


@dataclass(frozen=True, slots=True)
class ProgramInputs:
    """Everything the program needs, resolved before the engine runs it."""

    stack: str
    config: StackConfig
    state_dir: Path
    source_dir: Path
    source_fingerprint: str = ""  # "" = no source prefix (no bucket)


@dataclass(slots=True)
class StackResources:
    """The declared resources, for tests and for the exports."""

    provider: k8s.Provider
    namespaces: dict[str, k8s.core.v1.Namespace] = field(default_factory=dict)
    pull_secrets: dict[tuple[str, str], k8s.core.v1.Secret] = field(default_factory=dict)
    service_accounts: dict[str, k8s.core.v1.ServiceAccount] = field(default_factory=dict)
    roles: dict[str, k8s.rbac.v1.Role] = field(default_factory=dict)
    role_bindings: dict[str, k8s.rbac.v1.RoleBinding] = field(default_factory=dict)
    source: SourcePrefix | None = None
    controller: ControllerConfig | None = None


def program_inputs(
    stack: str, cfg: StackConfig, project_root: Path, env: Mapping[str, str]
) -> ProgramInputs:
    """Resolve the state directory and the source fingerprint (reads the source tree).

    Raises:
        ConfigError: the stack name cannot name a state directory, or the source
            tree cannot be listed or read.
    """
    from npa_infra import config as npa_config
    from npa_infra.skypilot.isolation import resolve_isolated_dir
    from npa_infra.source import tree

    state = (
        Path(cfg.state_dir).expanduser()
        if cfg.state_dir
        else resolve_isolated_dir(None, env, npa_config.load_config(env), stack).root
    )
    source_dir = (project_root / cfg.source_dir).resolve()
    sha = tree.scan(source_dir).fingerprint if cfg.bucket else ""
    return ProgramInputs(stack, cfg, state, source_dir, sha)


def _docker_config(server: str, username: str, password: str) -> str:
    import base64

    auth = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    body = {"auths": {server: {"username": username, "password": password, "auth": auth}}}
    return json.dumps(body, sort_keys=True)


def _namespace(name: str, cfg: StackConfig, provider: k8s.Provider) -> k8s.core.v1.Namespace:
    # an adopted namespace is imported as it is: a label it lacks would fail the import
    labels = None if cfg.adopt_namespaces else LABELS
    return k8s.core.v1.Namespace(
        f"ns-{name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=labels),
        opts=pulumi.ResourceOptions(
            provider=provider,
            protect=cfg.protect_namespaces,
            retain_on_delete=cfg.adopt_namespaces or None,
            import_=name if cfg.adopt_namespaces else None,
        ),
    )


def _pull_secrets(
    ns_name: str,
    ns: k8s.core.v1.Namespace,
    cfg: StackConfig,
    passwords: Mapping[str, pulumi.Output[str]],
    provider: k8s.Provider,
) -> dict[tuple[str, str], k8s.core.v1.Secret]:
    made = {}
    for registry in cfg.registries:
        render = functools.partial(_docker_config, registry.server, registry.username)
        value: pulumi.Output[str] = pulumi.Output.secret(
            passwords[registry.password_key].apply(render)
        )
        made[(ns_name, registry.secret_name)] = k8s.core.v1.Secret(
            f"pull-{ns_name}-{registry.secret_name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=registry.secret_name, namespace=ns.metadata.name, labels=LABELS
            ),
            type="kubernetes.io/dockerconfigjson",
            string_data={".dockerconfigjson": value},
            opts=pulumi.ResourceOptions(provider=provider),  # data/stringData: secret outputs
        )
    return made


def _identity(
    ns_name: str,
    ns: k8s.core.v1.Namespace,
    account: str,
    secrets: list[k8s.core.v1.Secret],
    provider: k8s.Provider,
    resources: StackResources,
) -> None:
    opts = pulumi.ResourceOptions(provider=provider)
    sa = k8s.core.v1.ServiceAccount(
        f"sa-{ns_name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=account, namespace=ns.metadata.name, labels=LABELS
        ),
        image_pull_secrets=[
            k8s.core.v1.LocalObjectReferenceArgs(name=s.metadata.name) for s in secrets
        ],
        opts=opts,
    )
    role = k8s.rbac.v1.Role(
        f"role-{ns_name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=f"{account}-npa", namespace=ns.metadata.name, labels=LABELS
        ),
        rules=[k8s.rbac.v1.PolicyRuleArgs(**rule) for rule in _RULES],
        opts=opts,
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"rolebinding-{ns_name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=f"{account}-npa", namespace=ns.metadata.name, labels=LABELS
        ),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
        ),
        subjects=[
            k8s.rbac.v1.SubjectArgs(
                kind="ServiceAccount", name=sa.metadata.name, namespace=ns.metadata.name
            )
        ],
        opts=opts,
    )
    resources.service_accounts[ns_name] = sa
    resources.roles[ns_name] = role
    resources.role_bindings[ns_name] = binding


def build(
    inputs: ProgramInputs,
    *,
    passwords: Mapping[str, pulumi.Output[str]] | None = None,
    controller_provider: ControllerProvider | None = None,
    source_provider: SourcePrefixProvider | None = None,
) -> StackResources:
    """Declare the stack's resources and export its outputs.

    ``passwords`` maps each registry's password key to a secret Output (default:
    ``pulumi.Config("npa-infra").require_secret``).

    Raises:
        StackConfigError: the context or namespace is missing.
    """
    cfg = inputs.config
    stack_config.require_engine_fields(cfg, label=f"stack {inputs.stack}")
    if passwords is None:
        engine_config = pulumi.Config(stack_config.NAMESPACE)
        passwords = {k: engine_config.require_secret(k) for k in cfg.password_keys}
    provider = k8s.Provider(
        "k8s", context=cfg.context, namespace=cfg.namespace, enable_secret_mutable=True
    )
    res = StackResources(provider=provider)
    for name in cfg.namespaces:
        ns = _namespace(name, cfg, provider)
        res.namespaces[name] = ns
        res.pull_secrets.update(_pull_secrets(name, ns, cfg, passwords, provider))
        if cfg.service_account:
            mine = [s for (n, _), s in res.pull_secrets.items() if n == name]
            _identity(name, ns, cfg.service_account, mine, provider, res)
    if cfg.bucket and inputs.source_fingerprint:
        res.source = SourcePrefix(
            "source",
            {
                "bucket": cfg.bucket,
                "prefix": cfg.source_prefix,
                "fingerprint": inputs.source_fingerprint,
                "source_dir": str(inputs.source_dir),
                "endpoint": cfg.s3_endpoint,
                "stack": inputs.stack,
                "delete_objects": cfg.delete_source_on_destroy,
            },
            opts=pulumi.ResourceOptions(retain_on_delete=not cfg.delete_source_on_destroy),
            provider=source_provider,
        )
    res.controller = _controller(inputs, res, controller_provider)
    _export(inputs, res)
    return res


def _controller(
    inputs: ProgramInputs, res: StackResources, provider: ControllerProvider | None
) -> ControllerConfig:
    cfg = inputs.config
    main_ns = res.namespaces[cfg.namespace]
    main_secrets = [s for (n, _), s in res.pull_secrets.items() if n == cfg.namespace]
    account = res.service_accounts.get(cfg.namespace)
    after: list[pulumi.Resource] = [*res.namespaces.values(), *res.role_bindings.values()]
    if res.source is not None:
        after.append(res.source)
    return ControllerConfig(
        "controller",
        {
            "stack": inputs.stack,
            "state_dir": str(inputs.state_dir),
            "context": cfg.context,
            "namespace": main_ns.metadata.name,
            "service_account": account.metadata.name if account is not None else "",
            "pull_secret_names": [s.metadata.name for s in main_secrets],
            "cpus": cfg.controller_cpus,
            "memory_gb": cfg.controller_memory_gb,
            "pod_config": cfg.controller_pod_config or {},
            "sky_bin": cfg.sky_bin,
        },
        opts=pulumi.ResourceOptions(depends_on=after),
        provider=provider,
    )


def _export(inputs: ProgramInputs, res: StackResources) -> None:
    cfg = inputs.config
    assert res.controller is not None
    account = res.service_accounts.get(cfg.namespace)
    pulumi.export("context", cfg.context)
    pulumi.export("namespace", res.namespaces[cfg.namespace].metadata.name)
    pulumi.export("namespaces", [ns.metadata.name for ns in res.namespaces.values()])
    pulumi.export("service_account", account.metadata.name if account is not None else "")
    pulumi.export(
        "pull_secret_names",
        [s.metadata.name for (n, _), s in res.pull_secrets.items() if n == cfg.namespace],
    )
    pulumi.export("src_s3_uri", res.source.uri if res.source is not None else "")
    pulumi.export("controller_name", res.controller.controller_name)
    pulumi.export("skypilot_config_path", res.controller.config_path)
    pulumi.export("isolated_config_dir", str(inputs.state_dir))


_STRING_KEYS = {
    "context",
    "namespace",
    "serviceAccount",
    "registry",
    "bucket",
    "sourcePrefix",
    "sourceDir",
    "s3Endpoint",
    "skyBin",
    "stateDir",
}


def _engine_values(engine_config: pulumi.Config) -> dict[str, Any]:
    """The ``npa-infra:`` keys the engine holds, in the shape ``config.from_values`` takes."""
    from pydantic.alias_generators import to_camel

    values: dict[str, Any] = {}
    for name in StackConfig.model_fields:
        key = to_camel(name)
        value = engine_config.get(key) if key in _STRING_KEYS else engine_config.get_object(key)
        if value is not None:
            values[key] = value
    return values


def main() -> None:
    """The program ``pulumi preview|up -s NAME`` runs from the project directory."""
    stack = pulumi.get_stack()
    cfg = stack_config.from_values(_engine_values(pulumi.Config(stack_config.NAMESPACE)))
    build(program_inputs(stack, cfg, Path.cwd(), os.environ))
