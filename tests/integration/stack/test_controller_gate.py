"""``npa skypilot cleanup-controller`` and ``npa stack destroy``'s controller gate, against the
``sky`` simulator (issue 16; skypilot-0.12.md §3.3, §4.2, §5.4; faults.md).

The real ``SkyCli`` runs the simulator (``NPA_SKYPILOT_BIN``); other operators' jobs are
launches with the ``as_user`` fault (same API server, same controller, another user), so
only the all-users queue shows them. Time is a fake clock: each wait is one poll, and the
simulator's CANCELLING jobs advance one step per queue read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.journal import inflight
from npa_infra.journal.store import Journal
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.stack.models import ControllerStatus, DestroyStatus
from npa_infra.workflow.operations import controllercleanup, teardown
from npa_infra.workflow.target.services import Clock, Services
from tests.integration.skypilot.simenv import Sim, make_sim
from tests.support.freeports import nothing_listens
from tests.support.skysim import harness
from tests.unit.journal import a_record, a_run, a_wave, an_attempt

STACK = "dev"
FOREIGN = {
    "command": "jobs.launch",
    "action": "as_user",
    "user_hash": "alice1",
    "user_name": "alice",
}


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@pytest.fixture
def sim(tmp_path: Path) -> Sim:
    (tmp_path / "sim").mkdir()
    return make_sim(tmp_path / "sim")


@pytest.fixture
def env(sim: Sim, tmp_path: Path) -> dict[str, str]:
    return {
        **sim.env,
        "HOME": str(tmp_path / "user"),
        "NPA_HOME": str(tmp_path / "home"),
        "NPA_SKYPILOT_BIN": str(sim.binary),
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def services(sim: Sim, clock: FakeClock, lines: list[str]) -> Services:
    return Services(
        clock=Clock(clock.now, clock.sleep, lambda: 0.0),
        progress=lines.append,
        isolated_dir=sim.root / "state",
        api_ports=nothing_listens,  # the gate's port rule is not what these tests are about
    )


def launch(sim: Sim, env: dict[str, str], name: str, *statuses: str, foreign: bool = False) -> int:
    rules: list[dict[str, Any]] = [
        {"command": "jobs.launch", "action": "timeline", "statuses": list(statuses)}
    ]
    sim.faults(*rules, *([FOREIGN] if foreign else []))
    cli = SkyCli(sim.binary, sim.isolated(), env, check_ports=False)
    assert cli.launch(sim.task(), name=name, infra="k8s/npa-ctx").accepted
    sim.faults()
    state = sim.state()
    return int(max(j["job_id"] for j in state["jobs"] if j["name"] == name))


def calls(sim: Sim, command: str) -> list[list[str]]:
    state_dir = sim.state_dir()
    if not state_dir.exists():
        return []
    recorded = harness.read_state(state_dir)["calls"]
    return [c["argv"] for c in recorded if c["argv"][: len(command.split())] == command.split()]


def cleanup(
    env: dict[str, str], services: Services, *, yes: bool = True, deadline: float = 60.0
) -> Any:
    return controllercleanup.cleanup_controller(
        STACK, env=env, yes=yes, deadline_seconds=deadline, services=services
    )


# -- cleanup-controller ------------------------------------------------------------------------
def test_cleanup_foreign_running_job_refuses_naming_it(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    """A job of another user, never in this machine's journal, holds the controller."""
    job_id = launch(sim, env, "their-train", "RUNNING", foreign=True)

    report = cleanup(env, services)

    assert (report.status, report.exit_code) == (ControllerStatus.REFUSED, 1)
    assert [j.model_dump() for j in report.blocking_jobs] == [
        {"id": job_id, "name": "their-train", "user": "alice", "status": "RUNNING"}
    ]
    assert report.next[0].startswith(f"job {job_id} (their-train) of user alice")
    assert calls(sim, "down") == []
    assert calls(sim, "jobs queue")[-1] == [
        "jobs",
        "queue",
        "--all",
        "--all-users",
        "--output",
        "json",
    ]


