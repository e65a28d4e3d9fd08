"""A stack's settings for planning and submit: its configuration file, or its outputs (cli.md §0).

``--stack NAME`` selects ``stacks/Pulumi.<NAME>.yaml``. Planning and
``--plan-only`` read the file directly, with no Pulumi engine: the keys under
the ``npa-infra:`` namespace, validated by the stack's own typed model
(``npa_infra.stack.config``), so a mistake is reported with its file, line
and column. Secret values in the file are Pulumi-encrypted and never read
here.

A live submit prefers what ``npa stack up`` produced: ``resolve_stack`` reads
the stack's outputs when the engine is present and the stack has been
brought up, and says which source it used (``StackSettings.source``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra.skypilot.isolation import ControllerSettings

if TYPE_CHECKING:
    from npa_infra.stack.api import EngineFactory

__all__ = ["FROM_FILE", "FROM_OUTPUTS", "StackSettings", "read_stack", "resolve_stack"]

FROM_FILE = "configuration file"
FROM_OUTPUTS = "stack outputs"


@dataclass(frozen=True, slots=True)
class StackSettings:
    name: str
    path: str
    context: str = ""
    namespace: str = ""
    service_account: str = ""
    bucket: str = ""
    registry: str = ""
    source_prefix: str = ""
    s3_endpoint: str = ""
    controller_cpus: int = 2
    controller_memory_gb: int = 8
    controller_pod_config: dict[str, Any] | None = None
    pull_secret_names: tuple[str, ...] = ()
    src_s3_uri: str = ""  # only from outputs: the staged source the stack owns
    controller_name: str = ""  # only from outputs
    skypilot_config_path: str = ""  # only from outputs
    isolated_config_dir: str = ""  # only from outputs
    source: str = FROM_FILE

    def controller(self) -> ControllerSettings:
        """The jobs controller block of this stack's generated SkyPilot config."""
        return ControllerSettings(
            cpus=self.controller_cpus,
            memory_gb=self.controller_memory_gb,
            pod_config=self.controller_pod_config,
            remote_identity=self.service_account or None,
        )


def read_stack(name: str, root: Path) -> StackSettings:
    """The stack's settings from its configuration file (no engine).

    Raises:
        ConfigError: the file is missing or the stack name unusable.
        StackConfigError: a key is wrong (every issue, located).
    """
    from npa_infra.stack import config

    loaded = config.load_stack_file(name, root)
    cfg = loaded.config
    return StackSettings(
        name=name,
        path=str(loaded.path),
        context=cfg.context,
        namespace=cfg.namespace,
        service_account=cfg.service_account,
        bucket=cfg.bucket,
        registry=cfg.registry,
        source_prefix=cfg.source_prefix,
        s3_endpoint=cfg.s3_endpoint,
        controller_cpus=cfg.controller_cpus,
        controller_memory_gb=cfg.controller_memory_gb,
        controller_pod_config=dict(cfg.controller_pod_config)
        if cfg.controller_pod_config is not None
        else None,
        pull_secret_names=cfg.pull_secret_names,
    )


def resolve_stack(
    name: str,
    root: Path,
    env: Mapping[str, str],
    *,
    engine_factory: EngineFactory | None = None,
) -> StackSettings:
    """The file's settings, overlaid with the stack's outputs when the engine has them.

    Without a ``pulumi`` binary, or for a stack never brought up, the file alone
    is used (``source`` says so); any other engine failure is raised, not guessed past.

    Raises:
        ConfigError, StackConfigError: as ``read_stack``; also engine failures
            (StackLockedError, ExternalError, a wrong passphrase).
    """
    from npa_infra.errors import ConfigError, EngineUnavailableError
    from npa_infra.stack import api

    settings = read_stack(name, root)
    request = api.StackRequest(stack=name, project_root=root)
    try:
        outputs = api.stack_outputs(request, env=env, engine_factory=engine_factory)
    except EngineUnavailableError:
        return settings
    except ConfigError as exc:
        if "has no outputs yet" in exc.message or "does not exist in the backend" in exc.message:
            return settings
        raise
    return replace(
        settings,
        context=outputs.context,
        namespace=outputs.namespace,
        service_account=outputs.service_account,
        pull_secret_names=tuple(outputs.pull_secret_names),
        src_s3_uri=outputs.src_s3_uri,
        controller_name=outputs.controller_name,
        skypilot_config_path=outputs.skypilot_config_path,
        isolated_config_dir=outputs.isolated_config_dir,
        source=FROM_OUTPUTS,
    )
