"""Identity drift (issue 9): a relaunch re-identifies the wave from the spec file on disk.

A one-wave runtime run's first launch stays PENDING behind a transient
capacity blocker past the grace period, so the supervisor considers one
verified relaunch. While the wave is supervised, the spec file is rewritten
(by the virtual clock, at the first supervision poll): with a changed step,
the recomputed task YAML differs from the attempt's recorded one and nothing
is relaunched; with identical content the relaunch happens; with a spec that
no longer validates the check is indeterminate and blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.runs import supervised
from tests.integration.runs.world import VirtualClock, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.skysim.inprocess import InProcessRunner

POLL = 7.0  # distinct from the cancel poll (5 s) and the retry pause (30 s)
CAPACITY = supervised.CAPACITY
BLOCKED = supervised.BLOCKED_THEN_RUNS


@dataclass
class EditingClock(VirtualClock):
    """A virtual clock that runs ``edit`` once, at the first sleep after the wave's first
    launch (between the first supervision polls), before any relaunch decision."""

    edit: Callable[[], None] | None = None
    launched: Callable[[], bool] = lambda: True

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        # the poll's sleep is split by the readiness samples kept meanwhile (issue 19)
        if self.edit is not None and self.launched():
            edit, self.edit = self.edit, None
            edit()


def _world(tmp_path: Path, fake: FakeKube) -> World:
    world = make_world(tmp_path / "w", fake, pods=True, runner=InProcessRunner())
    world.faults(*BLOCKED)
    return world


def _run(world: World, spec: Path, run_id: str, edit: Callable[[], None]) -> Any:
    clock = EditingClock(
        edit=edit, launched=lambda: any(c[1] == "launch" for c in world.sim_calls())
    )
    world.clock = clock
    result = supervised.run(
        world,
        spec,
        run_id=run_id,
        poll_seconds=POLL,
        infrastructure_grace_seconds=28.0,
        max_wait_seconds=600.0,
    )
    assert clock.edit is None, "the spec was never edited during supervision"
    return result


def _checks(world: World, run_id: str) -> list[dict[str, Any]]:
    found = supervised.events(world, run_id, "relaunch_checks")
    assert len(found) == 1, found
    return list(found[0][1]["checks"])


def _cancels(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]


def test_identity_drift_spec_step_changed_while_supervised_blocks_the_relaunch(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = _world(tmp_path, fake_kube)
    spec = supervised.single_wave_spec(tmp_path / "spec")
    text = spec.read_text(encoding="utf-8")
    moved = text.replace("example-bucket/supervised/", "example-bucket/moved/")
    assert moved != text

    def change() -> None:  # the step's command now reports under another root
        spec.write_text(moved, encoding="utf-8")

    result = _run(world, spec, "drift-1", change)

    assert result.exit_code == 1, result.to_json()
    assert result.status == "FAILED"
    assert result.error is not None and "changed since it was launched" in result.error.message
    assert [j["name"] for j in world.sim_jobs()] == ["drift-1-00-train"]  # no relaunch
    assert _cancels(world) == [["jobs", "cancel", "--yes", str(result.job_ids[0])]]
    checks = _checks(world, "drift-1")
    identity = checks[1]
    assert not identity["ok"] and "drifted" in identity["reason"]
    assert not supervised.events(world, "drift-1", "infrastructure_recovery")
    outcome = supervised.events(world, "drift-1", "outcome")
    assert outcome[-1][1]["status"] == "FAILED"
    assert "changed since it was launched" in outcome[-1][1]["error"]
    budgets = world.status("drift-1").budgets
    assert budgets is not None and budgets["00"]["infrastructure_recoveries_used"] == 0


def test_identity_drift_spec_rewritten_identically_relaunches_once(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = _world(tmp_path, fake_kube)
    spec = supervised.single_wave_spec(tmp_path / "spec")
    text = spec.read_text(encoding="utf-8")

    def rewrite() -> None:
        spec.unlink()
        spec.write_text(text, encoding="utf-8")

    result = _run(world, spec, "same-1", rewrite)

    assert result.exit_code == 0, result.to_json()
    names = [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]
    assert names == ["same-1-00-train", "same-1-00-train-a2"]
    checks = _checks(world, "same-1")
    assert all(c["ok"] for c in checks), checks
    assert checks[1]["reason"] == "identity unchanged"
    assert len(supervised.events(world, "same-1", "infrastructure_recovery")) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param("states: [unclosed\n", "no longer validates", id="unparseable"),
        pytest.param(
            "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: supervised}\n",
            "no longer validates",
            id="invalid",
        ),
        pytest.param(None, "spec file not found", id="deleted"),
    ],
)
def test_identity_drift_spec_no_longer_valid_is_indeterminate_and_blocks(
    tmp_path: Path, fake_kube: FakeKube, content: str | None, reason: str
) -> None:
    world = _world(tmp_path, fake_kube)
    spec = supervised.single_wave_spec(tmp_path / "spec")

    def break_spec() -> None:
        if content is None:
            spec.unlink()
        else:
            spec.write_text(content, encoding="utf-8")

    result = _run(world, spec, "bad-1", break_spec)

    assert result.exit_code == 2, result.to_json()  # unknown evidence: recovery required
    assert result.status == "RECOVERY_REQUIRED"
    assert result.error is not None and reason in result.error.message
    assert [j["name"] for j in world.sim_jobs()] == ["bad-1-00-train"]
    identity = _checks(world, "bad-1")[1]
    assert not identity["ok"] and reason in identity["reason"]
    assert not supervised.events(world, "bad-1", "infrastructure_recovery")
