"""``status``, ``list`` and the SDK tell one status for every journal state (runs.runview).

Issue 24 item 5: a run whose launch failed was ``NOT_SUBMITTED`` to ``status`` and
``FAILED`` to ``list``, and a run left ``LAUNCHING`` by a submit that died was
``NOT_SUBMITTED`` while its job ran. Every journal state (hypothesis: any status, lock
holder, job ids, plan-only twins) must now read the same through ``run_status`` (cached,
the SDK), ``all_status``, ``list_runs`` and the CLI, and equal ``runview.run_status``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.journal import lock
from npa_infra.journal.records import AttemptRow, PlanRow, RunRow, WaveRow
from npa_infra.journal.store import Journal
from npa_infra.runs import runview
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.workflow.operations import runlist, runstatus
from tests.strategies import journal_run_states

_HOLDERS = {
    "none": runview.Holder.GONE,
    "released": runview.Holder.GONE,
    "alive": runview.Holder.ALIVE,
    "dead": runview.Holder.GONE,
    "other_host": runview.Holder.UNKNOWN,
}


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # reaped: no process has it (pid reuse within a test is negligible)


def _write_lock(home: Path, run: dict[str, Any]) -> None:
    path = lock.lock_path(home, run["stack"], run["run_id"])
    kind = run["holder"]
    if kind == "none":
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    holder: dict[str, Any] = {}
    if kind == "alive":
        holder = {"pid": os.getpid(), "host": socket.gethostname()}
    elif kind == "dead":
        holder = {"pid": _dead_pid(), "host": socket.gethostname()}
    elif kind == "other_host":
        holder = {"pid": os.getpid(), "host": "another-host.invalid"}
    path.write_text(json.dumps(holder) if holder else "", encoding="utf-8")


def _journal(home: Path, runs: list[dict[str, Any]]) -> None:
    with Journal.open(home) as journal:
        for run in runs:
            at, run_id, stack = run["created_at"], run["run_id"], run["stack"]
            common = {"run_id": run_id, "stack": stack, "workflow": "wf", "mode": "one-shot"}
            common |= {"spec_path": "s.yaml", "fingerprint": "f" * 16}
            if run["plan_only"] or run["planned_too"]:
                journal.record_plan(
                    PlanRow(**common, status="PLANNED", created_at=at - 0.5, updated_at=at - 0.5)
                )
            if run["plan_only"]:
                continue
            journal.create_run(
                RunRow(
                    **common,
                    resume_argv=["npa", "submit", "--resume-run", run_id],
                    status=run["status"],
                    lifecycle_state="mutating",
                    created_at=at,
                    updated_at=at,
                    data={"context": "ctx"},
                )
            )
            for wave, job_id in enumerate(run["job_ids"]):
                journal.upsert_wave(
                    WaveRow(
                        run_id=run_id,
                        wave_index=wave,
                        key=f"{wave:03d}",
                        name=f"j{wave}",
                        kind="single",
                        states=[],
                        status="pending",
                        updated_at=at,
                    )
                )
                journal.create_attempt(
                    AttemptRow(
                        run_id=run_id,
                        wave_index=wave,
                        attempt=1,
                        job_name=f"{run_id}-{wave}",
                        logical_launch_id=f"npa-launch-{run_id}-{wave}",
                        created_at=at,
                        status="submitted",
                        updated_at=at,
                        job_id=job_id,
                    )
                )
            _write_lock(home, run)


def _expected(run: dict[str, Any]) -> str:
    facts = runview.RunFacts(run["status"], run["plan_only"], _HOLDERS[run["holder"]])
    return runview.run_status(facts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=journal_run_states())
def test_status_agreement_status_list_sdk_one_status_per_journal_state(
    runs: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {"NPA_HOME": str(home), "HOME": tmp, "PATH": os.environ.get("PATH", "")}
        _journal(home, runs)
        listed = {r.run_id: r.status for r in runlist.list_runs(env=env, all_runs=True).runs}
        every = {r.run_id: r.status for r in runstatus.all_status(env=env, cached=True).runs}
        for run in runs:
            expected = _expected(run)
            report = runstatus.run_status(run["run_id"], env=env, cached=True)
            assert report.status == listed[run["run_id"]] == expected, run
            assert report.exit_code == runview.exit_code(expected)
            if run["run_id"] in every:
                assert every[run["run_id"]] == expected, run
            if expected == RunStatus.RECOVERY_REQUIRED:
                assert report.remedy.endswith(f"--resume-run {run['run_id']}")


def test_runview_launching_with_its_process_gone_is_recovery_required() -> None:
    gone = runview.RunFacts(RunStatus.LAUNCHING, holder=runview.Holder.GONE)
    alive = runview.RunFacts(RunStatus.LAUNCHING, holder=runview.Holder.ALIVE)
    unknown = runview.RunFacts(RunStatus.LAUNCHING)
    assert runview.run_status(gone) == RunStatus.RECOVERY_REQUIRED
    assert not runview.refinable(gone)
    assert runview.run_status(alive) == runview.run_status(unknown) == RunStatus.LAUNCHING
    assert runview.refinable(alive)
    assert runview.exit_code(RunStatus.RECOVERY_REQUIRED) == 2
    for settled in (RunStatus.FAILED, RunStatus.CANCELLED):
        assert runview.exit_code(settled) == 1 and not runview.refinable(runview.RunFacts(settled))


def test_status_agreement_cli_status_and_list_print_the_same_word(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runs = [
        {"run_id": "c-1", "plan_only": False, "status": "LAUNCHING", "stack": None,
         "holder": "dead", "job_ids": [], "planned_too": False, "created_at": 1.0},
        {"run_id": "c-2", "plan_only": False, "status": "ROLLED_BACK", "stack": None,
         "holder": "released", "job_ids": [], "planned_too": True, "created_at": 2.0},
        {"run_id": "c-3", "plan_only": True, "status": "PLANNED", "stack": None,
         "holder": "none", "job_ids": [], "planned_too": False, "created_at": 3.0},
        {"run_id": "c-4", "plan_only": False, "status": "FAILED", "stack": None,
         "holder": "released", "job_ids": [], "planned_too": False, "created_at": 4.0},
    ]  # fmt: skip
    _journal(home, runs)
    env = {"NPA_HOME": str(home)}
    listed = CliRunner().invoke(app, ["workbench", "workflow", "list", "--json"], env=env)
    rows = {r["run_id"]: r["status"] for r in json.loads(listed.stdout)["runs"]}
    for run in runs:
        result = CliRunner().invoke(
            app, ["workbench", "workflow", "status", run["run_id"], "--cached", "--json"], env=env
        )
        word = json.loads(result.stdout)["status"]
        assert word == rows[run["run_id"]] == _expected(run)
        assert result.exit_code == runview.exit_code(word)
    assert rows == {
        "c-1": "RECOVERY_REQUIRED",
        "c-2": "ROLLED_BACK",
        "c-3": "PLANNED",
        "c-4": "FAILED",
    }
