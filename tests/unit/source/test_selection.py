"""The source selection rules (runtime-reference.md §6 plus issue 7's sensitive list)."""

from __future__ import annotations

import stat

import pytest

from npa_infra.source import selection
from npa_infra.source.selection import Exclusion

REGULAR = stat.S_IFREG | 0o644
EXECUTABLE = stat.S_IFREG | 0o755

SENSITIVE = [
    # runtime-reference.md §6 suffixes
    "certs/server.pem",
    "tls/server.key",
    "bundle.p12",
    "bundle.pfx",
    "infra/terraform.tfstate",
    "infra/terraform.tfstate.backup",
    "infra/prod.tfvars",
    "clusters/dev.kubeconfig",
    # §6 names
    ".env",
    "app/.env.production",
    "auth.env",
    "conf/credentials.yaml",
    "conf/credentials.yml",
    "conf/credentials.json",
    "home/id_rsa",
    "home/id_dsa",
    "home/id_ecdsa",
    "home/id_ed25519",
    # §6 directories
    ".aws/config",
    "deploy/.aws/credentials",
    ".kube/config",
    "x/.kube/cache/discovery.json",
    # issue 7: broader keys, certificates, env files, credentials, kubeconfigs, Terraform
    "certs/ca.crt",
    "certs/ca.cer",
    "certs/ca.der",
    "keys/apple.p8",
    "keys/store.pkcs12",
    "keys/release.jks",
    "keys/release.keystore",
    "keys/putty.ppk",
    ".envrc",
    "svc/prod.env",
    "credentials",
    "conf/credentials.toml",
    "conf/credentials.ini",
    "conf/credentials.cfg",
    "conf/credentials.env",
    "downloads/credentials.csv",
    "kubeconfig",
    "ops/kubeconfig.yaml",
    "ops/kubeconfig.yml",
    "ops/kubeconfig.json",
    "home/id_ed25519_sk",
    "home/id_ecdsa_sk",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".pypirc",
    ".dockercfg",
    "infra/vars.tfvars.json",
    "infra/terraform.tfstate.1700000000.backup",
    "infra/terraform.tfstate.d/prod/terraform.tfstate",
    ".ssh/config",
    ".gnupg/pubring.kbx",
    # case-insensitive
    "CERTS/SERVER.PEM",
    "Credentials.JSON",
    ".AWS/config",
]

EXCLUDED_DIR = [
    ".git/config",
    ".mypy_cache/3.11/x.json",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/CACHEDIR.TAG",
    ".terraform/providers/x",
    ".tox/py311/lib/x.py",
    ".venv/bin/python",
    "pkg/__pycache__/mod.cpython-311.pyc",
    "build/lib/pkg/mod.py",
    "dist/pkg-1.0.tar.gz",
    "web/node_modules/left-pad/index.js",
    "venv/lib/site.py",
    "npa_infra.egg-info/PKG-INFO",
    "src/pkg.egg-info/SOURCES.txt",
]

EXCLUDED_SUFFIX = ["pkg/mod.pyc", "pkg/mod.pyo", "pkg/ext.pyd", "pkg/ext.so", "run.log"]

KEPT = [
    "README.md",
    "npa_infra/workflow/target/credentials.py",
    "npa_infra/kube/kubeconfig.py",
    "tests/unit/kube/test_kubeconfig.py",
    "docs/keys.md",
    "environment.yml",
    "pkg/build.py",  # a file named like an excluded directory is not one
    "dist.py",
    "src/venv_tools.py",
    "monkey.keys",
    "a/b/c/d.txt",
    "Makefile",
    ".gitignore",
    "subdir/.npa-source.json",  # only the root one is reserved
]


@pytest.mark.parametrize("path", SENSITIVE, ids=SENSITIVE)
def test_name_exclusion_sensitive_path_sensitive(path: str) -> None:
    assert selection.name_exclusion(path) is Exclusion.SENSITIVE


@pytest.mark.parametrize("path", EXCLUDED_DIR, ids=EXCLUDED_DIR)
def test_name_exclusion_cache_or_build_dir_excluded_dir(path: str) -> None:
    assert selection.name_exclusion(path) is Exclusion.EXCLUDED_DIR


@pytest.mark.parametrize("path", EXCLUDED_SUFFIX, ids=EXCLUDED_SUFFIX)
def test_name_exclusion_compiled_or_log_excluded_suffix(path: str) -> None:
    assert selection.name_exclusion(path) is Exclusion.EXCLUDED_SUFFIX


@pytest.mark.parametrize("path", KEPT, ids=KEPT)
def test_name_exclusion_ordinary_source_kept(path: str) -> None:
    assert selection.name_exclusion(path) is None
    assert selection.exclusion(path, REGULAR) is None


@pytest.mark.parametrize(
    "path",
    ["", "/etc/passwd", "a//b", "./a", "a/../b", "a/."],
    ids=["empty", "absolute", "double-slash", "dot", "dotdot", "trailing-dot"],
)
def test_name_exclusion_non_normal_path_invalid(path: str) -> None:
    assert selection.name_exclusion(path) is Exclusion.INVALID


def test_name_exclusion_root_marker_reserved() -> None:
    assert selection.name_exclusion(selection.MARKER_NAME) is Exclusion.RESERVED


def test_name_exclusion_sensitive_wins_over_cache_dir() -> None:
    # A key inside a build directory is reported as sensitive: the stronger reason.
    assert selection.name_exclusion("build/tls/server.key") is Exclusion.SENSITIVE


@pytest.mark.parametrize(
    ("mode", "parent", "expected"),
    [
        (REGULAR, False, None),
        (EXECUTABLE, False, None),
        (stat.S_IFLNK | 0o777, False, Exclusion.SYMLINK),
        (REGULAR, True, Exclusion.SYMLINK),
        (stat.S_IFIFO | 0o644, False, Exclusion.NOT_REGULAR),
        (stat.S_IFSOCK | 0o644, False, Exclusion.NOT_REGULAR),
        (stat.S_IFDIR | 0o755, False, Exclusion.NOT_REGULAR),
    ],
    ids=["regular", "executable", "symlink", "symlinked-parent", "fifo", "socket", "directory"],
)
def test_exclusion_file_type_rules(mode: int, parent: bool, expected: Exclusion | None) -> None:
    assert selection.exclusion("pkg/mod.py", mode, symlinked_parent=parent) is expected


def test_exclusion_name_rule_before_file_type() -> None:
    assert selection.exclusion(".env", stat.S_IFLNK | 0o777) is Exclusion.SENSITIVE
