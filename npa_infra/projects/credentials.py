"""A project's credential file: ``$NPA_HOME/credentials/projects/<alias>.env`` (issue 17).

``npa configure`` writes the credentials of a project that is not stack-backed
(or of any project with ``--store file``) here: ``NAME=value`` lines, the file
0600 in a 0700 directory, written atomically (temp file, fsync, rename) so a
crash leaves the old file or the new one, never half of either, and merged
under the file's lock (``localstate.privatefile``) so concurrent writers of
different names keep every one (issue 24). ``read_pairs``
is the one reader of this format, shared with the stack credentials file
(``$NPA_HOME/credentials/<stack>.env``, ``workflow.target.credentials``): a
file that is a symlink, not regular, or readable by others is refused.

A value is written as it is, so one the reader could not give back unchanged
(a line break, surrounding blanks or quotes, a NUL) is refused at write time.
Credential names are environment variable names. No value is ever put in an
error, a repr or a log.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.localstate import privatefile
from npa_infra.projects.models import valid_alias

if TYPE_CHECKING:  # pydantic is imported where a value is read, not to plan (issue 19)
    from pydantic import SecretStr

__all__ = ["NAME", "check_value", "path_for", "read_pairs", "valid_name", "write"]

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_VALUE_BYTES = 32 * 1024
_QUOTES = ("'", '"')


def valid_name(name: str) -> bool:
    """Whether ``name`` is an environment variable name (what ``--secret-env`` passes)."""
    return bool(NAME.match(name))


def path_for(alias: str, env: Mapping[str, str]) -> Path:
    """Raises ConfigError: ``alias`` cannot name a file."""
    if not valid_alias(alias):
        raise ConfigError(
            f"project alias {alias!r} is not usable",
            remedy="use 1-96 characters: a letter or digit, then letters, digits, '.', '_' or '-'",
        )
    return npa_config.npa_home(env) / "credentials" / "projects" / f"{alias}.env"


def check_value(name: str, value: SecretStr) -> None:
    """Raises ConfigError (naming ``name``, never the value) when the file cannot hold it."""
    text = value.get_secret_value()
    problem = ""
    if not text:
        problem = "is empty"
    elif len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        problem = f"is larger than {MAX_VALUE_BYTES} bytes"
    elif any(c in text for c in "\n\r\0"):
        problem = "holds a line break or a NUL"
    elif text != text.strip() or text.startswith(_QUOTES) or text.endswith(_QUOTES):
        problem = "starts or ends with a blank or a quote"
    if problem:
        raise ConfigError(
            f"the value given for credential {name} {problem}",
            remedy=f"give {name} its value without surrounding blanks, quotes or line breaks",
            details={"credential": name},
        )


def read_pairs(path: Path) -> dict[str, str]:
    """``NAME=value`` pairs of a credentials file; none when it does not exist.

    Blank lines, ``#`` comments and lines without ``=`` are skipped; ``export``
    and surrounding quotes are accepted.

    Raises:
        ConfigError: the file is a symlink, not a regular file, or readable by others.
    """
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


def write(alias: str, env: Mapping[str, str], values: Mapping[str, SecretStr]) -> Path:
    """Merge ``values`` into ``alias``'s credential file (atomic, 0600 in 0700). Returns its path.

    Raises:
        ConfigError: a name or a value the file cannot hold, an unsafe existing file, or
            the directory or the file cannot be written.
    """
    path = path_for(alias, env)
    for name, value in values.items():
        if not valid_name(name):
            raise ConfigError(
                f"{name!r} is not a credential name",
                remedy="use an environment variable name: letters, digits and '_'",
            )
        check_value(name, value)
    try:
        with privatefile.locked(path):
            merged = {**read_pairs(path), **{k: v.get_secret_value() for k, v in values.items()}}
            text = "".join(f"{name}={merged[name]}\n" for name in sorted(merged))
            os.chmod(path.parent, 0o700)
            privatefile.replace(path, text.encode("utf-8"))
    except OSError as exc:  # never a value in the message: only the path and the reason
        raise ConfigError(
            f"cannot write {path}: {exc.strerror}", remedy=f"make {path.parent} writable by you"
        ) from exc
    return path