def test_cleanup_job_of_a_run_of_this_home_next_names_its_exact_cancel(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    """A blocking job this home launched is named by its run; a foreign one by its user."""
    mine = launch(sim, env, "r-mine-00-train", "RUNNING")
    theirs = launch(sim, env, "their-train", "RUNNING", foreign=True)
    attempt = an_attempt("r-mine", job_name="r-mine-00-train")
    with Journal.open(Path(env["NPA_HOME"])) as journal:
        journal.create_run(
            a_run("r-mine", stack=STACK, data={"isolated_config_dir": str(sim.root / "state")})
        )
        journal.upsert_wave(a_wave("r-mine"))
        journal.create_attempt(attempt)
        record = a_record(attempt, 1, state="submitted", job_id=mine, existence="present")
        journal.checkpoint("r-mine", 0, 1, record, now=2.0)

    report = cleanup(env, services)

    assert report.status is ControllerStatus.REFUSED
    assert {j.id for j in report.blocking_jobs} == {mine, theirs}
    assert f"npa workbench workflow cancel r-mine -s {STACK} --json" in report.next
    assert f"npa workbench workflow status r-mine -s {STACK} --watch --json" in report.next
    foreign = [step for step in report.next if step.startswith(f"job {theirs} ")]
    assert len(foreign) == 1 and "of user alice" in foreign[0]
    assert report.next[-1] == f"npa skypilot cleanup-controller -s {STACK} --yes"
    assert calls(sim, "down") == []


def test_cleanup_cancelling_jobs_drain_then_tears_down(
    sim: Sim, env: dict[str, str], services: Services, clock: FakeClock, lines: list[str]
) -> None:
    launch(sim, env, "theirs", "CANCELLING", "CANCELLING", "CANCELLED", foreign=True)
    launch(sim, env, "mine", "SUCCEEDED")

    report = cleanup(env, services, deadline=60.0)

    assert (report.status, report.exit_code) == (ControllerStatus.REMOVED, 0)
    assert len(clock.sleeps) == 2  # two CANCELLING reads, then CANCELLED
    assert "CANCELLING" in lines[0] and "of user alice" in lines[0]
    assert "60s deadline" in lines[0]
    (down,) = calls(sim, "down")
    assert "--purge" not in down
    assert sim.state()["controllers"] == {}


def test_cleanup_cancelling_past_deadline_times_out(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "theirs", *["CANCELLING"] * 20, foreign=True)

    report = cleanup(env, services, deadline=12.0)

    assert (report.status, report.exit_code) == (ControllerStatus.TIMED_OUT, 1)
    assert report.blocking_jobs[0].status == "CANCELLING"
    assert calls(sim, "down") == []


def test_cleanup_in_progress_refusal_retried_after_the_queue_drains(
    sim: Sim, env: dict[str, str], services: Services, lines: list[str]
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    sim.faults({"command": "down", "nth": 1, "action": "refuse_down"})

    report = cleanup(env, services)

    assert report.status is ControllerStatus.REMOVED
    assert (report.sky_down_calls, len(calls(sim, "down"))) == (2, 2)
    assert any("In-progress" in line or "in-progress" in line for line in lines)
    assert inflight.controller_down(sim.root / "state") is None


def test_cleanup_other_down_failure_stops_with_its_text(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    sim.faults({"command": "down", "action": "fail", "stderr": "RuntimeError: quota service down"})

    report = cleanup(env, services)

    assert (report.status, report.exit_code) == (ControllerStatus.FAILED, 1)
    assert "RuntimeError: quota service down" in report.detail
    assert len(calls(sim, "down")) == 1  # not retried


def test_cleanup_unreadable_queue_unproven_exit_2(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    sim.faults({"command": "jobs.queue", "action": "fail", "kind": "server"})

    report = cleanup(env, services)

    assert (report.status, report.exit_code) == (ControllerStatus.UNKNOWN, 2)
    assert calls(sim, "down") == []


def test_cleanup_without_yes_reports_and_removes_nothing(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")

    report = cleanup(env, services, yes=False)

    assert (report.status, report.exit_code) == (ControllerStatus.WOULD_REMOVE, 1)
    assert report.next == [f"npa skypilot cleanup-controller --stack {STACK} --yes"]
    assert calls(sim, "down") == []
    assert sim.state()["controllers"] != {}


def test_cli_cleanup_already_gone_twice_exit_zero(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    runner = CliRunner()
    args = ["skypilot", "cleanup-controller", "-s", STACK, "--yes", "--json"]

    first = runner.invoke(app, args, obj=services, env=env, catch_exceptions=False)
    second = runner.invoke(app, args, obj=services, env=env, catch_exceptions=False)

    assert (first.exit_code, json.loads(first.stdout)["status"]) == (0, "removed")
    assert second.exit_code == 0
    body = json.loads(second.stdout)
    assert (body["status"], body["blocking_jobs"], body["deadline_seconds"]) == (
        "already_gone",
        [],
        600.0,
    )
    assert len(calls(sim, "down")) == 1  # the second run proved absence from the queue


def test_cli_cleanup_refusal_text_names_job_and_user(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    job_id = launch(sim, env, "their-train", "PENDING", foreign=True)

    result = CliRunner().invoke(
        app, ["skypilot", "cleanup-controller", "--stack", STACK], obj=services, env=env
    )

    assert result.exit_code == 1
    assert f"job {job_id} 'their-train' of user alice (PENDING)" in result.stdout
    assert "of user alice is no run of this npa home: its owner cancels it" in result.stderr


def test_cli_cleanup_requires_a_stack(services: Services, env: dict[str, str]) -> None:
    result = CliRunner().invoke(
        app, ["skypilot", "cleanup-controller", "--yes"], obj=services, env=env
    )

    assert result.exit_code == 64  # a usage error: a destructive command has no default stack
    assert "--stack" in result.output


def test_cli_cleanup_unknown_stack_refused_never_already_gone(
    sim: Sim, env: dict[str, str], clock: FakeClock
) -> None:
    """A typo names no stack file and no state directory: exit 1, not a successful no-op."""
    real_dirs = Services(clock=Clock(clock.now, clock.sleep, lambda: 0.0))

    result = CliRunner().invoke(
        app,
        ["skypilot", "cleanup-controller", "-s", "ghost", "--yes", "--json"],
        obj=real_dirs,
        env=env,
    )

    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["category"] == "config"
    assert "no stack named 'ghost'" in error["message"] and "Pulumi.ghost.yaml" in error["message"]
    assert "known: " in error["remedy"] and "dev" in error["remedy"]
    assert calls(sim, "jobs queue") == [] and calls(sim, "down") == []


def test_cleanup_never_created_directory_already_gone_runs_nothing(
    sim: Sim, env: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    given = Services(
        clock=Clock(clock.now, clock.sleep, lambda: 0.0), isolated_dir=tmp_path / "none"
    )

    report = cleanup(env, given)

    assert (report.status, report.reason) == (
        ControllerStatus.ALREADY_GONE,
        "no_controller_identity",
    )
    assert not (tmp_path / "none").exists()  # no identity was minted


def test_cleanup_killed_during_sky_down_then_rerun_finishes(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    """faults.md invariant 5: the down's record is durable before ``sky down`` is sent; a
    process SIGKILLed while the down runs leaves it, and the rerun tears the controller down."""
    launch(sim, env, "mine", "SUCCEEDED")
    sim.kill_during("down", lambda: cleanup(env, services))
    recorded = inflight.controller_down(sim.root / "state")
    assert recorded is not None and recorded.stack == STACK

    report = cleanup(env, services)  # the rerun

    assert report.status is ControllerStatus.REMOVED
    assert inflight.controller_down(sim.root / "state") is None
    assert sim.state()["controllers"] == {}


# -- issue 24 item 9: a launch in flight holds the controller up --------------------------------
def record_launch(sim: Sim, run_id: str, home: str) -> Path:
    """The in-flight record a submit writes before its launch request (``journal.inflight``)."""
    path = inflight.inflight_path(sim.root / "state", run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    launch_record = inflight.InflightLaunch(
        home=home, logical_launch_id=f"{run_id}-l1", job_name=f"{run_id}-00-train",
        launch_sequence=1, request_ids=("req-1",),
    )  # fmt: skip
    inflight.write(path, launch_record)
    return path


def test_cleanup_launch_in_flight_queue_quiet_waits_then_refuses_never_downs(
    sim: Sim, env: dict[str, str], services: Services, lines: list[str]
) -> None:
    """A launch accepted but not yet in the queue (its record stands, the queue shows nothing
    active) holds ``sky down`` off: waited for within the shown deadline, then refused with
    the run's own resume command and its cancel."""
    launch(sim, env, "mine", "SUCCEEDED")
    with Journal.open(Path(env["NPA_HOME"])) as journal:
        journal.create_run(a_run("r-flight", stack=STACK))
    record_launch(sim, "r-flight", env["NPA_HOME"])

    report = cleanup(env, services, deadline=12.0)

    assert (report.status, report.exit_code) == (ControllerStatus.TIMED_OUT, 1)
    assert report.reason == "launches_in_flight_past_deadline"
    assert [launch.model_dump() for launch in report.launches_in_flight] == [
        {"run_id": "r-flight", "job_name": "r-flight-00-train", "home": env["NPA_HOME"]}
    ]
    assert report.next == [
        "npa workbench workflow submit s.yaml --resume-run r-flight",
        f"npa workbench workflow cancel r-flight -s {STACK} --json",
        f"npa skypilot cleanup-controller -s {STACK} --yes",
    ]
    assert "waiting for 1 launch(es) in flight" in lines[0] and "12s deadline" in lines[0]
    assert "run r-flight's launch" in lines[0]
    assert calls(sim, "down") == []
    assert inflight.controller_down(sim.root / "state") is None
    assert sim.state()["controllers"] != {}


def test_cleanup_launch_in_flight_without_controller_not_already_gone(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    """No controller yet, but a launch in flight may be starting one: not "already gone"."""
    sim.isolated().user_id(env)  # the identity a first submit mints before its launch
    record_launch(sim, "r-first", "/elsewhere/npa-home")

    report = cleanup(env, services, yes=False)

    assert (report.status, report.reason) == (
        ControllerStatus.REFUSED,
        "launches_in_flight_unconfirmed",
    )
    assert report.next[0] == (
        f"NPA_HOME=/elsewhere/npa-home npa workbench workflow cancel r-first -s {STACK} --json"
    )
    assert calls(sim, "down") == []


def test_cleanup_launch_settles_during_the_wait_then_tears_down(
    sim: Sim, env: dict[str, str], clock: FakeClock, lines: list[str]
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    path = record_launch(sim, "r-flight", env["NPA_HOME"])

    def settle(seconds: float) -> None:  # the launch's job id is adopted: its record goes
        clock.sleep(seconds)
        inflight.remove(path)

    given = Services(
        clock=Clock(clock.now, settle, lambda: 0.0),
        progress=lines.append,
        isolated_dir=sim.root / "state",
        api_ports=nothing_listens,
    )
    report = cleanup(env, given, deadline=60.0)

    assert (report.status, report.sky_down_calls) == (ControllerStatus.REMOVED, 1)
    assert len(clock.sleeps) == 1 and "launch(es) in flight" in lines[0]


def test_cleanup_launch_recorded_after_the_decision_sends_no_down(
    sim: Sim, env: dict[str, str], clock: FakeClock
) -> None:
    """The race: a submit records its launch after the gate decided DOWN. The down record is
    durable first, then the launches are listed again: this one is seen, nothing is sent."""
    launch(sim, env, "mine", "SUCCEEDED")
    seen: list[str] = []

    def progress(line: str) -> None:
        seen.append(line)
        if line.startswith("tearing down"):
            record_launch(sim, "r-late", env["NPA_HOME"])

    given = Services(
        clock=Clock(clock.now, clock.sleep, lambda: 0.0),
        progress=progress,
        isolated_dir=sim.root / "state",
        api_ports=nothing_listens,
    )
    report = cleanup(env, given, deadline=12.0)

    assert report.status is ControllerStatus.TIMED_OUT
    assert [launch.run_id for launch in report.launches_in_flight] == ["r-late"]
    assert (report.sky_down_calls, calls(sim, "down")) == (0, [])
    assert inflight.controller_down(sim.root / "state") is None  # the submit may go on


def test_cleanup_unlistable_launch_records_unproven_exit_2(
    sim: Sim, env: dict[str, str], services: Services
) -> None:
    launch(sim, env, "mine", "SUCCEEDED")
    launches = inflight.inflight_path(sim.root / "state", "x").parent
    launches.parent.mkdir(parents=True, exist_ok=True)
    launches.write_text("", encoding="utf-8")  # not a directory: the listing fails

    report = cleanup(env, services)

    assert (report.status, report.reason) == (ControllerStatus.UNKNOWN, "launch_records_unknown")
    assert calls(sim, "down") == []


# -- npa stack destroy: the same gate ----------------------------------------------------------
def _project(tmp_path: Path) -> Path:
    repo = Path(__file__).resolve().parents[3]
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((repo / "Pulumi.yaml").read_text(encoding="utf-8"))
    (root / "stacks" / "Pulumi.dev.yaml").write_text(
        "config:\n  npa-infra:context: kind-npa-dev\n  npa-infra:namespace: npa-dev\n"
        "  npa-infra:serviceAccount: npa-runner\n",
        encoding="utf-8",
    )
    return root


def _destroy(
    tmp_path: Path, sim: Sim, env: dict[str, str], services: Services, sink: list[Any]
) -> Any:
    from npa_infra.stack import api
    from npa_infra.stack.runner import RunnerSettings, StackRunner
    from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand, load_events

    repo = Path(__file__).resolve().parents[3]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    kubeconfig = tmp_path / "stack-kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]\n'
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: kind-npa-dev, context: {cluster: c, user: u, namespace: npa-dev}}]\n"
        "current-context: kind-npa-dev\n",
        encoding="utf-8",
    )
    outputs = {"isolated_config_dir": str(sim.root / "state"), "controller_name": "x"}
    history = [{"kind": "destroy", "startTime": "2026-01-01T00:00:00.000000Z", "message": "",
                "environment": {}, "config": {}, "result": "succeeded",
                "resourceChanges": {"delete": 9}}]  # fmt: skip
    scripts: dict[str, Any] = {
        "stack output": Replay(stdout=json.dumps(outputs)),
        "destroy": Replay(
            events=load_events(repo / "tests" / "fixtures" / "pulumi" / "delete.jsonl")
        ),
        "stack history": Replay(stdout=json.dumps(history)),
    }

    def factory(settings: RunnerSettings) -> StackRunner:
        command = ReplayPulumiCommand(scripts)
        sink.append(command)
        return StackRunner(settings, command=command)

    stack_env = {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "KUBECONFIG": str(kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "passphrase"),
    }
    request = api.StackRequest(stack=STACK, project_root=_project(tmp_path))
    return teardown.destroy_stack(
        request,
        env=stack_env,
        yes=True,
        engine_factory=factory,
        services=services,
        deadline_seconds=60.0,
    )


def test_destroy_refused_by_a_foreign_job_engine_destroy_not_called(
    tmp_path: Path, sim: Sim, env: dict[str, str], services: Services
) -> None:
    job_id = launch(sim, env, "their-train", "RECOVERING", foreign=True)
    sink: list[Any] = []

    result = _destroy(tmp_path, sim, env, services, sink)

    assert (result.status, result.exit_code) == (DestroyStatus.BLOCKED_ACTIVE_JOBS, 1)
    assert result.gate.verdict == "clear"  # the journal alone would have let it pass
    assert result.controller is not None
    assert [(j.id, j.user) for j in result.controller.blocking_jobs] == [(job_id, "alice")]
    assert "destroy" not in [c.operation for c in sink[0].calls]
    assert calls(sim, "down") == []


def test_destroy_launch_in_flight_blocks_engine_destroy_not_called(
    tmp_path: Path, sim: Sim, env: dict[str, str], services: Services
) -> None:
    """``stack destroy`` runs the same gate: a launch not yet in the queue holds it."""
    launch(sim, env, "mine", "SUCCEEDED")
    record_launch(sim, "r-flight", env["NPA_HOME"])
    sink: list[Any] = []

    result = _destroy(tmp_path, sim, env, services, sink)

    assert (result.status, result.exit_code) == (DestroyStatus.BLOCKED_ACTIVE_JOBS, 1)
    assert result.controller is not None
    assert [launch.run_id for launch in result.controller.launches_in_flight] == ["r-flight"]
    assert "destroy" not in [c.operation for c in sink[0].calls]
    assert calls(sim, "down") == []


def test_destroy_drains_cancelling_jobs_then_destroys(
    tmp_path: Path, sim: Sim, env: dict[str, str], services: Services, clock: FakeClock
) -> None:
    launch(sim, env, "theirs", "CANCELLING", "CANCELLED", foreign=True)
    sink: list[Any] = []

    result = _destroy(tmp_path, sim, env, services, sink)

    assert (result.status, result.exit_code) == (DestroyStatus.DESTROYED, 0)
    assert result.controller is not None and result.controller.status is ControllerStatus.REMOVED
    assert len(clock.sleeps) == 1
    assert len(calls(sim, "down")) == 1
    assert [c.operation for c in sink[0].calls][-2:] == ["destroy", "stack history"]
