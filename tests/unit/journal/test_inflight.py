"""The in-flight records beside the journal: durable whole-file writes, and fail-closed reads.

A record that exists but cannot be read is one whose launch (or ``sky down``)
may still act: it is never read as "nothing in flight".
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from npa_infra.journal import files, inflight
from npa_infra.runs.children import ChildIdentity

LAUNCH = inflight.InflightLaunch(
    home="/h",
    logical_launch_id="npa-launch-r1-0-1",
    job_name="r1-00-train",
    launch_sequence=2,
    request_ids=("req-1",),
    child=ChildIdentity(pid=42, start_ticks=7, boot_id="b", host="h"),
)
UNKNOWN_LAUNCH = inflight.InflightLaunch(
    home="?", logical_launch_id="?", job_name="?", launch_sequence=1
)
UNKNOWN_DOWN = inflight.ControllerDown(controller="?", stack="?", pid=0, at=0.0)


def test_inflight_write_read_round_trip_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "r1.inflight.json"

    inflight.write(path, LAUNCH)

    assert inflight.read(path) == LAUNCH
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["r1.inflight.json"]  # no temporary left


def test_inflight_read_absent_none(tmp_path: Path) -> None:
    assert inflight.read(tmp_path / "none.json") is None
    assert inflight.controller_down(tmp_path) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"home": "/h", "launch_seq',  # torn
        b"[1, 2]",  # not an object
        b'{"home": "/h", "launch_sequence": "two"}',  # a field of the wrong type
        b'{"home": "/h", "request_ids": 5}',
        b"\xff\xfe",
    ],
    ids=["torn", "list", "bad-sequence", "bad-request-ids", "not-utf8"],
)
def test_inflight_read_unreadable_record_may_still_act(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "r1.inflight.json"
    path.write_bytes(body)

    assert inflight.read(path) == UNKNOWN_LAUNCH


@pytest.mark.parametrize(
    "body",
    [b'{"controller": "c", "pi', b'"down"', b'{"controller": "c", "pid": "many"}'],
    ids=["torn", "string", "bad-pid"],
)
def test_controller_down_unreadable_record_counts_as_under_way(tmp_path: Path, body: bytes) -> None:
    inflight.begin_controller_down(
        tmp_path, inflight.ControllerDown(controller="c", stack="s", pid=1, at=2.0)
    )
    (tmp_path / "npa-locks" / "controller-down.json").write_bytes(body)

    assert inflight.controller_down(tmp_path) == UNKNOWN_DOWN


def test_controller_down_begin_end(tmp_path: Path) -> None:
    down = inflight.ControllerDown(controller="sky-jobs-controller-1", stack="s", pid=9, at=3.0)

    inflight.begin_controller_down(tmp_path, down)
    assert inflight.controller_down(tmp_path) == down
    assert json.loads((tmp_path / "npa-locks" / "controller-down.json").read_text())["pid"] == 9

    inflight.end_controller_down(tmp_path)
    assert inflight.controller_down(tmp_path) is None


def test_replace_private_failed_replace_keeps_old_target_and_leaves_no_temporary(
    tmp_path: Path,
) -> None:
    target = tmp_path / "record"
    target.mkdir()  # renaming a file over a directory fails
    (target / "inside").write_text("old", encoding="utf-8")

    with pytest.raises(OSError):
        files.replace_private(target, b"new")

    assert (target / "inside").read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record"]


def test_replace_private_writes_every_byte(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    path = tmp_path / "big"

    files.replace_private(path, data)

    assert path.read_bytes() == data
