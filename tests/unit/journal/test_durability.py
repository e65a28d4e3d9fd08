"""Crash and concurrency: a SIGKILL at any step keeps exactly the committed prefix.

Child processes are real interpreters killed with SIGKILL, so nothing in
Python (no finally, no atexit) runs after the kill: what survives is what
SQLite made durable. Synchronisation uses pipes, never sleeps.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from npa_infra.journal.store import Journal, journal_path

from . import a_record, a_run, a_wave, an_attempt

REPO = Path(__file__).resolve().parents[3]

_KILL_BETWEEN_EVENTS = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from npa_infra.journal.store import Journal
home, kill_at = Path(sys.argv[1]), int(sys.argv[2])
journal = Journal.open(home)
for i in range(10):
    if i == kill_at:
        os.kill(os.getpid(), 9)
    journal.append_event("r1", "tick", {"i": i}, now=float(i))
"""

# Every write method once, in the order a runtime launch uses them.
_SCENARIO = """
def scenario(journal):
    attempt = an_attempt()
    journal.create_run(a_run())
    journal.upsert_wave(a_wave())
    journal.update_run("r1", lifecycle_state="planned", data={"planned": True}, now=2.0)
    journal.create_attempt(attempt)
    journal.checkpoint("r1", 0, 1, a_record(attempt, 0), now=3.0)
    journal.update_attempt("r1", 0, 1, status="running", now=4.0)
    journal.checkpoint("r1", 0, 1, a_record(attempt, 1, state="submitted", job_id=7), now=5.0)
    journal.update_attempt("r1", 0, 1, job_id=7, sky_status="RUNNING", now=6.0)
    journal.append_event("r1", "launched", {"job_id": 7}, now=6.0)
    journal.update_wave("r1", 0, status="running", now=7.0)
"""
STEPS = 10

_FAULT_MATRIX = (
    "import sys\nsys.path.insert(0, sys.argv[4])\n"
    "from tests.unit.journal import a_record, a_run, a_wave, an_attempt\n"
    + _SCENARIO
    + """
import os, signal, sys
from pathlib import Path
from npa_infra.journal.store import Journal

home, step, when = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
original = Journal._write
count = 0

def crashing(self, label, plan):
    global count
    count += 1
    if count == step and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    original(self, label, plan)
    if count == step and when == "after":
        os.kill(os.getpid(), signal.SIGKILL)

Journal._write = crashing
scenario(Journal.open(home))
"""
)

_APPENDER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from npa_infra.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
name = sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
for i in range(200):
    journal.append_event("r1", name, {"i": i}, now=float(i))
"""


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _integrity(home: Path) -> str:
    conn = sqlite3.connect(str(journal_path(home)))
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _snapshot(journal: Journal) -> dict[str, Any]:
    run = journal.get_run("r1")
    attempt = an_attempt()
    return {
        "run": run.to_json() if run else None,
        "waves": [w.to_json() for w in journal.waves("r1")],
        "attempts": [a.to_json() for a in journal.attempts("r1")],
        "transactions": [t.to_json() for t in journal.transactions("r1")],
        "checkpoints": [
            {k: v for k, v in c.items() if k != "id"}
            for c in journal.checkpoints(attempt.logical_launch_id)
        ],
        "events": [
            {k: v for k, v in e.to_json().items() if k != "id"} for e in journal.events("r1")
        ],
    }


def _scenario() -> Any:
    namespace: dict[str, Any] = {
        "a_record": a_record,
        "a_run": a_run,
        "a_wave": a_wave,
        "an_attempt": an_attempt,
    }
    exec(_SCENARIO, namespace)  # the same code the children run
    return namespace["scenario"]


class _Stop(Exception):
    pass


def _expected_after(steps: int, home: Path) -> dict[str, Any]:
    """Run the scenario in-process, stopping after ``steps`` writes."""
    done = 0

    class Stopping(Journal):
        def _write(self, label: str, plan: Any) -> None:
            nonlocal done
            if done == steps:
                raise _Stop
            super()._write(label, plan)
            done += 1

    with Stopping.open(home) as journal:
        with contextlib.suppress(_Stop):
            _scenario()(journal)
        return _snapshot(journal)


@pytest.mark.parametrize("kill_at", [0, 1, 6, 9])
def test_sigkill_between_writes_keeps_exactly_the_committed_prefix(
    tmp_path: Path, kill_at: int
) -> None:
    home = tmp_path / "home"
    with Journal.open(home) as journal:
        journal.create_run(a_run())
    child = _python(_KILL_BETWEEN_EVENTS, str(home), str(kill_at), str(REPO))
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    assert _integrity(home) == "ok"
    with Journal.open(home) as journal:
        assert [e.data["i"] for e in journal.events("r1")] == list(range(kill_at))


@pytest.mark.parametrize("when", ["after", "before"])
@pytest.mark.parametrize("step", range(1, STEPS + 1))
def test_fault_matrix_patched_write_kills_at_step_n(tmp_path: Path, step: int, when: str) -> None:
    home = tmp_path / "home"
    child = _python(_FAULT_MATRIX, str(home), str(step), when, str(REPO))
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    assert _integrity(home) == "ok"
    durable = step if when == "after" else step - 1
    with Journal.open(home) as journal:
        survived = _snapshot(journal)
    assert survived == _expected_after(durable, tmp_path / "expected")


def test_fault_matrix_scenario_covers_every_write_label() -> None:
    labels: list[str] = []

    class Recorder(Journal):
        def _write(self, label: str, plan: Any) -> None:
            labels.append(label)

        def get_run(self, run_id: str) -> Any:
            return a_run(run_id)

    _scenario()(Recorder(Path("/nonexistent")))
    assert len(labels) == STEPS
    assert set(labels) == {
        "create_run",
        "update_run",
        "upsert_wave",
        "update_wave",
        "create_attempt",
        "update_attempt",
        "checkpoint",
        "append_event",
    }


def test_two_processes_appending_concurrently_lose_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Journal.open(home) as journal:
        journal.create_run(a_run())
    children = [_python(_APPENDER, str(home), name, str(REPO)) for name in ("a", "b")]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    for child in children:  # both are open and waiting: start them together
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        child.communicate()
        assert child.returncode == 0
    assert _integrity(home) == "ok"
    with Journal.open(home) as journal:
        events = journal.events("r1")
    assert len(events) == 400
    for name in ("a", "b"):
        assert [e.data["i"] for e in events if e.kind == name] == list(range(200))


def test_snapshot_helpers_agree_with_a_full_in_process_run(tmp_path: Path) -> None:
    full = _expected_after(STEPS, tmp_path / "full")
    assert full["run"]["lifecycle_state"] == "planned"
    assert [c["launch_sequence"] for c in full["checkpoints"]] == [0, 1]
    assert full["attempts"][0]["job_id"] == 7
    assert _expected_after(0, tmp_path / "none")["run"] is None
    assert a_record(an_attempt())["launch_sequence"] == 0
    assert a_wave().wave_index == 0
