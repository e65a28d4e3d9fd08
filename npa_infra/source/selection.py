"""Which files of a checkout are source: pure rules over relative posix paths and modes.

The candidates come from ``git ls-files -z --cached --others --exclude-standard``
(or a sorted walk); these rules then drop, in this order (runtime-reference.md §6,
plus the broader sensitive list of issue 7):

1. ``invalid``: an empty, absolute or non-normal path (``.``, ``..``, ``//``).
2. ``reserved``: ``.npa-source.json`` at the root, the marker's own key.
3. ``sensitive``, always, whatever git says (names compared case-insensitively):
   - a directory ``.aws/``, ``.kube/``, ``.ssh/``, ``.gnupg/`` or ``terraform.tfstate.d/``
     anywhere in the path;
   - suffixes ``.pem .key .p12 .pfx .p8 .pkcs12 .crt .cer .der .jks .keystore .ppk``
     (keys and certificates), ``.tfstate .tfstate.backup .tfvars .tfvars.json``
     (Terraform state and variables), ``.kubeconfig``, ``.env``; any ``.tfstate.``
     inside a name (numbered state backups);
   - names ``.env`` and ``.env*`` (``.env.local``, ``.envrc``), ``auth.env``,
     ``credentials`` and ``credentials.{yaml,yml,json,toml,ini,cfg,env,csv}``,
     ``kubeconfig`` and ``kubeconfig.{yaml,yml,json}``, ``id_{rsa,dsa,ecdsa,ed25519}`` (and their
     ``_sk`` forms), ``.netrc``, ``_netrc``, ``.pgpass``, ``.git-credentials``,
     ``.pypirc``, ``.dockercfg``.
4. ``excluded_dir``: a directory ``.git``, ``.mypy_cache``, ``.pytest_cache``,
   ``.ruff_cache``, ``.terraform``, ``.tox``, ``.venv``, ``__pycache__``, ``build``,
   ``dist``, ``node_modules``, ``venv`` or ``*.egg-info`` anywhere in the path.
5. ``excluded_suffix``: ``.pyc``, ``.pyo``, ``.pyd``, ``.so``, ``.log``.
6. ``symlink``: the path, or a directory on it, is a symbolic link.
7. ``not_regular``: anything but a regular file (a FIFO, a socket, a submodule).

The sensitive list is a superset of the reference's: a tree holding one of the
extra names fingerprints differently from the reference, every other tree alike.
Source files merely named after what they handle (``credentials.py``,
``kubeconfig.py``) stay in: only data-file names and extensions are matched.
"""

from __future__ import annotations

import functools
import stat
from enum import StrEnum

__all__ = [
    "EXCLUDED_DIRS",
    "EXCLUDED_SUFFIXES",
    "MARKER_NAME",
    "SENSITIVE_DIRS",
    "SENSITIVE_NAMES",
    "SENSITIVE_SUFFIXES",
    "Exclusion",
    "exclusion",
    "name_exclusion",
]

MARKER_NAME = ".npa-source.json"

EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".terraform",
        ".tox",
        ".venv",
        "__pycache__",
        "build",
        "dist",
        "node_modules",
        "venv",
    }
)
EXCLUDED_DIR_SUFFIXES = (".egg-info",)
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".pyd", ".so", ".log")

SENSITIVE_DIRS = frozenset({".aws", ".kube", ".ssh", ".gnupg", "terraform.tfstate.d"})
SENSITIVE_SUFFIXES = (
    # runtime-reference.md §6
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".tfstate",
    ".tfstate.backup",
    ".tfvars",
    ".kubeconfig",
    # issue 7: keys, certificates, Terraform variables, env files
    ".p8",
    ".pkcs12",
    ".crt",
    ".cer",
    ".der",
    ".jks",
    ".keystore",
    ".ppk",
    ".tfvars.json",
    ".env",
)
SENSITIVE_NAMES = frozenset(
    {
        # runtime-reference.md §6
        ".env",
        "auth.env",
        "credentials.yaml",
        "credentials.yml",
        "credentials.json",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        # issue 7: credentials files, kubeconfigs, private keys
        "credentials",
        "credentials.toml",
        "credentials.ini",
        "credentials.cfg",
        "credentials.env",
        "credentials.csv",
        "kubeconfig",
        "kubeconfig.yaml",
        "kubeconfig.yml",
        "kubeconfig.json",
        "id_ecdsa_sk",
        "id_ed25519_sk",
        ".netrc",
        "_netrc",
        ".pgpass",
        ".git-credentials",
        ".pypirc",
        ".dockercfg",
    }
)
_SENSITIVE_PREFIX = ".env"  # .env.local, .envrc
_SENSITIVE_INFIX = ".tfstate."  # terraform.tfstate.1700000000.backup


class Exclusion(StrEnum):
    """Why a candidate path is not source; the first rule that applies wins."""

    INVALID = "invalid"
    RESERVED = "reserved"
    SENSITIVE = "sensitive"
    EXCLUDED_DIR = "excluded_dir"
    EXCLUDED_SUFFIX = "excluded_suffix"
    SYMLINK = "symlink"
    NOT_REGULAR = "not_regular"


def _sensitive_name(name: str) -> bool:
    lower = name.lower()
    return (
        lower in SENSITIVE_NAMES
        or lower.endswith(SENSITIVE_SUFFIXES)
        or lower.startswith(_SENSITIVE_PREFIX)
        or _SENSITIVE_INFIX in lower
    )


@functools.lru_cache(maxsize=8192)
def _directory_exclusion(directory: str) -> Exclusion | None:
    """Rules 1, 3 and 4 for the directories of a path (cached: a tree repeats them)."""
    parts = directory.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return Exclusion.INVALID
    if any(d.lower() in SENSITIVE_DIRS for d in parts):
        return Exclusion.SENSITIVE
    if any(d in EXCLUDED_DIRS or d.endswith(EXCLUDED_DIR_SUFFIXES) for d in parts):
        return Exclusion.EXCLUDED_DIR
    return None


def name_exclusion(path: str) -> Exclusion | None:
    """The rule (1-5) that drops ``path`` by its name alone, or ``None`` when it may be source.

    ``path`` is relative and posix (``a/b/c.py``), as git prints it.
    """
    directory, _, name = path.rpartition("/")
    if name in ("", ".", "..") or path.startswith("/"):
        return Exclusion.INVALID
    if path == MARKER_NAME:
        return Exclusion.RESERVED
    by_directory = _directory_exclusion(directory) if directory else None
    if by_directory is Exclusion.INVALID:
        return by_directory
    if by_directory is Exclusion.SENSITIVE or _sensitive_name(name):
        return Exclusion.SENSITIVE
    if by_directory is not None:
        return by_directory
    if name.endswith(EXCLUDED_SUFFIXES):
        return Exclusion.EXCLUDED_SUFFIX
    return None


def exclusion(path: str, mode: int, *, symlinked_parent: bool = False) -> Exclusion | None:
    """Every rule: the name rules, then the file type from ``mode`` (an ``lstat`` mode).

    ``symlinked_parent`` says a directory on the path is a symbolic link.
    """
    by_name = name_exclusion(path)
    if by_name is not None:
        return by_name
    if symlinked_parent or stat.S_ISLNK(mode):
        return Exclusion.SYMLINK
    if not stat.S_ISREG(mode):
        return Exclusion.NOT_REGULAR
    return None
