"""A crash around npa's own recovery cancel (issue 15 item 4; faults.md invariants 3 and 5).

A runtime wave is held PENDING by an Unschedulable pod (a transient capacity
blocker) past a short ``--infrastructure-grace-seconds``, so npa journals a
cancel intent and cancels the attempt to relaunch it. Two crash points:

- right after the cancel reached the API server: a real ``npa`` process is
  SIGKILLed while its ``sky jobs cancel`` child hangs after the server acted
  (the simulator's call log and job record say when), then a real
  ``--resume-run`` must carry the recovery through;
- between the intent and the cancel: a forked submit dies right after the
  journal step that wrote the intent (``crash.run_killed_after``), so no
  cancel was sent; the resume sends it, once.

Either way: attempt 2 launched exactly once, the recovery budget spent
exactly once, the run not failed, one job per name, and every cancel the
simulator saw names a job whose attempt has a journaled intent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npa_infra.journal.store import Journal
from npa_infra.runs import resume
from tests.integration.runs import supervised
from tests.integration.runs.crash import KILLED, count_writes, run_killed_after
from tests.integration.runs.world import CONTEXT, ROOT, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.skysim import harness

RUN = "rc-1"
UNSCHEDULABLE = supervised.UNSCHEDULABLE_FIRST
BLOCKED = supervised.BLOCKED_THEN_RUNS
# the first cancel acts, then its child hangs: npa cannot journal anything after it
HANG_AFTER_CANCEL = {
    "command": "jobs.cancel",
    "nth": 1,
    "action": "hang",
    "after_accept": True,
    "seconds": 120,
}
WAIT = 120.0  # the longest any step here may take before the test gives up


# The real CLI's entry with the real services, but for the drift gate's look at SkyPilot's fixed
# ports: this test is not about them, and an unrelated process holds them (issue 31).
_ENTRY = """\
import sys
sys.argv = ["npa", *sys.argv[1:]]
from npa_infra.cli.main import run
from npa_infra.workflow.target.services import Services
from tests.support.freeports import nothing_listens
run(Services(api_ports=nothing_listens))
"""


def _npa(*args: str) -> list[str]:
    return [sys.executable, "-c", _ENTRY, "workbench", "workflow", "submit", *args]


def _process_env(world: World) -> dict[str, str]:
    return {
        **world.env,
        "PYTHONPATH": str(ROOT),  # this checkout's npa_infra, whatever the venv points at
        "NPA_SKYPILOT_BIN": str(world.sky_bin),
    }


def _submit_args(spec: Path) -> list[str]:
    return [
        str(spec),
        "--infra",
        f"k8s/{CONTEXT}",
        "--no-resolve-accelerators",
        "--no-preflight-images",
        "--no-stage-src",
        "--poll-seconds",
        "0.1",
        "--infrastructure-grace-seconds",
        "0.5",
        "--max-wait-seconds",
        "60",
        "--heartbeat-seconds",
        "0",
        "--stale-after-seconds",
        "0",
        "--json",
    ]


def _await(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Block until ``ready()`` (an event in the simulator's records), or fail."""
    deadline = time.monotonic() + WAIT
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"npa exited {proc.returncode} before {what}: {proc.stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {WAIT}s")
        time.sleep(0.02)  # polling the simulator's state file, not waiting for time to pass


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        children = (task / "children").read_text().split()
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


