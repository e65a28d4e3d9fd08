"""Journal runs for the stack's teardown-gate tests: a run row, and optionally a cancel event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npa_infra.journal.records import RunRow
from npa_infra.journal.store import Journal

__all__ = ["journal_run"]


def journal_run(
    home: Path,
    run_id: str,
    *,
    stack: str = "dev",
    status: str = "SUBMITTED",
    updated_at: float = 100.0,
    cancel_outcome: str | None = None,
    cancel_at: float | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Record ``run_id`` under ``home`` (created if needed), as ``submit`` and ``cancel`` would."""
    with Journal.open(home) as journal:
        journal.create_run(
            RunRow(
                run_id=run_id,
                stack=stack,
                workflow="demo",
                mode="one-shot",
                spec_path="/spec.yaml",
                fingerprint="sha256:0",
                resume_argv=["npa", "workbench", "workflow", "submit", "--resume-run", run_id],
                status=status,
                lifecycle_state="committed",
                created_at=updated_at,
                updated_at=updated_at,
                data=data or {},
            )
        )
        if cancel_outcome is not None:
            at = cancel_at if cancel_at is not None else updated_at + 1
            journal.append_event(run_id, "cancel", {"outcome": cancel_outcome}, now=at)
