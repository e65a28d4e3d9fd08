"""An npa home that cannot be written (read-only, or full) is a clear error, never a crash.

Each case runs ``npa`` in a private mount namespace (``unshare --mount``) on a real
file system: a read-only bind mount (EROFS; the tests run as root, whom a chmod
would not stop) or a tiny full tmpfs (ENOSPC). The command exits 1 with
``Error: cannot write <path>: <why> (<errno>)`` and a hint, and no traceback or
"unexpected" internal error.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLAN_ONLY = [
    "workbench",
    "workflow",
    "submit",
    str(ROOT / "workflows/main/sim2real.yaml"),
    "--plan-only",
    "--no-preflight-images",
]


def _in_private_mounts(setup: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``setup`` (mount commands), then ``npa args`` with NPA_HOME=home, in a mount namespace."""
    assert shutil.which("unshare"), "util-linux's unshare is needed (make ns-tools)"
    npa = shlex.join([sys.executable, "-m", "npa_infra", *args])
    script = f"set -e; {setup}; NPA_HOME={shlex.quote(str(home))} exec {npa}"
    env = {k: v for k, v in os.environ.items() if k != "NPA_DEBUG"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def _read_only(directory: Path) -> str:
    quoted = shlex.quote(str(directory))
    return f"mount --bind {quoted} {quoted}; mount -o remount,bind,ro {quoted}"


def _full(directory: Path) -> str:
    quoted = shlex.quote(str(directory))
    pad = shlex.quote(str(directory / "pad"))
    # a one-page tmpfs, filled: the first byte npa writes there has no room
    return f"mount -t tmpfs -o size=4k tmpfs {quoted}; head -c 4096 /dev/zero > {pad} || true"


def _assert_clear(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert needle in done.stderr, done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "Hint: " in done.stderr


@pytest.mark.parametrize("exists", [True, False], ids=["home-exists", "home-to-create"])
def test_home_read_only_plan_only_names_path_and_erofs(tmp_path: Path, exists: bool) -> None:
    home = tmp_path / "mnt" / "home"
    if exists:
        home.mkdir(parents=True)
    else:
        home.parent.mkdir()
    done = _in_private_mounts(_read_only(home.parent), home, *PLAN_ONLY)
    _assert_clear(done, f"cannot write {home}")
    assert "read-only (EROFS)" in done.stderr


def test_home_read_only_json_is_one_config_error_document(tmp_path: Path) -> None:
    home = tmp_path / "mnt" / "home"
    home.mkdir(parents=True)
    done = _in_private_mounts(_read_only(home.parent), home, *PLAN_ONLY, "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert (error["category"], error["details"]["errno"]) == ("config", "EROFS")
    assert error["details"]["path"].startswith(str(home))


def test_home_full_plan_only_names_home_and_enospc(tmp_path: Path) -> None:
    mount = tmp_path / "full"
    mount.mkdir()
    done = _in_private_mounts(_full(mount), mount / "home", *PLAN_ONLY)
    _assert_clear(done, str(mount / "home"))
    assert "no space left on the device (ENOSPC)" in done.stderr


def test_home_other_os_error_stays_internal() -> None:
    """Only an unwritable or full path is the environment: any other OSError is a bug."""
    from npa_infra.cli import output

    assert output.environment_error(OSError(5, "Input/output error", "/x")) is None
    assert output.environment_error(PermissionError(13, "Permission denied")) is None  # no path
