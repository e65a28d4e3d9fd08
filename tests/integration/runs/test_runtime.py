"""Runtime mode: wave by wave, each polled to a terminal state, routed by decision artifacts in S3."""

from __future__ import annotations

import json
from pathlib import Path

from npa_infra.storage.s3 import BotoStore
from npa_infra.workflow.execution.liverun import LiveResult
from tests.integration.runs.world import ROOT, World
from tests.support.motoserver import MotoS3

RUNTIME = ROOT / "workflows/testing/runtime-mode.yaml"
BUCKET = "example-bucket"


def _decision_key(run_id: str) -> str:
    return f"testing/runtime-mode/{run_id}/grades/decision.json"


FINISHES = {
    "command": "jobs.launch",
    "action": "timeline",
    "statuses": ["PENDING", "RUNNING", "SUCCEEDED"],
}


def _submit(world: World, s3: MotoS3, run_id: str | None, **kw: object) -> LiveResult:
    if not Path(world.env["SKYSIM_FAULTS"]).exists():
        world.faults(FINISHES)
    services = world.services()
    from dataclasses import replace

    from npa_infra.workflow.submission import pipeline

    options = world.options(run_id=run_id, **kw)
    result = pipeline.submit(
        RUNTIME,
        options,
        env=world.env,
        services=replace(services, store=lambda _endpoint: BotoStore.create(s3.endpoint_url)),
    )
    assert isinstance(result, LiveResult)
    return result


def _launched_names(world: World) -> list[str]:
    return [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]


def test_runtime_routes_on_the_real_decision_loop_back_runs_reject(
    world: World, s3_server: MotoS3
) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, _decision_key("rt-1"), json.dumps({"decision": "loop_back"}).encode())
    result = _submit(world, s3_server, "rt-1")
    assert result.exit_code == 0, result.to_json()
    assert result.status == "SUCCEEDED"
    names = _launched_names(world)
    assert names == ["rt-1-00-prepare", "rt-1-01-grade", "rt-1-02-gate", "rt-1-03-reject"]
    report = world.status("rt-1")
    assert report.status == "SUCCEEDED"
    assert len(report.sky_job_ids) == 4


def test_runtime_promote_decision_runs_accept(world: World, s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, _decision_key("rt-2"), b'{"last_decision": "promote"}')
    result = _submit(world, s3_server, "rt-2")
    assert result.exit_code == 0, result.to_json()
    assert _launched_names(world)[-1].endswith("accept")


def test_runtime_missing_decision_artifact_fails_closed(world: World, s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    result = _submit(world, s3_server, "rt-3")
    assert result.exit_code == 1
    # the gate declares the artifact as its output: the wave itself does not count as done
    assert result.error is not None and "decision.json is absent" in result.error.message
    assert len(world.sim_jobs()) == 3  # prepare, grade, gate; neither branch launched


def test_runtime_malformed_decision_artifact_fails_closed(world: World, s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, _decision_key("rt-4"), b'{"verdict": "yes"}')
    result = _submit(world, s3_server, "rt-4")
    assert result.exit_code == 1
    assert result.error is not None and "malformed" in result.error.message


def test_runtime_failed_wave_fails_the_run_and_launches_nothing_after(
    world: World, s3_server: MotoS3
) -> None:
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 2,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED"],
        },
        FINISHES,
    )
    result = _submit(world, s3_server, "rt-5")
    assert result.exit_code == 1
    assert result.status == "FAILED"
    assert len(world.sim_jobs()) == 2


def test_runtime_resume_after_success_replays_waves_without_relaunching(
    world: World, s3_server: MotoS3, tmp_path: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, _decision_key("rt-6"), b'{"decision": "loop_back"}')
    assert _submit(world, s3_server, "rt-6").exit_code == 0
    again = _submit(world, s3_server, None, resume_run="rt-6")
    assert again.exit_code == 0, again.to_json()
    assert len(world.sim_jobs()) == 4


def test_runtime_payload_failure_retries_as_a_new_attempt_within_budget(
    world: World, s3_server: MotoS3
) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, _decision_key("rt-7"), b'{"decision": "loop_back"}')
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED"],
        },
        FINISHES,
    )
    result = _submit(world, s3_server, "rt-7", retries=1)
    assert result.exit_code == 0, result.to_json()
    names = _launched_names(world)
    assert names[:2] == ["rt-7-00-prepare", "rt-7-00-prepare-a2"]
    assert len(names) == 5
    assert 30.0 in world.clock.slept
    waves = world.status("rt-7").waves
    assert [(w["wave"], w["attempt"]) for w in waves][:2] == [(0, 1), (0, 2)]


def test_runtime_payload_failure_without_budget_fails_once(world: World, s3_server: MotoS3) -> None:
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED"],
        },
        FINISHES,
    )
    result = _submit(world, s3_server, "rt-8")
    assert result.exit_code == 1
    assert _launched_names(world) == ["rt-8-00-prepare"]
