"""One run, one SkyPilot job (issue 24): names are one-to-one, adoption proves the launch.

The review's failures, each through the real submit SDK against the simulator:
``rel_col`` and ``rel-col`` shared one job (the second adopted the first's and its
cancel cancelled it); two fresh ids of a long-named workflow in one hour shared one
job; a long runtime id gave every wave one name, so later waves adopted wave 0's job
and the run ended "launched more than once". And a job that merely carries the run's
name (another client's, or one without npa's launch identity) is never adopted.
"""

from __future__ import annotations

import dataclasses
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import RunStateError
from npa_infra.plan import waves
from npa_infra.skypilot.isolation import ControllerSettings
from npa_infra.workflow.planning import identity
from tests.integration.runs.supervised import chain_spec
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
RUNS = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING", "RUNNING"]}
FINISHES = {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING", "SUCCEEDED"]}


def _job(world: World, job_id: int | None) -> dict[str, Any]:
    return next(j for j in world.sim_jobs() if j["job_id"] == job_id)


def test_submit_rel_col_then_rel_dash_col_launches_two_jobs_and_cancels_apart(
    world: World,
) -> None:
    world.faults(RUNS)
    first = world.submit(MINIMAL, run_id="rel_col")
    second = world.submit(MINIMAL, run_id="rel-col")

    assert (first.exit_code, second.exit_code) == (0, 0), second.to_json()
    assert len(world.sim_jobs()) == 2  # two launches: nothing adopted across runs
    assert second.transactions[-1]["recovery_decision"] == "submitted_and_reconciled"
    assert first.job_id != second.job_id
    cancelled = world.cancel("rel-col")
    assert cancelled.cancelled_job_ids == [second.job_id], cancelled.to_json()
    assert _job(world, first.job_id)["cancel"] is None  # rel_col's job was never touched
    assert world.cancel("rel_col").cancelled_job_ids == [first.job_id]


def test_submit_two_fresh_ids_of_a_long_named_workflow_in_one_hour_launch_two_jobs(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_name = "a-workflow-whose-metadata-name-is-longer-than-48-characters"
    spec = tmp_path / "long.yaml"
    spec.write_text(
        MINIMAL.read_text(encoding="utf-8").replace("name: minimal", f"name: {long_name}", 1),
        encoding="utf-8",
    )
    fresh = identity.fresh_run_id
    minutes = iter(range(60))

    def in_one_hour(workflow: str, now: datetime | None = None, token: str | None = None) -> str:
        return fresh(workflow, datetime(2030, 1, 1, 12, next(minutes), tzinfo=UTC), token)

    monkeypatch.setattr(identity, "fresh_run_id", in_one_hour)
    world.faults(RUNS)
    first, second = world.submit(spec), world.submit(spec)

    assert first.run_id != second.run_id
    assert (first.exit_code, second.exit_code) == (0, 0), second.to_json()
    assert len(world.sim_jobs()) == 2
    assert first.transactions[-1]["job_name"] != second.transactions[-1]["job_name"]
    assert second.transactions[-1]["recovery_decision"] == "submitted_and_reconciled"


def test_runtime_long_run_id_names_every_wave_apart_and_succeeds(
    world: World, tmp_path: Path
) -> None:
    spec = tmp_path / "chain.yaml"
    spec.write_text(chain_spec(3), encoding="utf-8")
    run_id = "r" * 59  # the old cut left "<id>-" for every wave
    world.faults(FINISHES)

    result = world.submit(spec, run_id=run_id)
    again = world.submit(spec, resume_run=run_id)

    names = [j["name"] for j in world.sim_jobs()]
    assert result.status == "SUCCEEDED", result.to_json()
    assert len(names) == len(set(names)) == 3
    assert "more than once" not in str(result.to_json())
    assert again.status == "SUCCEEDED", again.to_json()
    assert "more than once" not in str(again.to_json())
    assert len(world.sim_jobs()) == 3  # the resume replays, launching nothing


def _launch_out_of_band(world: World, name: str, text: str = "name: x\nrun: echo\n") -> None:
    """Another client launches a job named ``name`` under the same controller identity."""
    task = world.root / "other.yaml"
    task.write_text(text, encoding="utf-8")
    world.isolated.prepare(world.env, context="fake-a", controller=ControllerSettings())
    subprocess.run(
        [str(world.sky_bin), "jobs", "launch", "--name", name, "--yes", "--detach-run", str(task)],
        env=world.isolated.environment(world.env),
        check=True,
        capture_output=True,
    )


@pytest.mark.parametrize(
    "metadata",
    ["", "_metadata:\n  npa_launch_id: npa-launch-0123456789abcdef0123456789abcdef\n"],
    ids=["no-identity", "another-launch"],
)
def test_submit_job_already_named_like_the_run_but_not_its_launch_is_never_adopted(
    world: World, metadata: str
) -> None:
    _launch_out_of_band(world, "same-1", "name: x\nrun: echo\n" + metadata)
    result = world.submit(MINIMAL, run_id="same-1")
    tx = result.transactions[-1]

    assert result.exit_code == 1  # nothing was sent: a no-op rollback
    assert (tx["state"], tx["recovery_decision"]) == ("indeterminate", "block_indeterminate")
    assert tx["reconciliations"][-1]["state"] == ("foreign" if metadata else "unproven")
    assert tx["launch_sequence"] == 0 and tx["job_id"] is None
    assert "not this launch's" in tx["reconciliation_error"]
    assert "another run id" in tx["operator_remedy"]
    assert result.error is not None and "another run id" in result.error.remedy
    assert len(world.jobs_named("same-1")) == 1


def test_submit_same_run_from_another_npa_home_adopts_its_own_launch(world: World) -> None:
    """The same launch identity (stack, run, wave, attempt, planned YAML) is the run's own."""
    world.faults(RUNS)
    first = world.submit(MINIMAL, run_id="twin-1")
    other = dataclasses.replace(world, env={**world.env, "NPA_HOME": str(world.root / "home-2")})
    second = other.submit(MINIMAL, run_id="twin-1")
    tx = second.transactions[-1]

    assert second.exit_code == 0, second.to_json()
    assert (tx["state"], tx["recovery_decision"]) == ("adopted", "adopt_existing")
    assert second.job_id == first.job_id
    assert len(world.sim_jobs()) == 1


def test_resume_of_an_attempt_journaled_under_another_name_refuses_to_launch(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt keeps its journaled name: an npa that names it otherwise (a run started
    before issue 24 changed ``rel_col``-style names) launches nothing under the new one."""
    world.faults(RUNS)
    with monkeypatch.context() as old_npa:
        old_npa.setattr(waves, "_base", lambda run_id, wave, batch: run_id.replace("_", "-"))
        first = world.submit(MINIMAL, run_id="renamed_1")
    assert first.transactions[-1]["job_name"] == "renamed-1"

    with pytest.raises(RunStateError, match="was journaled as job renamed-1") as refused:
        world.submit(MINIMAL, resume_run="renamed_1")

    assert "npa version that started it" in refused.value.remedy
    assert len(world.sim_jobs()) == 1
