"""The npa configuration file, ``$NPA_HOME/config.yaml`` (cli.md §0, §5).

Holds non-secret settings only: ``skypilot.sky_bin``, the isolated config
directory, ``src_s3_uri``, the registry. Written atomically, mode 0600, in a
0700 directory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from npa_infra.errors import ConfigError

__all__ = ["config_path", "get_value", "load_config", "npa_home", "save_config", "set_value"]


def npa_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("NPA_HOME") or Path.home() / ".npa").expanduser()


def config_path(env: Mapping[str, str]) -> Path:
    return npa_home(env) / "config.yaml"


def load_config(env: Mapping[str, str]) -> dict[str, Any]:
    path = config_path(env)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", remedy=f"fix or remove {path}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping", remedy=f"fix or remove {path}")
    return data


def get_value(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def set_value(config: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = dict(config)
    node = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, dict) else {}
        node = node[part]
    node[parts[-1]] = value
    return out


def save_config(env: Mapping[str, str], config: Mapping[str, Any]) -> Path:
    """Write the config atomically (temp file + rename), 0600 in a 0700 home."""
    path = config_path(env)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(dict(config), handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
