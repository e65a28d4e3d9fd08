"""Fake SkyPilot installs on disk, in each layout the drift gate reads.

The drift gate reads the versions a ``sky`` binary imports from the dist-info
metadata on its interpreter's import path (``npa_infra.skypilot.venvmeta``,
``pylayout``); this writes exactly those files:

- ``make_venv``: a venv (``pyvenv.cfg``, ``bin/python`` linked to this
  interpreter) whose ``bin/sky`` is the SkyPilot simulator's wrapper, so a
  venv whose pins hold can also run a live submit; ``simulator`` puts one
  beside a test's wrapper, the install every test that runs the simulator
  through the real gate uses;
- ``make_conda``, ``make_system``, ``make_user``: a conda environment, a
  Debian system Python with ``dist-packages``, and a ``pip install --user``
  on a system Python. Their interpreter is a stub file (the gate never runs
  it), so they serve the gate's own tests only.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.support.skysim import harness

__all__ = [
    "DRIFTED_FASTAPI",
    "DRIFTED_KUBERNETES",
    "GOOD",
    "age",
    "install",
    "make_conda",
    "make_system",
    "make_user",
    "make_venv",
    "set_version",
    "simulator",
]

GOOD: Mapping[str, str] = {
    "skypilot": "0.12.2",
    "kubernetes": "35.0.0",
    "fastapi": "0.119.1",
    "click": "8.1.8",
}
DRIFTED_KUBERNETES = {**GOOD, "kubernetes": "37.0.0"}
DRIFTED_FASTAPI = {**GOOD, "fastapi": "0.120.0"}
PYTHON = "3.11.7"
XY = "3.11"
_REAL_PYTHON = Path(os.path.realpath(sys.executable))


def _site(root: Path) -> Path:
    return root / "lib" / f"python{XY}" / "site-packages"


def install(site: Path, name: str, version: str | None) -> None:
    """Install ``name`` at ``version`` in ``site`` (None: uninstall), replacing any dist-info."""
    for old in site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    if version is None:
        return
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: fake\n\n"
        f"A long description that is never read. Version: 999\n",
        encoding="utf-8",
    )
    (info / "RECORD").write_text("", encoding="utf-8")


def _install_all(site: Path, versions: Mapping[str, str | None]) -> None:
    site.mkdir(parents=True, exist_ok=True)
    (site / "unrelated-1.0.dist-info").mkdir(exist_ok=True)
    for name, version in versions.items():
        install(site, name, version)


def set_version(root: Path, name: str, version: str | None) -> None:
    """``install`` into the venv at ``root``."""
    install(_site(root), name, version)


def age(root: Path, seconds: float = 3600.0) -> None:
    """Move every mtime under ``root`` into the past (a fresh write is not cached: venvmeta)."""
    past = os.stat(root).st_mtime - seconds
    for directory, names, files in os.walk(root):
        for name in (*files, *names):
            os.utime(Path(directory) / name, (past, past), follow_symlinks=False)
        os.utime(directory, (past, past))


def make_venv(
    root: Path, versions: Mapping[str, str | None] = GOOD, *, trampoline: bool = False
) -> Path:
    """A venv at ``root`` with ``versions`` installed; returns its ``bin/sky`` (the simulator).

    ``bin/python`` links to this interpreter, as a real venv's does, so the
    simulator runs; ``trampoline`` writes pip's ``/bin/sh`` form of the shebang.
    """
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(_REAL_PYTHON)
    (root / "pyvenv.cfg").write_text(
        f"home = {_REAL_PYTHON.parent}\ninclude-system-site-packages = false\nversion = {PYTHON}\n",
        encoding="utf-8",
    )
    _install_all(_site(root), versions)
    sky = harness.write_wrapper(
        root / "bin", interpreter=root / "bin" / "python", flags="-I", trampoline=trampoline
    )
    age(root)
    return sky


def simulator(directory: Path, name: str = "sky") -> Path:
    """``<directory>/<name>``, the simulator run by a healthy venv's python (the pins hold)."""
    venv = directory / ".skysim-venv"
    make_venv(venv)
    return harness.write_wrapper(directory, name, interpreter=venv / "bin" / "python", flags="-I")


# -- layouts the gate reads but nothing runs -------------------------------------------
def _prefix(root: Path) -> Path:
    """A Python prefix: ``bin/python3.11`` (a stub) and its standard library's landmark."""
    (root / "bin").mkdir(parents=True)
    stub = root / "bin" / f"python{XY}"
    stub.write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    stub.chmod(0o755)
    (root / "bin" / "python3").symlink_to(stub.name)
    (root / "bin" / "python").symlink_to("python3")
    (root / "lib" / f"python{XY}").mkdir(parents=True)
    (root / "lib" / f"python{XY}" / "os.py").write_text("", encoding="utf-8")
    return stub


def _console_script(path: Path, interpreter: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{interpreter}\nimport sys\nfrom sky.client.cli.command import cli\nsys.exit(cli())\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def make_conda(
    root: Path, versions: Mapping[str, str | None] = GOOD, *, shebang: str | None = None
) -> Path:
    """A conda environment (``conda-meta/``) with ``versions`` in its site-packages.

    ``shebang`` replaces the script's interpreter line (conda writes
    ``/usr/bin/env python`` for a prefix too long for the kernel).
    """
    _prefix(root)
    (root / "conda-meta").mkdir()
    _install_all(_site(root), versions)
    sky = _console_script(root / "bin" / "sky", shebang or str(root / "bin" / "python"))
    age(root)
    return sky


def make_system(root: Path, versions: Mapping[str, str | None] = GOOD) -> Path:
    """A Debian system Python at ``root`` (its ``/usr``): apt's ``lib/python3/dist-packages``
    and ``sudo pip``'s ``local/lib/python3.11/dist-packages``, which holds ``versions``."""
    _prefix(root)
    (root / "lib" / "python3" / "dist-packages").mkdir(parents=True)
    _install_all(root / "local" / "lib" / f"python{XY}" / "dist-packages", versions)
    sky = _console_script(root / "local" / "bin" / "sky", str(root / "bin" / "python3"))
    age(root)
    return sky


def make_user(prefix: Path, userbase: Path, versions: Mapping[str, str | None] = GOOD) -> Path:
    """``pip install --user`` of ``versions`` into ``userbase`` (``~/.local``) on the plain
    Python at ``prefix``, whose own site-packages holds no skypilot."""
    _prefix(prefix)
    _install_all(_site(prefix), {})
    _install_all(_site(userbase), versions)
    sky = _console_script(userbase / "bin" / "sky", str(prefix / "bin" / f"python{XY}"))
    age(prefix)
    age(userbase)
    return sky
