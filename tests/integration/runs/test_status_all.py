"""``status --all``: one queue read and one pod list per tick for every run; budgets; blockers."""

from __future__ import annotations

from pathlib import Path

from npa_infra.workflow.operations import runstatus
from tests.integration.runs.test_runtime import FINISHES, _submit
from tests.integration.runs.world import ROOT, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.motoserver import MotoS3

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
PENDING_FOREVER = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING"]}
AUTH_POD = {
    "command": "jobs.launch",
    "action": "pod_state",
    "task": 0,
    "pod": {
        "phase": "Pending",
        "waiting": {"reason": "ErrImagePull", "message": "failed to pull: 401 Unauthorized"},
    },
}


def _queue_reads(world: World) -> int:
    return sum(1 for c in world.sim_calls() if c[:2] == ["jobs", "queue"])


def _pod_lists(fake: FakeKube) -> int:
    return len(fake.calls("GET", r"/pods(\?|$)"))


def _all(world: World, **kw: object) -> runstatus.AllStatusReport:
    return runstatus.all_status(env=world.env, services=world.services(), **kw)  # type: ignore[arg-type]


def test_status_all_two_pending_runs_one_queue_read_one_pod_list(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = make_world(tmp_path / "pods", fake_kube, pods=True)
    world.faults(PENDING_FOREVER, AUTH_POD)
    first = world.submit(MINIMAL, run_id="all-1")
    second = world.submit(MINIMAL, run_id="all-2")
    assert (first.exit_code, second.exit_code) == (0, 0)
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)
    report = _all(world)
    assert _queue_reads(world) - queues == 1
    assert _pod_lists(fake_kube) - pods == 1
    assert [r.run_id for r in report.runs] == ["all-1", "all-2"]
    for run, job_id in zip(report.runs, (first.job_id, second.job_id), strict=True):
        [wave] = run.waves
        assert (wave["job_id"], wave["sky_status"]) == (job_id, "PENDING")
        assert [b["code"] for b in wave["blockers"]] == ["IMAGE_PULL_AUTH"]
        assert wave["blockers"][0]["job_id"] == job_id
    assert (report.queue_state, report.exit_code) == ("verified", 0)
    # a second tick costs the same again, never one read per job
    _all(world)
    assert _queue_reads(world) - queues == 2
    assert _pod_lists(fake_kube) - pods == 2


def test_status_all_json_is_runs_of_the_single_run_shape(world: World) -> None:
    world.submit(MINIMAL, run_id="js-1")
    payload = _all(world).to_json()
    assert set(payload) == {"status", "runs", "queue_state"}
    [run] = payload["runs"]
    assert set(run) == set(world.status("js-1").to_json())
    assert run["run_id"] == "js-1"
    assert payload["queue_state"] == "verified"


def test_status_all_cached_reads_nothing_and_stack_filters(world: World) -> None:
    world.submit(MINIMAL, run_id="c-1")
    queues = _queue_reads(world)
    report = _all(world, cached=True)
    assert _queue_reads(world) == queues
    assert ([r.run_id for r in report.runs], report.queue_state) == (["c-1"], "not_read")
    assert _all(world, stack="no-such-stack", cached=True).runs == []


def test_status_all_unreadable_queue_every_run_unverified_exit_2(world: World) -> None:
    world.submit(MINIMAL, run_id="u-1")
    world.submit(MINIMAL, run_id="u-2")
    world.faults({"command": "jobs.queue", "action": "fail", "kind": "server"})
    report = _all(world)
    assert [r.status for r in report.runs] == ["VERIFICATION_UNAVAILABLE"] * 2
    assert (report.queue_state, report.exit_code) == ("unreadable_or_unverified", 2)


def test_status_permanent_blocker_last_blocker_with_evidence_and_run_left_out_of_all(
    tmp_path: Path, fake_kube: FakeKube, s3_server: MotoS3
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    pending = {"command": "jobs.launch", "nth": 1, "action": "timeline", "statuses": ["PENDING"]}
    world.faults(pending, {**AUTH_POD, "nth": 1}, FINISHES)
    result = _submit(world, s3_server, "lb-1", retries=1)
    assert result.exit_code == 1, result.to_json()
    report = world.status("lb-1", cached=True)
    last = report.waves[0]["last_blocker"]
    assert last is not None
    assert (last["code"], last["class"], last["job_id"]) == (
        "IMAGE_PULL_AUTH",
        "permanent",
        result.job_ids[0],
    )
    assert last["evidence"] and isinstance(last["at"], float)
    assert {"reason", "message"} <= set(last)
    assert report.budgets == {
        "00": {
            "retries_left": 1,
            "infrastructure_recoveries_left": 1,
            "retries_used": 0,
            "infrastructure_recoveries_used": 0,
            "retries_total": 1,
            "infrastructure_recoveries_total": 1,
        }
    }
    assert _all(world, cached=True).runs == []  # FAILED is terminal
