"""Where a ``--secret-env NAME`` gets its value: the environment, then the stack.

The process environment wins. Otherwise the selected stack's credentials
file, ``$NPA_HOME/credentials/<stack>.env`` (``NAME=value`` lines, mode 0600,
not a symlink), may hold it. Only names and their source are returned here;
values are read again at launch and never stored, printed or journaled.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from npa_infra.errors import ConfigError, MissingSecretError

__all__ = ["credentials_path", "require", "resolve_sources", "resolve_values"]


def credentials_path(npa_home: Path, stack: str) -> Path:
    return npa_home / "credentials" / f"{stack}.env"


def _names_in(path: Path) -> set[str]:
    return set(_pairs_in(path))


def _pairs_in(path: Path) -> dict[str, str]:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return {}
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"credentials file {path} is not a regular file",
            remedy=f"replace it with a regular file: chmod 600 {path}",
        )
    if info.st_mode & 0o077:
        raise ConfigError(
            f"credentials file {path} is readable by other users (mode {oct(info.st_mode & 0o777)})",
            remedy=f"chmod 600 {path}",
        )
    pairs: dict[str, str] = {}
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags), encoding="utf-8") as handle:
        for line in handle:
            text = line.strip()
            if not text or text.startswith("#") or "=" not in text:
                continue
            name, _, value = text.removeprefix("export ").partition("=")
            value = value.strip().strip('"').strip("'")
            if value:
                pairs[name.strip()] = value
    return pairs


def resolve_values(
    names: Sequence[str], env: Mapping[str, str], *, npa_home: Path, stack: str | None
) -> dict[str, str]:
    """The values to hand to the ``sky`` child's environment, same precedence as
    ``resolve_sources``. Held in memory only; callers never store or print them."""
    stored = _pairs_in(credentials_path(npa_home, stack)) if stack else {}
    out: dict[str, str] = {}
    for name in names:
        value = env.get(name) or stored.get(name)
        if value:
            out[name] = value
    return out


def resolve_sources(
    names: Sequence[str], env: Mapping[str, str], *, npa_home: Path, stack: str | None
) -> dict[str, str | None]:
    """Map each name to ``environment``, ``stack:<name>`` or None when no value exists."""
    stored = _names_in(credentials_path(npa_home, stack)) if stack else set()
    out: dict[str, str | None] = {}
    for name in names:
        if env.get(name):
            out[name] = "environment"
        elif name in stored:
            out[name] = f"stack:{stack}"
        else:
            out[name] = None
    return out


def require(sources: Mapping[str, str | None], *, npa_home: Path, stack: str | None) -> None:
    """Fail before anything happens when a requested secret has no value anywhere."""
    missing = [n for n, src in sources.items() if src is None]
    if not missing:
        return
    checked = ["process environment"]
    if stack:
        checked.append(f"stack credentials {credentials_path(npa_home, stack)}")
    raise MissingSecretError(
        f"secret {missing[0]} is not set"
        + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else "")
        + f"; checked: {', '.join(checked)}",
        remedy=f"export {missing[0]}=… in this shell"
        + (f", or add it to {credentials_path(npa_home, stack)} (mode 0600)" if stack else "")
        + "; the value is passed to SkyPilot by name and never written",
        details={"missing": missing, "checked": checked},
    )