def _kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL npa and then the ``sky`` children it started (by pid, none other)."""
    children = _descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=WAIT)
    for child in children:
        with contextlib.suppress(ProcessLookupError):  # it may have died with npa
            os.kill(child, signal.SIGKILL)


def _cancel_calls(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "cancel"]]


def _cancel_acted(world: World) -> bool:
    return any(j.get("cancel") for j in world.sim_jobs())


def _journal(world: World) -> tuple[list[tuple[str, dict[str, Any]]], list[Any], dict[str, Any]]:
    journal = Journal.open(world.home)
    try:
        events = [(e.kind, dict(e.data)) for e in journal.events(RUN)]
        attempts = journal.attempts(RUN, 0)
        budgets = dict(journal.waves(RUN)[0].budgets)
    finally:
        journal.close()
    return events, attempts, budgets


def _assert_recovered_once(world: World) -> None:
    """Attempt 2 exactly once, the budget spent exactly once, every cancel intended."""
    events, attempts, budgets = _journal(world)
    names = [j["name"] for j in sorted(world.sim_jobs(), key=lambda j: j["job_id"])]
    assert names == [f"{RUN}-00-train", f"{RUN}-00-train-a2"], names  # one job per name
    assert [a.attempt for a in attempts] == [1, 2]
    spends = [d for k, d in events if k == "infrastructure_recovery"]
    assert len(spends) == 1, spends
    assert (
        budgets["infrastructure_recoveries_left"] == budgets["infrastructure_recoveries_total"] - 1
    )
    intended = {
        int(a.data[resume.INTENT_KEY]["job_id"]) for a in attempts if a.data.get(resume.INTENT_KEY)
    }
    cancelled = {int(c[3]) for c in _cancel_calls(world)}
    assert cancelled and cancelled <= intended, (cancelled, intended)  # faults.md invariant 5
    assert intended == {world.sim_jobs()[0]["job_id"]}
    first = attempts[0].data
    assert first[resume.INTENT_KEY]["spent"] is True
    assert first[resume.OUTCOME_KEY]["outcome"] == "verified"
    kind, last = events[-1]
    assert (kind, last["status"], last["error"]) == ("outcome", "SUCCEEDED", None), events[-1]


def test_crash_right_after_recovery_cancel_resume_continues_the_recovery(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(*BLOCKED, HANG_AFTER_CANCEL)
    spec = supervised.single_wave_spec(tmp_path / "spec")
    env = _process_env(world)
    proc = subprocess.Popen(
        _npa(*_submit_args(spec), "--run-id", RUN),
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _await("cancel acted on by the API server", lambda: _cancel_acted(world), proc)
        assert len(_cancel_calls(world)) == 1
        _kill(proc)
    finally:
        if proc.poll() is None:
            _kill(proc)
    assert proc.returncode == KILLED
    _, attempts, budgets = _journal(world)
    assert len(attempts) == 1 and attempts[0].data.get(resume.INTENT_KEY)  # intent before cancel
    assert (
        resume.OUTCOME_KEY not in attempts[0].data or attempts[0].data[resume.OUTCOME_KEY] is None
    )
    assert budgets["infrastructure_recoveries_left"] == 1  # not spent before the relaunch
    [job] = world.sim_jobs()
    assert job["cancel"]["immediate"]  # the PENDING job is CANCELLED now: by npa itself

    resumed = subprocess.run(
        _npa(*_submit_args(spec), "--resume-run", RUN),
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert json.loads(resumed.stdout)["status"] == "SUCCEEDED"
    assert len(_cancel_calls(world)) == 1  # the resume saw its own cancel done: none resent
    _assert_recovered_once(world)


def test_crash_between_intent_and_cancel_resume_sends_the_intended_cancel_once(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    spec = supervised.single_wave_spec(tmp_path / "spec")
    options: dict[str, Any] = {
        "poll_seconds": 5.0,
        "infrastructure_grace_seconds": 20.0,
        "max_wait_seconds": 600.0,
    }
    probe = make_world(tmp_path / "probe", fake_kube, pods=True)
    probe.faults(*BLOCKED)
    _, labels = count_writes(lambda: supervised.run(probe, spec, run_id=RUN, **options))
    events, _, _ = _journal(probe)
    steps = [k for k, _ in events]
    assert "cancel_intent" in steps and "infrastructure_recovery" in steps
    # the journal step that wrote the intent: the first attempt step, the cancel follows it
    step = labels.index("attempt_step") + 1

    world = make_world(tmp_path / "w", fake_kube, pods=True)
    world.faults(*BLOCKED)
    code = run_killed_after(
        step, lambda: supervised.run(world, spec, run_id=RUN, **options), tmp_path / "child.json"
    )
    assert code == KILLED
    _, attempts, _ = _journal(world)
    assert attempts[-1].data.get(resume.INTENT_KEY), "the crash came after the intent"
    assert _cancel_calls(world) == []  # and before the cancel
    [job] = world.sim_jobs()
    assert not job.get("cancel")

    resumed = supervised.run(world, spec, resume_run=RUN, **options)
    assert resumed.exit_code == 0, resumed.to_json()
    assert resumed.status == "SUCCEEDED"
    assert _cancel_calls(world) == [["jobs", "cancel", "--yes", str(job["job_id"])]]
    _assert_recovered_once(world)
    assert harness.read_state(world.state_dir)["counters"]["jobs.launch"] == 2
