"""Heartbeats and stale progress while a wave is supervised (issue 9), on the virtual clock."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.integration.runs import supervised
from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube
from tests.support.skysim.inprocess import InProcessRunner

POLL = 5.0


def _world(tmp_path: Path, fake: FakeKube) -> World:
    return make_world(tmp_path / "w", fake, pods=True, runner=InProcessRunner())


def _timeline(*statuses: str) -> dict[str, object]:
    return {"command": "jobs.launch", "action": "timeline", "statuses": list(statuses)}


def test_heartbeat_is_journaled_every_interval_with_what_the_supervisor_saw(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = _world(tmp_path, fake_kube)
    world.faults(_timeline(*(["PENDING"] * 8), "RUNNING", "RUNNING", "SUCCEEDED"))
    lines: list[str] = []
    with supervised.settings(heartbeat_seconds=20.0, stale_after_seconds=0.0):
        result = supervised.run(
            world, supervised.single_wave_spec(tmp_path), progress=lines.append, run_id="hb-1"
        )
    assert result.exit_code == 0, result.to_json()
    beats = supervised.events(world, "hb-1", "heartbeat")
    assert len(beats) >= 2
    first = beats[0][1]
    assert first["job_id"] == result.job_id
    assert (first["wave"], first["attempt"], first["status"]) == (0, 1, "PENDING")
    assert first["blocker"] == "PENDING_UNKNOWN"  # the pod diagnosis it last saw
    waited = [b["waited_seconds"] for _, b in beats]
    assert all(later - earlier >= 20.0 for earlier, later in itertools.pairwise(waited))
    assert any("supervised for" in line for line in lines)
    assert not supervised.events(world, "hb-1", "stale_progress")


def test_stale_progress_warns_once_per_stall_and_never_cancels(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = _world(tmp_path, fake_kube)
    stall = ["PENDING"] * 10  # 50 s unchanged at a 5 s poll
    run = ["RUNNING"] * 10
    world.faults(_timeline(*stall, *run, "SUCCEEDED"))
    lines: list[str] = []
    with supervised.settings(heartbeat_seconds=0.0, stale_after_seconds=30.0):
        result = supervised.run(
            world, supervised.single_wave_spec(tmp_path), progress=lines.append, run_id="st-1"
        )
    assert result.exit_code == 0, result.to_json()
    signals = supervised.events(world, "st-1", "stale_progress", "progress_resumed")
    assert [(kind, data["status"]) for kind, data in signals] == [
        ("stale_progress", "PENDING"),
        ("progress_resumed", "RUNNING"),
        ("stale_progress", "RUNNING"),
        ("progress_resumed", "SUCCEEDED"),
    ]
    first = signals[0][1]
    assert first["unchanged_seconds"] >= 30.0 and first["job_id"] == result.job_id
    assert not [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]
    assert len(world.sim_jobs()) == 1
    assert sum("warning: no progress" in line for line in lines) == 2


def test_stale_progress_off_by_zero_journals_nothing(tmp_path: Path, fake_kube: FakeKube) -> None:
    world = _world(tmp_path, fake_kube)
    world.faults(_timeline(*(["PENDING"] * 12), "SUCCEEDED"))
    with supervised.settings(heartbeat_seconds=0.0, stale_after_seconds=0.0):
        result = supervised.run(world, supervised.single_wave_spec(tmp_path), run_id="st-2")
    assert result.exit_code == 0
    assert not supervised.events(world, "st-2", "heartbeat", "stale_progress", "progress_resumed")


def test_supervision_defaults_beat_every_minute_and_warn_after_five(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = _world(tmp_path, fake_kube)
    world.faults(_timeline(*(["PENDING"] * 70), "SUCCEEDED"))  # 350 s at a 5 s poll
    result = supervised.run(world, supervised.single_wave_spec(tmp_path), run_id="st-3")
    assert result.exit_code == 0, result.to_json()
    beats = supervised.events(world, "st-3", "heartbeat")
    assert 5 <= len(beats) <= 7
    stale = supervised.events(world, "st-3", "stale_progress")
    assert len(stale) == 1 and 300.0 <= stale[0][1]["unchanged_seconds"] < 310.0
