"""``workflow logs`` through the CLI, against the simulator (issue 17).

Logs are read by exact job id only: every test reads the simulator's own call
log to prove no ``sky jobs logs`` ever named a job.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from npa_infra.workflow.operations import runlogs
from npa_infra.workflow.operations.runlogs import JobLog
from tests.integration.runs.test_run_list import _npa, _plan_only
from tests.integration.runs.test_runtime import FINISHES, _submit
from tests.integration.runs.test_supervision import _seed
from tests.integration.runs.world import CONTEXT, ROOT, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.motoserver import MotoS3

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
PENDING_FOREVER = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING"]}
# wave 0's first job ends FAILED_NO_RESOURCE: attempt 2 relaunches it; waves 1-3 run once
RELAUNCHED = {
    "command": "jobs.launch",
    "nth": 1,
    "action": "timeline",
    "statuses": ["PENDING", "FAILED_NO_RESOURCE"],
}


def _logs_calls(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "logs"]]


def _never_by_name(world: World) -> None:
    for call in _logs_calls(world):
        assert "-n" not in call and "--name" not in call, call
        assert call[-1].isdigit(), call  # the exact id is the one positional argument


def _relaunched_run(world: World, s3: MotoS3, run_id: str) -> list[int]:
    """A runtime run of four waves whose wave 0 has two attempts; its job ids by launch."""
    _seed(s3, run_id)
    world.faults(RELAUNCHED, FINISHES)
    result = _submit(world, s3, run_id, retries=1)
    assert result.exit_code == 0, result.to_json()
    return [j["job_id"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]


# -- logs ------------------------------------------------------------------------------


def test_logs_default_reads_the_latest_attempt_of_each_wave_by_exact_id(
    world: World, s3_server: MotoS3
) -> None:
    first, second, *later = _relaunched_run(world, s3_server, "lg-1")
    code, stdout, _ = _npa(world, "logs", "lg-1", "--json")
    assert code == 0
    payload = json.loads(stdout)
    assert (payload["status"], payload["run_id"], payload["follow"]) == ("ok", "lg-1", False)
    jobs = payload["jobs"]
    assert [(j["wave"], j["attempt"], j["job_id"]) for j in jobs] == [
        (0, 2, second),
        *((w, 1, job) for w, job in enumerate(later, start=1)),
    ]
    assert set(jobs[0]) == {
        "wave",
        "attempt",
        "job_id",
        "job_name",
        "state",
        "exit_code",
        "log",
        "detail",
    }
    assert jobs[0]["job_name"] == "lg-1-00-prepare-a2"
    assert all(j["state"] == "read" and j["exit_code"] == 0 for j in jobs)
    assert f"(prepare, pid={1000 + second}) simulated output" in jobs[0]["log"]
    assert _logs_calls(world) == [["jobs", "logs", "--no-follow", str(j)] for j in (second, *later)]
    assert first not in {int(c[-1]) for c in _logs_calls(world)}
    _never_by_name(world)


def test_logs_wave_and_attempt_select_exactly_that_job(world: World, s3_server: MotoS3) -> None:
    first, second, third, *_ = _relaunched_run(world, s3_server, "lg-2")
    code, stdout, stderr = _npa(world, "logs", "lg-2", "--wave", "0", "--attempt", "1")
    assert code == 0, stderr
    assert stdout.splitlines()[0] == f"==> wave 00 attempt 1: lg-2-00-prepare (job {first}) <=="
    assert f"✓ Managed job finished: {first} (status: FAILED_NO_RESOURCE)." in stdout
    code, stdout, _ = _npa(world, "logs", "lg-2", "--wave", "1", "--json")
    assert [(j["wave"], j["job_id"]) for j in json.loads(stdout)["jobs"]] == [(1, third)]
    code, stdout, _ = _npa(world, "logs", "lg-2", "--attempt", "2", "--json")
    assert [(j["wave"], j["job_id"]) for j in json.loads(stdout)["jobs"]] == [(0, second)]
    assert _logs_calls(world) == [
        ["jobs", "logs", "--no-follow", str(job)] for job in (first, third, second)
    ]
    _never_by_name(world)


@pytest.mark.parametrize(
    ("args", "detail"),
    [(("--wave", "9"), "no wave 9"), (("--wave", "0", "--attempt", "2"), "no attempt 2 of wave 0")],
    ids=["wave", "attempt"],
)
def test_logs_unknown_wave_or_attempt_refused_exit_1_reads_nothing(
    world: World, args: tuple[str, ...], detail: str
) -> None:
    world.submit(MINIMAL, run_id="lg-3")
    code, stdout, stderr = _npa(world, "logs", "lg-3", *args)
    assert code == 1
    assert stdout == ""
    assert f"Error: {detail}" in stderr
    code, stdout, _ = _npa(world, "logs", "lg-3", *args, "--json")
    assert (code, json.loads(stdout)["status"]) == (1, "refused")
    assert _logs_calls(world) == []


def test_logs_attempt_without_job_id_reported_never_looked_up_by_name_exit_2(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = make_world(tmp_path / "rb", fake_kube)
    world.faults({"command": "jobs.queue", "nth": 1, "action": "fail", "kind": "unknown"})
    assert world.submit(MINIMAL, run_id="lg-4").status == "ROLLED_BACK"
    code, stdout, stderr = _npa(world, "logs", "lg-4")
    assert code == 2
    assert stdout.splitlines() == ["==> wave 00 attempt 1: lg-4 (no job id) <=="]
    assert "no job id: never launched or not reconciled" in stderr
    assert "Hint: npa workbench workflow status lg-4" in stderr
    code, stdout, _ = _npa(world, "logs", "lg-4", "--json")
    payload = json.loads(stdout)
    assert (code, payload["status"]) == (2, "incomplete")
    [job] = payload["jobs"]
    assert (job["job_id"], job["state"], job["exit_code"], job["log"]) == (
        None,
        "no_job_id",
        None,
        "",
    )
    assert _logs_calls(world) == []  # neither the id nor, ever, the name


def test_logs_unknown_run_exit_1_text_and_json(world: World) -> None:
    code, stdout, stderr = _npa(world, "logs", "nobody-1")
    assert (code, stdout) == (1, "")
    assert "Error: " in stderr and "Hint: npa workbench workflow list" in stderr
    world.submit(MINIMAL, run_id="lg-5")  # a journal now exists; the id still does not
    code, stdout, _ = _npa(world, "logs", "nobody-1", "--json")
    assert code == 1
    assert json.loads(stdout) == {
        "status": "not_found",
        "run_id": "nobody-1",
        "follow": False,
        "jobs": [],
        "detail": "unknown run id",
        "warnings": [],
    }


def test_logs_unreadable_answer_is_incomplete_exit_2_with_the_error(world: World) -> None:
    result = world.submit(MINIMAL, run_id="lg-6")
    world.faults({"command": "jobs.logs", "action": "fail", "kind": "server"})
    code, stdout, _ = _npa(world, "logs", "lg-6", "--json")
    payload = json.loads(stdout)
    assert (code, payload["status"]) == (2, "incomplete")
    [job] = payload["jobs"]
    assert (job["job_id"], job["state"], job["exit_code"]) == (result.job_id, "unreadable", 1)
    assert "503 Server Error" in job["detail"]


def test_logs_secret_values_of_the_run_are_redacted(world: World) -> None:
    secret = "s3cr3t-value-9f2e"
    world.env["NPA_LOG_SECRET"] = secret
    world.submit(MINIMAL, run_id="lg-7", secret_env=["NPA_LOG_SECRET"])
    world.faults({"command": "jobs.logs", "action": "trailing", "text": f"key={secret} end"})
    for args in (("--json",), ()):
        code, stdout, stderr = _npa(world, "logs", "lg-7", *args)
        assert code == 0, stderr
        assert secret not in stdout + stderr
        assert f"key={runlogs.REDACTED} end" in stdout


def test_logs_follow_streams_each_line_while_the_job_still_runs(world: World) -> None:
    """The first line reaches the caller while ``sky jobs logs --follow`` is held open
    (a release FIFO the simulator waits on): it is streamed, not printed after exit."""
    world.faults(PENDING_FOREVER)
    result = world.submit(MINIMAL, run_id="lg-8")
    assert result.job_id is not None
    release = world.root / "release.fifo"
    os.mkfifo(release)
    world.faults(
        PENDING_FOREVER,
        {
            "command": "jobs.logs",
            "action": "hang",
            "after_accept": True,
            "release_fifo": str(release),
        },
    )
    events: list[str] = []

    def released(by: str) -> None:
        if "released" not in " ".join(events):
            events.append(f"released by {by}")
            with open(release, "w", encoding="ascii") as gate_:
                gate_.write("go\n")

    def on_line(job: JobLog, line: str) -> None:
        events.append(f"line {job.job_id}: {line}")
        if len(events) == 1:  # the job is still PENDING, and the call still open: end it now
            sky = world.services().sky(world.isolated, world.env, None)
            assert sky.cancel([result.job_id]).error_kind.value == "none"
            released("the first line")

    watchdog = threading.Timer(30.0, released, args=("the watchdog",))
    watchdog.start()
    try:
        report = runlogs.run_logs(
            "lg-8", env=world.env, follow=True, on_line=on_line, services=world.services()
        )
    finally:
        watchdog.cancel()
    assert events[:2] == [
        f"line {result.job_id}: (report, pid={1000 + result.job_id}) simulated output",
        "released by the first line",
    ]
    assert (
        events[-1] == f"line {result.job_id}: ✓ Managed job finished: {result.job_id} "
        "(status: CANCELLED)."
    )
    [job] = report.jobs
    assert (report.status, job.state, job.exit_code) == ("ok", "read", 103)  # JobExitCode
    assert _logs_calls(world) == [["jobs", "logs", "--follow", str(result.job_id)]]


def test_logs_follow_cli_prints_header_then_lines_and_ends_with_the_job(world: World) -> None:
    world.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    result = world.submit(MINIMAL, run_id="lg-9")
    code, stdout, stderr = _npa(world, "logs", "lg-9", "--follow")
    assert code == 0, stderr
    assert stdout.splitlines() == [
        f"==> wave 00 attempt 1: lg-9 (job {result.job_id}) <==",
        f"(report, pid={1000 + result.job_id}) simulated output",
        f"✓ Managed job finished: {result.job_id} (status: SUCCEEDED).",
    ]
    code, stdout, _ = _npa(world, "logs", "lg-9", "--follow", "--json")  # one document at the end
    payload = json.loads(stdout)
    assert (code, payload["follow"], payload["jobs"][0]["exit_code"]) == (0, True, 0)
    assert _logs_calls(world) == [["jobs", "logs", "--follow", str(result.job_id)]] * 2


def test_logs_of_a_plan_only_run_refused_exit_1_no_sky_call(world: World) -> None:
    _plan_only(world, "lg-10", "--infra", f"k8s/{CONTEXT}")
    code, stdout, _ = _npa(world, "logs", "lg-10", "--json")
    payload = json.loads(stdout)
    assert (code, payload["status"], payload["jobs"]) == (1, "refused", [])
    assert "plan-only" in payload["detail"]
    assert world.sim_calls() == []
