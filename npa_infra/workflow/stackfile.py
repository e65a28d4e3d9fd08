"""Read a stack's configuration file without the Pulumi engine (cli.md §0).

``--stack NAME`` selects ``stacks/Pulumi.<NAME>.yaml``; planning reads the
keys under the ``npa-infra:`` namespace directly. Secret values in the file
are Pulumi-encrypted and are never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from npa_infra.errors import ConfigError

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

    return StackSettings(
        name,
        str(path),
        get("context"),
        get("namespace"),
        get("serviceAccount"),
        get("bucket"),
        get("registry"),
    )
