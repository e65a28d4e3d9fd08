"""Read a stack's configuration file without the Pulumi engine (cli.md §0).

``--stack NAME`` selects ``stacks/Pulumi.<NAME>.yaml``; planning reads the
keys under the ``npa-infra:`` namespace directly. Secret values in the file
are Pulumi-encrypted and are never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from npa_infra.errors import ConfigError
from npa_infra.skypilot.isolation import ControllerSettings

__all__ = ["StackSettings", "read_stack"]


@dataclass(frozen=True, slots=True)
class StackSettings:
    name: str
    path: str
    context: str = ""
    namespace: str = ""
    service_account: str = ""
    bucket: str = ""
    registry: str = ""
    controller_cpus: int = 2
    controller_memory_gb: int = 8
    controller_pod_config: dict[str, Any] | None = None

    def controller(self) -> ControllerSettings:
        """The jobs controller block of this stack's generated SkyPilot config."""
        return ControllerSettings(
            cpus=self.controller_cpus,
            memory_gb=self.controller_memory_gb,
            pod_config=self.controller_pod_config,
            remote_identity=self.service_account or None,
        )


def _positive_int(config: dict[str, Any], key: str, default: int, path: Path) -> int:
    value = config.get(f"npa-infra:{key}", default)
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(
            f"{path}: npa-infra:{key} must be a positive integer, got {value!r}",
            remedy=f"set npa-infra:{key} to 1 or more",
        )
    return number


def read_stack(name: str, root: Path) -> StackSettings:
    path = root / "stacks" / f"Pulumi.{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"stack '{name}' has no configuration file at {path}",
            remedy=f"create {path} or pass an existing --stack",
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", remedy="fix the stack file's YAML") from exc
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} has no config: mapping", remedy="see stacks/Pulumi.dev.yaml")

    def get(key: str) -> str:
        value = config.get(f"npa-infra:{key}", "")
        return value if isinstance(value, str) else ""

    pod_config = config.get("npa-infra:controllerPodConfig")
    if pod_config is not None and not isinstance(pod_config, dict):
        raise ConfigError(
            f"{path}: npa-infra:controllerPodConfig must be a mapping (a partial Pod manifest)",
            remedy="write it as a YAML mapping, e.g. {spec: {priorityClassName: x}}",
        )
    return StackSettings(
        name,
        str(path),
        get("context"),
        get("namespace"),
        get("serviceAccount"),
        get("bucket"),
        get("registry"),
        _positive_int(config, "controllerCpus", 2, path),
        _positive_int(config, "controllerMemoryGb", 8, path),
        pod_config,
    )
