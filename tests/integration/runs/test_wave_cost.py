"""The per-wave live path against the simulator and the Kubernetes double (issue 19).

A 3-wave serial runtime run, through the real submit SDK, ``SkyCli`` (one
simulator process per ``sky`` call) and ``KubeApi`` against FakeKube, on the
virtual clock. Counted, never timed:

* SkyPilot processes, from the simulator's own call log: the launch, then one
  shared queue read per status the job shows (the first of them is the
  launch's id lookup and the first supervision tick at once); the lookup
  before each later launch is the previous wave's last read, fresh and taken
  inside the run's lock. Only wave 1 pays a lookup of its own;
* ``/readyz`` requests, from the double: the window is kept while the wave
  runs, so waves 2 and 3 launch after exactly one sample taken after the
  previous wave's last read; wave 1 proves it in three samples, not four.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.models import LaunchResult, QueueResult
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.runs.supervised import chain_spec
from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube

WAVES = 3


class _Marked(SkyCli):
    """``SkyCli`` that notes (monotonic) when each launch starts and each queue read ends."""

    marks: list[tuple[str, float]]

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        answer = super().queue(all_users=all_users, verbose=verbose)
        self.marks.append(("queue", time.monotonic()))
        return answer

    def launch(self, task_yaml: Path, **kwargs: Any) -> LaunchResult:
        self.marks.append(("launch", time.monotonic()))
        return super().launch(task_yaml, **kwargs)


def _run(
    world: World, tmp_path: Path, statuses: list[str], **timing: Any
) -> tuple[Any, list[tuple[str, float]]]:
    world.faults({"command": "jobs.launch", "action": "timeline", "statuses": statuses, **timing})
    marks: list[tuple[str, float]] = []

    def sky(isolated: IsolatedDir, env: Mapping[str, str], _bin: str | None) -> SkyCli:
        cli = _Marked(world.sky_bin, isolated, env, runner=world.runner, check_ports=False)
        cli.marks = marks
        return cli

    spec = tmp_path / "chain.yaml"
    spec.write_text(chain_spec(WAVES), encoding="utf-8")
    services = dataclasses.replace(world.services(), sky=sky)
    from npa_infra.workflow.submission import pipeline

    result = pipeline.submit(spec, world.options(run_id="cost"), env=world.env, services=services)
    return result, marks


@pytest.mark.parametrize(
    "statuses", [["RUNNING", "SUCCEEDED"], ["PENDING", "RUNNING", "SUCCEEDED"]], ids=["2", "3"]
)
def test_serial_waves_sky_processes_launch_plus_one_read_per_status(
    world: World, tmp_path: Path, statuses: list[str]
) -> None:
    result, _ = _run(world, tmp_path, statuses)
    assert result.status == "SUCCEEDED", result.to_json()
    kinds = ["launch" if call[1] == "launch" else "queue" for call in world.sim_calls()]
    assert all(call[:2] != ["api", "status"] for call in world.sim_calls())
    # wave 1: its own lookup; every wave: the launch and one read per observed status
    per_wave = ["launch"] + ["queue"] * len(statuses)
    assert kinds == ["queue"] + per_wave * WAVES
    later_waves = len(per_wave)
    if len(statuses) == 2:
        assert later_waves <= 3  # issue 19: at most three SkyPilot processes per wave
    assert all("-v" in call for call in world.sim_calls() if call[1] == "queue")


def test_serial_waves_later_launches_take_one_readiness_sample_after_previous_wave(
    world: World, tmp_path: Path
) -> None:
    result, marks = _run(world, tmp_path, ["RUNNING", "SUCCEEDED"])
    assert result.status == "SUCCEEDED", result.to_json()
    readyz = [r.time for r in world.fake.calls("GET", r"^/readyz$")]
    launches = [i for i, (kind, _) in enumerate(marks) if kind == "launch"]
    assert len(launches) == WAVES
    # wave 1 proves the window from zero in three samples (answers paced over 10 s)
    assert sum(1 for t in readyz if t < marks[launches[0]][1]) == 3
    for index in launches[1:]:
        ended = marks[index - 1]  # the previous wave's last read (SUCCEEDED)
        assert ended[0] == "queue"
        between = [t for t in readyz if ended[1] < t < marks[index][1]]
        assert len(between) == 1  # the final fresh sample, immediately before the launch
    for record in result.transactions[1:]:
        (evidence,) = record["readiness"]
        samples = evidence["samples"]
        assert evidence["state"] == "ready"
        assert len(samples) >= 3 and all(s["classification"] == "ok" for s in samples)
        assert samples[-1]["at_s"] - samples[0]["at_s"] >= 10.0


def test_serial_waves_failed_background_sample_resets_window_before_launch(
    world: World, tmp_path: Path
) -> None:
    # every /readyz after the first three answers 503 once, then ok: the window is
    # re-proven, never taken from samples before the failure
    world.fake.script_readyz([200, 200, 200, 503])
    result, marks = _run(world, tmp_path, ["RUNNING", "SUCCEEDED"])
    assert result.status == "SUCCEEDED", result.to_json()
    readyz = [r.time for r in world.fake.calls("GET", r"^/readyz$")]
    launches = [i for i, (kind, _) in enumerate(marks) if kind == "launch"]
    # the 503 came while wave 1 ran (the window kept in its idle ticks): wave 2's window
    # is proven again from zero after it, three samples, some of them in wave 1's idle time
    failed_at = readyz[3]
    assert marks[launches[0]][1] < failed_at < marks[launches[1]][1]
    after = [t for t in readyz if failed_at < t < marks[launches[1]][1]]
    assert len(after) == 3
    for record in result.transactions:
        (evidence,) = record["readiness"]
        oks = [s for s in evidence["samples"] if s["classification"] == "ok"]
        assert evidence["state"] == "ready"
        assert len(oks) >= 3 and oks[-1]["at_s"] - oks[0]["at_s"] >= 10.0
        assert evidence["samples"][-1]["classification"] == "ok"
        assert all(s["classification"] == "ok" for s in evidence["samples"])


# A job that takes 8 s of work on the controller's clock: PENDING for 2 s, then RUNNING,
# SUCCEEDED from 8 s on (one timeline step per 2 s of the world's virtual time).
EIGHT_SECONDS = ["PENDING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"]


@pytest.fixture
def timed_world(tmp_path: Path, fake_kube: FakeKube) -> World:
    return make_world(tmp_path, fake_kube, sky_time=True)


def test_serial_waves_of_timed_jobs_cost_three_sky_processes_each(
    timed_world: World, tmp_path: Path
) -> None:
    # issue 19: the launch; the id from the next shared read, one tick (5 s) later,
    # which is also the first supervision tick (RUNNING); one more tick sees SUCCEEDED,
    # and that read is the next wave's reconcile (fresh, inside the run's lock)
    world = timed_world
    result, marks = _run(world, tmp_path, EIGHT_SECONDS, clock="seconds", interval=2.0)
    assert result.status == "SUCCEEDED", result.to_json()
    kinds = ["launch" if call[1] == "launch" else "queue" for call in world.sim_calls()]
    per_wave = ["launch", "queue", "queue"]
    assert kinds == ["queue"] + per_wave * WAVES  # only the run's first launch reads for itself
    for record in result.transactions:
        (found,) = [r for r in record["reconciliations"] if r["state"] == "found"]
        assert found["status"] == "RUNNING"  # the id came one tick after the POST, not at once
    # the settle tick is idle time: the readiness window is kept through it, so each later
    # launch takes one fresh sample after the previous wave's last read
    readyz = [r.time for r in world.fake.calls("GET", r"^/readyz$")]
    launches = [i for i, (kind, _) in enumerate(marks) if kind == "launch"]
    assert len(launches) == WAVES
    for index in launches[1:]:
        ended = marks[index - 1]
        between = [t for t in readyz if ended[1] < t < marks[index][1]]
        assert len(between) == 1
