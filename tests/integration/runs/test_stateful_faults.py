"""A hypothesis state machine over random fault schedules, crashes and resumes, end to end.

Each example builds one world (simulator + Kubernetes double + npa home) and
applies a random sequence of: schedule a simulator fault for the next call of a
command, submit the run in a child killed after a random journal step, resume
it in-process, or cancel it. After every step the invariants of the launch
transaction must hold against the simulator's real state.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from npa_infra.errors import (
    RunCancelledError,
    RunLockedError,
    RunStateError,
    UncertainOutcomeError,
)
from npa_infra.journal.store import Journal
from tests.integration.runs.crash import run_killed_after
from tests.integration.runs.world import ROOT, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.skysim import harness

SPEC = ROOT / "workflows/testing/minimal.yaml"
RUN = "stateful-run"

FAULTS = st.sampled_from(
    [
        {"command": "jobs.launch", "action": "fail", "kind": "transport"},
        {"command": "jobs.launch", "action": "fail", "kind": "warmup"},
        {"command": "jobs.launch", "action": "fail", "kind": "rate_limit"},
        {"command": "jobs.launch", "action": "fail", "kind": "auth"},
        {"command": "jobs.launch", "action": "fail", "kind": "unknown"},
        {"command": "jobs.launch", "action": "accept_then_fail", "kind": "server"},
        {"command": "jobs.launch", "action": "accept_then_fail", "kind": "unknown"},
        {"command": "jobs.launch", "action": "request_fails", "kind": "transport"},
        {"command": "jobs.launch", "action": "request_fails", "kind": "context"},
        {"command": "jobs.launch", "action": "delay_appearance", "queue_calls": 2},
        {"command": "jobs.queue", "action": "fail", "kind": "server"},
        {"command": "jobs.queue", "action": "fail", "kind": "unknown"},
        {"command": "jobs.queue", "action": "garbage", "stdout": "not json"},
        {"command": "api.status", "action": "fail", "kind": "transport"},
        # partial answers: our rows left out while other users' are listed (faults.md)
        {"command": "jobs.queue", "action": "partial", "times": 1},
        {"command": "jobs.queue", "action": "partial", "times": 2},
    ]
)


class LaunchWorld(RuleBasedStateMachine):
    """Random faults, crashes and resumes of one run; never two jobs, never a lost run."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="npa-stateful-"))
        self.fake = FakeKube.start(self.tmp / "fakekube")
        self.world: World = make_world(self.tmp / "world", self.fake)
        self.rules: list[dict[str, Any]] = []
        self.submitted = False

    def teardown(self) -> None:
        self.fake.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize()
    def no_faults(self) -> None:
        self.world.faults()

    def _counter(self, command: str) -> int:
        state = harness.read_state(self.world.state_dir)
        return int(state.get("counters", {}).get(command, 0))

    @rule(fault=FAULTS, offset=st.integers(min_value=1, max_value=3))
    def schedule_fault(self, fault: dict[str, Any], offset: int) -> None:
        nth = self._counter(str(fault["command"])) + offset
        self.rules.append({**fault, "nth": nth})
        self.world.faults(*self.rules)

    @rule(step=st.integers(min_value=1, max_value=25))
    def submit_and_crash(self, step: int) -> None:
        if self.submitted:
            return
        self.submitted = True
        run_killed_after(step, lambda: self.world.submit(SPEC, run_id=RUN), self.tmp / "child.json")

    @rule()
    def resume(self) -> None:
        if not self._journal_knows_run():
            return
        jobs_before = len(self.world.sim_jobs())
        try:
            result = self.world.submit(SPEC, resume_run=RUN)
        except RunStateError:
            return  # e.g. a sticky terminal block: refused with a reason, nothing launched
        except UncertainOutcomeError:
            # the adopted id could not be re-verified (the queue failed): exit 2, and
            # nothing may have been launched while unproven
            assert len(self.world.sim_jobs()) == jobs_before
            return
        assert result.exit_code in (0, 1, 2, 130), result.to_json()
        if result.exit_code == 0:
            assert result.job_id is not None
            names = {t["job_name"] for t in result.transactions}
            assert [j["job_id"] for j in self.world.sim_jobs() if j["name"] in names] == [
                result.job_id
            ]

    @rule()
    def heal_and_resume(self) -> None:
        """Liveness: once the faults stop, one resume reaches a definite outcome."""
        if not self._journal_knows_run():
            return
        self.rules = []
        self.world.faults()
        try:
            result = self.world.submit(SPEC, resume_run=RUN)
        except RunStateError:
            return
        if result.status == "CANCELLED":
            return
        assert result.exit_code in (0, 1), result.to_json()
        names = {t["job_name"] for t in result.transactions}
        launched = [j for j in self.world.sim_jobs() if j["name"] in names]
        if result.exit_code == 0:
            assert [j["job_id"] for j in launched] == [result.job_id]

    @rule()
    def cancel(self) -> None:
        report = self.world.cancel(RUN)
        assert report.outcome in (
            "unknown_run",
            "not_submitted",
            "already_absent",
            "cancelled",
            "partial_cancellation",
            "verification_failed",
            "launch_in_progress",
        )

    @rule()
    def second_home_submit(self) -> None:
        """Another operator, from another npa home, submits the same run into the same
        SkyPilot state: it may adopt the job or be refused, never launch a second one."""
        other = dict(self.world.env, NPA_HOME=str(self.tmp / "second-home"))
        saved, self.world.env = self.world.env, other
        try:
            try:
                self.world.submit(SPEC, run_id=RUN)
            except RunStateError:  # that home already knows the run: continue it
                self.world.submit(SPEC, resume_run=RUN)
        except (RunStateError, RunLockedError, UncertainOutcomeError, RunCancelledError):
            pass
        finally:
            self.world.env = saved

    @rule()
    def status(self) -> None:
        """A reader at any moment: never raises for an expected state, never mutates."""
        if not self._journal_knows_run():
            return
        calls = [
            c for c in self.world.sim_calls() if c[:2] in (["jobs", "launch"], ["jobs", "cancel"])
        ]
        report = self.world.status(RUN)
        assert report.to_json()["run_id"] == RUN
        after = [
            c for c in self.world.sim_calls() if c[:2] in (["jobs", "launch"], ["jobs", "cancel"])
        ]
        assert after == calls

    def _journal_knows_run(self) -> bool:
        if not (self.world.home / "journal.sqlite3").exists():
            return False
        journal = Journal.open(self.world.home)
        try:
            return journal.get_run(RUN) is not None
        finally:
            journal.close()

    @invariant()
    def never_two_jobs_for_one_name(self) -> None:
        names = [j["name"] for j in self.world.sim_jobs()]
        assert len(names) == len(set(names)), names

    @invariant()
    def every_cancel_names_exact_ids_of_this_run(self) -> None:
        names = {j["job_id"]: j["name"] for j in self.world.sim_jobs()}
        for call in self.world.sim_calls():
            if call[:2] != ["jobs", "cancel"]:
                continue
            ids = call[3:]
            assert call[2] == "--yes" and ids and all(i.isdigit() for i in ids), call
            assert all(str(names.get(int(i), "")).startswith(RUN) for i in ids), (call, names)

    @invariant()
    def every_journaled_job_id_is_that_attempts_job(self) -> None:
        if not self._journal_knows_run():
            return
        journal = Journal.open(self.world.home)
        try:
            attempts = journal.attempts(RUN)
        finally:
            journal.close()
        jobs = {j["job_id"]: j["name"] for j in self.world.sim_jobs()}
        for attempt in attempts:
            if attempt.job_id is not None:
                assert jobs.get(attempt.job_id) == attempt.job_name, (attempt, jobs)


LaunchWorld.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_random_fault_schedules_never_duplicate_or_lose_a_run = LaunchWorld.TestCase
