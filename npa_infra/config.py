"""The npa configuration file, ``$NPA_HOME/config.yaml`` (cli.md §0, §5).

Holds non-secret settings only: ``skypilot.sky_bin``, the isolated config
directory, ``src_s3_uri``, the registry. Written atomically, mode 0600, in a
0700 directory (every missing level of the home too). ``update_config`` is the
read-merge-write: it holds the file's lock (``localstate.privatefile``) from
the read to the rename, so two commands saving different keys at once keep
both (issue 24).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from npa_infra.errors import ConfigError
from npa_infra.localstate import privatefile

__all__ = [
    "config_path",
    "get_value",
    "load_config",
    "npa_home",
    "save_config",
    "set_value",
    "update_config",
]


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


def _write(path: Path, config: Mapping[str, Any]) -> None:
    text = yaml.safe_dump(dict(config), sort_keys=True)
    try:
        privatefile.replace(path, text.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc}",
            remedy=f"make {path.parent} a directory you own and can write (chmod 700)",
        ) from exc


def save_config(env: Mapping[str, str], config: Mapping[str, Any]) -> Path:
    """Write the whole config atomically, 0600 in a 0700 home, under the file's lock.

    A caller that read the config first should use ``update_config`` instead: only
    that keeps a concurrent writer's keys.

    Raises:
        ConfigError: the home or the file cannot be written, or the lock is held too long.
    """
    path = config_path(env)
    with privatefile.locked(path):
        _write(path, config)
    return path


def update_config(
    env: Mapping[str, str], change: Callable[[dict[str, Any]], dict[str, Any]]
) -> Path:
    """Read, ``change`` and write the config under the file's lock (module docstring).

    Raises:
        ConfigError: the file cannot be read or written, or the lock is held too long.
    """
    path = config_path(env)
    with privatefile.locked(path):
        old = load_config(env)
        new = change(dict(old))
        if new != old or not path.exists():
            _write(path, new)
    return path
