"""Which directory a project's ``--state-dir`` may name (projects.statedir, issue 24)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.errors import ConfigError, UsageError
from npa_infra.localstate import marker
from npa_infra.projects import statedir


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("state", "relative"),
        ("./state", "relative"),
        ("../x", "relative"),
        ("~/x", "'~'"),
        ("~x", "'~'"),
        ("/tmp/a\nb", "control character"),
        ("/tmp/a\tb", "control character"),
        ("/proc/self", "kernel view"),
        ("/proc", "kernel view"),
        ("/sys/kernel", "kernel view"),
        ("/dev/shm/x", "kernel view"),
        ("//proc/self", "kernel view"),
        ("/tmp/../proc/self", "kernel view"),
    ],
    ids=["empty", "blank", "relative", "dot", "dotdot", "tilde-slash", "tilde-user", "newline",
         "tab", "proc-self", "proc", "sys", "dev", "double-slash-proc", "dotdot-into-proc"],
)  # fmt: skip
def test_check_text_refuses_paths_that_name_no_one_directory(raw: str, why: str) -> None:
    with pytest.raises(UsageError) as info:
        statedir.check_text(raw)
    assert why in info.value.message
    assert info.value.exit_code == 64
    assert "\n" not in info.value.message.replace(repr(raw), "")  # one line, the text quoted


@pytest.mark.parametrize(
    ("raw", "normal"),
    [("/srv/npa/state", "/srv/npa/state"), ("//srv//x/../y/", "/srv/y"), ("/procfs", "/procfs")],
    ids=["plain", "normalised", "not-proc"],
)
def test_check_text_absolute_path_normalised(raw: str, normal: str) -> None:
    assert statedir.check_text(raw) == normal


@given(st.text(max_size=40))
def test_check_text_any_text_is_an_absolute_clean_path_or_a_usage_error(raw: str) -> None:
    try:
        normal = statedir.check_text(raw)
    except UsageError:
        return
    assert normal.startswith("/") and not normal.startswith("//")
    assert all(ord(c) >= 0x20 and ord(c) != 0x7F for c in normal)
    assert os.path.normpath(normal) == normal


def test_check_dir_absent_empty_marked_or_legacy_npa_state_is_accepted(tmp_path: Path) -> None:
    statedir.check_dir(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    statedir.check_dir(tmp_path / "empty")
    marker.make_dir(tmp_path / "marked", "state_dir")
    (tmp_path / "marked" / "user-id").write_text("npa-0123456789\n", encoding="utf-8")
    statedir.check_dir(tmp_path / "marked")
    (tmp_path / "legacy" / "sky-runtime").mkdir(parents=True)
    (tmp_path / "legacy" / "user-id").write_text("npa-a1b2c3d4e5\n", encoding="utf-8")
    statedir.check_dir(tmp_path / "legacy")


@pytest.mark.parametrize("plant", ["user-files", "symlink", "file", "foreign-user-id"])
def test_check_dir_refuses_what_npa_did_not_make(tmp_path: Path, plant: str) -> None:
    path = tmp_path / "state"
    if plant == "user-files":
        path.mkdir()
        (path / "thesis.tex").write_text("mine", encoding="utf-8")
    elif plant == "symlink":
        (tmp_path / "real").mkdir()
        path.symlink_to(tmp_path / "real")
    elif plant == "file":
        path.write_text("x", encoding="utf-8")
    else:
        path.mkdir()
        (path / "user-id").write_text("alice\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        statedir.check_dir(path)


def test_claim_creates_private_and_marks_and_marks_a_legacy_state(tmp_path: Path) -> None:
    statedir.claim(tmp_path / "new" / "state")
    assert marker.holds(tmp_path / "new" / "state")
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "user-id").write_text("npa-a1b2c3d4e5\n", encoding="utf-8")
    statedir.claim(tmp_path / "legacy")
    assert marker.holds(tmp_path / "legacy")
