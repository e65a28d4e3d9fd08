"""Tests of the run journal and the run lock; row builders shared by them."""

from __future__ import annotations

from typing import Any

from npa_infra.journal.records import AttemptRow, RunRow, WaveRow

CANARY = "Zq9-canary-7Hx"  # a registered secret value; must never reach the file


def a_run(run_id: str = "r1", *, at: float = 1.0, **changes: Any) -> RunRow:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "stack": "dev",
        "workflow": "sim2real",
        "mode": "runtime",
        "spec_path": "workflows/main/sim2real.yaml",
        "fingerprint": "sha256:abc",
        "resume_argv": ["npa", "workbench", "workflow", "submit", "s.yaml", "--resume-run", run_id],
        "status": "running",
        "lifecycle_state": "reserved",
        "created_at": at,
        "updated_at": at,
        "data": {"project": "p"},
    }
    return RunRow(**(fields | changes))


def a_wave(run_id: str = "r1", index: int = 0, **changes: Any) -> WaveRow:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "wave_index": index,
        "key": f"{index:03d}|serial|train:0:-",
        "name": "train",
        "kind": "serial",
        "states": ["train"],
        "status": "pending",
        "updated_at": 1.0,
        "budgets": {"retries": 0, "infrastructure": 1},
    }
    return WaveRow(**(fields | changes))


def an_attempt(run_id: str = "r1", index: int = 0, attempt: int = 1, **changes: Any) -> AttemptRow:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "wave_index": index,
        "attempt": attempt,
        "job_name": f"{run_id}-{index:02d}-train" + (f"-a{attempt}" if attempt > 1 else ""),
        "logical_launch_id": f"npa-launch-{run_id}-{index}-{attempt}",
        "created_at": 1.0,
        "status": "pending",
        "updated_at": 1.0,
    }
    return AttemptRow(**(fields | changes))


def a_record(attempt: AttemptRow, sequence: int = 0, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "schema": "npa.skypilot.launch-transaction.v1",
        "logical_launch_id": attempt.logical_launch_id,
        "job_name": attempt.job_name,
        "launch_sequence": sequence,
        "state": "launching",
        "phase": "launch",
        "category": "none",
        "recovery_decision": "none",
        "operator_remedy": "",
        "existence": "indeterminate",
        "job_id": None,
        "readiness": [],
    }
    return record | changes
