"""Runtime mode: every JobGroup batch of a wide parallel group is launched, in order.

A parallel group wider than its ``maxConcurrency`` renders one job per batch
(``…-00-fan-b1``, ``-b2``, ``-b3``); each is launched once and supervised to
its end before the next, and the join comes last (dsl.md §5.4). The launched
names are read from the simulator's own records.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from npa_infra.storage.s3 import BotoStore
from npa_infra.workflow.submission import pipeline
from tests.integration.runs import supervised
from tests.integration.runs.world import World
from tests.support.motoserver import MotoS3
from tests.support.specs import fanout_spec

BUCKET = "example-bucket"
FINISHES = {
    "command": "jobs.launch",
    "action": "timeline",
    "statuses": ["PENDING", "RUNNING", "SUCCEEDED"],
}


def _spec(directory: Path, *, outputs: bool = False) -> Path:
    path = directory / "fanout.yaml"
    root = f"s3://{BUCKET}/fanout/{{{{run.id}}}}"
    text = fanout_spec("fanout", root, members=5, max_concurrency=2, outputs=outputs)
    path.write_text(text, encoding="utf-8")
    return path


def _rendered(world: World, spec: Path, run_id: str) -> list[str]:
    report = pipeline.submit(spec, world.options(run_id=run_id, plan_only=True), env=world.env)
    assert isinstance(report, pipeline.SubmitReport)
    return [job.job_name for job in report.jobs]


def _launched(world: World) -> list[str]:
    """The simulator's jobs in the order it created them."""
    return [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]


def _supervised_in_turn(world: World, run_id: str) -> None:
    """Each job was seen SUCCEEDED before anything was journaled about the next one."""
    ids = [j["job_id"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]
    seen = [
        (kind, data.get("job_id"), data.get("status"))
        for kind, data in supervised.events(world, run_id, "job_status")
    ]
    for before, after in itertools.pairwise(ids):
        first_after = next(i for i, (_, job, _) in enumerate(seen) if job == after)
        assert ("job_status", before, "SUCCEEDED") in seen[:first_after]


def test_runtime_wide_group_launches_every_batch_in_order(world: World, tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    world.faults(FINISHES)
    rendered = _rendered(world, spec, "fan-1")
    assert rendered == [
        "fan-1-00-fan-b1",
        "fan-1-00-fan-b2",
        "fan-1-00-fan-b3",
        "fan-1-01-join",
    ]

    result = supervised.run(world, spec, run_id="fan-1")

    assert _launched(world) == rendered
    assert result.exit_code == 0, result.to_json()
    assert result.status == "SUCCEEDED"
    _supervised_in_turn(world, "fan-1")
    (outcome,) = supervised.events(world, "fan-1", "outcome")
    assert outcome[1]["reason"] == "all_succeeded"


def test_runtime_wide_group_existing_outputs_still_launches_every_batch(
    world: World, s3_server: MotoS3, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, outputs=True)
    s3_server.create_bucket(BUCKET)
    for member in range(5):  # every member's output is already there before the run
        s3_server.put(BUCKET, f"fanout/fan-2/m{member}.json", b'{"ok": true}')
    world.faults(FINISHES)
    rendered = _rendered(world, spec, "fan-2")

    result = supervised.run(
        world,
        spec,
        run_id="fan-2",
        store=lambda _endpoint: BotoStore.create(s3_server.endpoint_url),
    )

    assert _launched(world) == rendered
    assert result.status == "SUCCEEDED", result.to_json()
    checked = [
        [o["uri"].rsplit("/", 1)[-1] for o in data["outputs"]]
        for _, data in supervised.events(world, "fan-2", "outputs_validated")
    ]
    # each batch is checked for its own members' outputs only
    assert checked == [["m0.json", "m1.json"], ["m2.json", "m3.json"], ["m4.json"]]


def test_runtime_failed_batch_fails_the_run_and_launches_nothing_after(
    world: World, tmp_path: Path
) -> None:
    spec = _spec(tmp_path)
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 2,
            "action": "timeline",
            "statuses": ["PENDING", "FAILED"],
        },
        FINISHES,
    )

    result = supervised.run(world, spec, run_id="fan-3")

    assert _launched(world) == ["fan-3-00-fan-b1", "fan-3-00-fan-b2"]
    assert (result.status, result.exit_code) == ("FAILED", 1)


def test_runtime_wide_group_resume_after_success_relaunches_nothing(
    world: World, tmp_path: Path
) -> None:
    spec = _spec(tmp_path)
    world.faults(FINISHES)
    assert supervised.run(world, spec, run_id="fan-4").status == "SUCCEEDED"

    again = supervised.run(world, spec, resume_run="fan-4")

    assert again.status == "SUCCEEDED", again.to_json()
    assert _launched(world) == [
        "fan-4-00-fan-b1",
        "fan-4-00-fan-b2",
        "fan-4-00-fan-b3",
        "fan-4-01-join",
    ]
