"""Listing and fingerprinting real checkouts on disk: git and the walk fallback agree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError
from npa_infra.source import tree

GOLDEN = "286d5321822c1471faa88bbfb4672c2ad79e8238c4d4f8b3f5a415d1c3f43e87"
REPO = Path(__file__).resolve().parents[3]


def write_tiny(root: Path) -> Path:
    """The tree of ``test_fingerprint.TINY`` on disk."""
    (root / "bin").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a.txt").write_bytes(b"hello\n")
    (root / "b" / "c").write_bytes(b"")
    script = root / "bin" / "run.sh"
    script.write_bytes(b"#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return root


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@e", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def git_init(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    return root


def test_scan_walk_tiny_tree_golden(tmp_path: Path) -> None:
    scanned = tree.scan(write_tiny(tmp_path / "t"))

    assert scanned.listing == "walk"
    assert scanned.fingerprint == GOLDEN
    assert [f.path for f in scanned.files] == ["a.txt", "b/c", "bin/run.sh"]
    assert [f.executable for f in scanned.files] == [False, False, True]
    assert (scanned.file_count, scanned.total_bytes) == (3, 6 + 0 + 18)


def test_scan_git_tracked_and_untracked_same_golden(tmp_path: Path) -> None:
    root = git_init(write_tiny(tmp_path / "t"))
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "one")  # b/c and bin/run.sh stay untracked

    scanned = tree.scan(root)

    assert scanned.listing == "git"
    assert scanned.fingerprint == GOLDEN


def test_scan_git_ignored_untracked_excluded_tracked_kept(tmp_path: Path) -> None:
    root = git_init(write_tiny(tmp_path / "t"))
    (root / ".gitignore").write_text("*.tmp\nforced.dat\n")
    (root / "scratch.tmp").write_text("ignored")
    (root / "forced.dat").write_text("tracked although ignored")
    git(root, "add", "-f", "forced.dat")

    paths = [f.path for f in tree.scan(root).files]

    assert "scratch.tmp" not in paths
    assert "forced.dat" in paths
    assert ".gitignore" in paths


def test_scan_git_tracked_sensitive_file_never_selected(tmp_path: Path) -> None:
    root = git_init(write_tiny(tmp_path / "t"))
    (root / ".env").write_text("TOKEN=x")
    (root / "tls").mkdir()
    (root / "tls" / "server.key").write_text("-----BEGIN PRIVATE KEY-----")
    git(root, "add", ".env", "tls/server.key")

    scanned = tree.scan(root)

    assert scanned.fingerprint == GOLDEN
    assert scanned.excluded == {"sensitive": 2}


@pytest.mark.parametrize("use_git", [False, True], ids=["walk", "git"])
def test_scan_symlinks_and_symlinked_dirs_excluded(tmp_path: Path, use_git: bool) -> None:
    root = write_tiny(tmp_path / "t")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the tree")
    (root / "link.txt").symlink_to(root / "a.txt")
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    if use_git:
        git_init(root)
        git(root, "add", "link.txt", "linked-dir")  # git tracks the links themselves

    scanned = tree.scan(root)

    assert scanned.fingerprint == GOLDEN
    assert scanned.excluded.get("symlink") == (2 if use_git else 1)


def test_scan_fifo_excluded_without_blocking(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "t")
    os.mkfifo(root / "pipe")

    scanned = tree.scan(root)

    assert scanned.fingerprint == GOLDEN
    assert scanned.excluded == {"not_regular": 1}


def test_scan_tracked_file_deleted_in_work_tree_missing(tmp_path: Path) -> None:
    root = git_init(write_tiny(tmp_path / "t"))
    (root / "gone.txt").write_text("x")
    git(root, "add", "gone.txt")
    (root / "gone.txt").unlink()

    scanned = tree.scan(root)

    assert scanned.fingerprint == GOLDEN
    assert scanned.excluded == {"missing": 1}


def test_scan_exec_bit_changes_fingerprint_mtime_does_not(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "t")
    os.utime(root / "a.txt", (1, 1))
    assert tree.scan(root).fingerprint == GOLDEN

    (root / "a.txt").chmod(0o755)

    assert tree.scan(root).fingerprint != GOLDEN


def test_scan_git_dir_in_environment_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = git_init(tmp_path / "other")
    (other / "elsewhere.txt").write_text("x")
    git(other, "add", "elsewhere.txt")
    root = git_init(write_tiny(tmp_path / "t"))
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))

    assert tree.scan(root).fingerprint == GOLDEN


def test_scan_git_missing_falls_back_to_walk(tmp_path: Path) -> None:
    scanned = tree.scan(write_tiny(tmp_path / "t"), git=str(tmp_path / "no-such-git"))

    assert (scanned.listing, scanned.fingerprint) == ("walk", GOLDEN)


def test_scan_git_other_failure_config_error_not_walk(tmp_path: Path) -> None:
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\necho 'fatal: detected dubious ownership' >&2\nexit 128\n")
    fake.chmod(0o755)

    with pytest.raises(ConfigError, match="dubious ownership") as caught:
        tree.scan(write_tiny(tmp_path / "t"), git=str(fake))

    assert "safe.directory" in caught.value.remedy


def test_scan_not_a_directory_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        tree.scan(tmp_path / "absent")


def test_scan_non_utf8_name_config_error(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "t")
    with open(os.path.join(os.fsencode(root), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")

    with pytest.raises(ConfigError, match="not UTF-8"):
        tree.scan(root)


def test_changed_files_detects_content_and_mode_changes(tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "t")
    scanned = tree.scan(root)
    assert tree.changed_files(root, scanned.files) == []

    (root / "a.txt").write_bytes(b"hello again\n")
    (root / "bin" / "run.sh").chmod(0o644)
    (root / "b" / "c").unlink()

    assert tree.changed_files(root, scanned.files) == ["a.txt", "b/c", "bin/run.sh"]


def test_scan_own_checkout_keeps_every_python_module() -> None:
    scanned = tree.scan(REPO)
    paths = {f.path for f in scanned.files}

    assert "npa_infra/kube/kubeconfig.py" in paths
    assert "npa_infra/workflow/target/credentials.py" in paths
    assert "npa_infra/source/fingerprint.py" in paths
    assert not any(p.endswith((".pem", ".key")) for p in paths)
