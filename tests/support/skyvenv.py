"""A fake SkyPilot venv on disk: ``pyvenv.cfg``, dist-info ``METADATA`` files, a ``bin/sky``.

The drift gate reads a venv's installed versions from its dist-info metadata
(``npa_infra.skypilot.venvmeta``); this writes exactly those files, with the
SkyPilot simulator's wrapper as ``bin/sky`` so that a venv whose pins hold
can also run a live submit.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from tests.support.skysim import harness

__all__ = ["DRIFTED_FASTAPI", "DRIFTED_KUBERNETES", "GOOD", "age", "make_venv", "set_version"]

GOOD: Mapping[str, str] = {
    "skypilot": "0.12.2",
    "kubernetes": "35.0.0",
    "fastapi": "0.119.1",
    "click": "8.1.8",
}
DRIFTED_KUBERNETES = {**GOOD, "kubernetes": "37.0.0"}
DRIFTED_FASTAPI = {**GOOD, "fastapi": "0.120.0"}
PYTHON = "3.11.7"


def _site(root: Path) -> Path:
    return root / "lib" / "python3.11" / "site-packages"


def set_version(root: Path, name: str, version: str | None) -> None:
    """Install ``name`` at ``version`` (None: uninstall), replacing any dist-info of it."""
    site = _site(root)
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


def age(root: Path, seconds: float = 3600.0) -> None:
    """Move every mtime of the venv into the past (a fresh write is not cached: venvmeta)."""
    past = os.stat(root).st_mtime - seconds
    for directory, names, files in os.walk(root):
        for name in (*files, *names):
            os.utime(Path(directory) / name, (past, past), follow_symlinks=False)
        os.utime(directory, (past, past))


def make_venv(root: Path, versions: Mapping[str, str | None] = GOOD) -> Path:
    """A venv at ``root`` with ``versions`` installed; returns its ``bin/sky`` (the simulator)."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {PYTHON}\n",
        encoding="utf-8",
    )
    _site(root).mkdir(parents=True)
    (_site(root) / "unrelated-1.0.dist-info").mkdir()
    for name, version in versions.items():
        set_version(root, name, version)
    sky = harness.write_wrapper(root / "bin")
    age(root)
    return sky
