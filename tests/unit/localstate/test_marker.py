"""npa's marker in the directories it creates (localstate.marker): written when npa makes
the directory or finds it empty, never into a directory holding anything else; only a
private regular file of the right content counts."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from npa_infra.localstate import marker


def test_make_dir_new_directory_is_private_and_marked(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        marker.make_dir(tmp_path / "a" / "run", "task_yaml")
    finally:
        os.umask(old)
    run = tmp_path / "a" / "run"
    assert marker.holds(run)
    assert (
        stat.S_IMODE(run.stat().st_mode) == stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    )
    assert stat.S_IMODE((run / marker.MARKER).stat().st_mode) == 0o600
    body = json.loads((run / marker.MARKER).read_text(encoding="utf-8"))
    assert body == {"schema": marker.SCHEMA, "kind": "task_yaml"}


def test_make_dir_existing_empty_directory_is_marked(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    marker.make_dir(tmp_path / "d", "tick_files")
    assert marker.holds(tmp_path / "d")


def test_make_dir_directory_holding_user_files_is_never_marked(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine", encoding="utf-8")
    marker.make_dir(tmp_path / "d", "tick_files")
    assert not marker.holds(tmp_path / "d")
    assert sorted(os.listdir(tmp_path / "d")) == ["notes.txt"]


@pytest.mark.parametrize(
    "plant",
    ["symlinked-marker", "wrong-content", "not-json", "directory", "symlinked-dir"],
)
def test_holds_only_a_private_regular_file_of_the_right_content(tmp_path: Path, plant: str) -> None:
    d = tmp_path / "d"
    d.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    marker.mark(elsewhere, "state_dir")
    target = d
    if plant == "symlinked-marker":
        (d / marker.MARKER).symlink_to(elsewhere / marker.MARKER)
    elif plant == "wrong-content":
        (d / marker.MARKER).write_text('{"schema": "other"}', encoding="utf-8")
    elif plant == "not-json":
        (d / marker.MARKER).write_text("npa", encoding="utf-8")
    elif plant == "directory":
        (d / marker.MARKER).mkdir()
    else:
        target = tmp_path / "link"
        target.symlink_to(elsewhere)
    assert not marker.holds(target)
    assert marker.holds(elsewhere)
