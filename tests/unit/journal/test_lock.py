"""The per-run lock: one holder per run, named when another process is refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError, InvariantError, RunLockedError, UsageError
from npa_infra.journal.lock import RunLock, lock_path

REPO = Path(__file__).resolve().parents[3]
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z

_HOLDER = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from npa_infra.journal.lock import RunLock
lock = RunLock(Path(sys.argv[1]), None, "r1", argv=["npa", "submit", "x.yaml"], now=1700000000.0)
lock.acquire()
print("held", flush=True)
if sys.argv[2] == "die":
    os.kill(os.getpid(), 9)
sys.stdin.readline()
lock.release()
print("released", flush=True)
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _lock(home: Path, stack: str | None = None, run_id: str = "r1") -> RunLock:
    return RunLock(home, stack, run_id, argv=["npa", "workflow", "submit"], now=NOW)


def _holder(home: Path, mode: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(home), mode, str(REPO)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_acquire_creates_private_dirs_and_file_with_holder_details(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with _lock(home, "dev") as lock:
        assert lock.held
        assert lock.path == home / "locks" / "dev" / "r1.lock"
        assert [_mode(p) for p in (home, home / "locks", lock.path.parent)] == [0o700] * 3
        assert _mode(lock.path) == 0o600
        details = json.loads(lock.path.read_text())
    assert details == {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "argv": ["npa", "workflow", "submit"],
        "run_id": "r1",
        "stack": "dev",
        "acquired_at": NOW,
    }
    assert not lock.held
    assert lock.path.exists()  # never deleted: see lock.py
    assert lock.path.read_text() == ""


def test_lock_path_default_stack_and_invalid_names(tmp_path: Path) -> None:
    assert lock_path(tmp_path, None, "r1") == tmp_path / "locks" / "default" / "r1.lock"
    for stack, run_id in ((None, ""), (None, ".."), (None, "a/b"), ("../x", "r1"), ("..", "r")):
        with pytest.raises(UsageError):
            RunLock(tmp_path, stack, run_id, argv=[], now=NOW)
    assert list(tmp_path.iterdir()) == []  # validation only: no I/O


def test_argv_credential_values_masked(tmp_path: Path) -> None:
    argv = ["npa", "--token", "abc", "--kubeconfig=/k", "--secret-env", "HF_TOKEN", "x"]
    with RunLock(tmp_path, None, "r1", argv=argv, now=NOW) as lock:
        stored = json.loads(lock.path.read_text())["argv"]
    assert stored == ["npa", "--token", "***", "--kubeconfig=***", "--secret-env", "HF_TOKEN", "x"]


def test_acquire_held_by_other_process_names_holder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    child = _holder(home, "wait")
    try:
        with pytest.raises(RunLockedError) as info:
            _lock(home).acquire()
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
    out, _ = child.communicate()
    assert out == "released\n" and child.returncode == 0
    error = info.value
    assert error.message == (
        f"run r1 is being submitted by pid {child.pid} on {socket.gethostname()} "
        "since 2023-11-14T22:13:20Z"
    )
    assert "npa workbench workflow status r1" in error.remedy
    assert "cannot launch twice" in error.remedy
    assert error.details["pid"] == child.pid
    assert error.details["argv"] == ["npa", "submit", "x.yaml"]
    with _lock(home) as lock:  # released by the holder: ours now
        assert lock.held


def test_acquire_after_holder_killed_succeeds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    child = _holder(home, "die")
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    assert json.loads(lock_path(home, None, "r1").read_text())["pid"] == child.pid
    with _lock(home) as lock:  # the kernel dropped the dead holder's flock
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()


def test_second_lock_in_same_process_refused(tmp_path: Path) -> None:
    with _lock(tmp_path), pytest.raises(RunLockedError) as info:
        _lock(tmp_path).acquire()
    assert info.value.details["pid"] == os.getpid()
    with _lock(tmp_path, run_id="r2"):  # another run is independent
        pass


def test_release_is_idempotent_and_lock_reacquirable(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    lock.release()
    lock.acquire()
    with pytest.raises(InvariantError, match="already held"):
        lock.acquire()
    lock.release()
    lock.release()
    lock.acquire()
    lock.release()


def test_acquire_symlinked_lock_file_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("keep")
    path = lock_path(tmp_path / "home", None, "r1")
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(ConfigError, match="symlink") as info:
        _lock(tmp_path / "home").acquire()
    assert f"rm {path}" in info.value.remedy
    assert target.read_text() == "keep"


def test_acquire_symlinked_stack_dir_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "home" / "locks").mkdir(parents=True)
    (tmp_path / "home" / "locks" / "default").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="not a directory owned by you"):
        _lock(tmp_path / "home").acquire()
    assert list(elsewhere.iterdir()) == []


def test_acquire_non_regular_lock_file_refused(tmp_path: Path) -> None:
    path = lock_path(tmp_path, None, "r1")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="not a regular file"):
        _lock(tmp_path).acquire()


def test_acquire_loose_modes_tightened(tmp_path: Path) -> None:
    path = lock_path(tmp_path, None, "r1")
    path.parent.mkdir(parents=True, mode=0o755)
    path.parent.chmod(0o755)
    path.touch(mode=0o644)
    with _lock(tmp_path):
        assert (_mode(path.parent), _mode(path)) == (0o700, 0o600)


def test_acquire_foreign_owned_lock_file_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    path = lock_path(tmp_path, None, "r1")
    path.parent.mkdir(parents=True)
    path.touch()
    os.chown(path, 4242, 4242)
    with pytest.raises(ConfigError, match="owned by you"):
        _lock(tmp_path).acquire()


def test_constructor_does_no_io(tmp_path: Path) -> None:
    _lock(tmp_path / "home")
    assert not (tmp_path / "home").exists()
