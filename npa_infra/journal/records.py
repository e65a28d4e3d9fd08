"""The journal's rows as frozen values, one class per table.

Each class mirrors its table (schema.py): JSON columns are decoded to
``dict``/``list``, times are epoch seconds supplied by the caller (the
journal never reads the clock). ``to_json`` gives the JSON-safe shape used by
``--json`` output and tests; ``from_row`` decodes a ``sqlite3.Row``. Rows are
built with keywords only, so adding a column never silently shifts an
argument. ``transaction_columns`` decides which fields of a launch-transaction
record (runs/models.py ``TransactionRecord.to_json``) are lifted into indexed
columns, and refuses a record without its identity or sequence.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from npa_infra.errors import InvariantError

__all__ = [
    "RUN_MODES",
    "TRANSACTION_TEXT_COLUMNS",
    "AttemptRow",
    "EventRow",
    "PlanRow",
    "RunMode",
    "RunRow",
    "TransactionRow",
    "WaveRow",
    "transaction_columns",
]

RunMode = Literal["one-shot", "runtime", "raw"]
RUN_MODES: tuple[RunMode, ...] = ("one-shot", "runtime", "raw")
TRANSACTION_TEXT_COLUMNS = (
    "phase",
    "category",
    "recovery_decision",
    "operator_remedy",
    "existence",
)


def _obj(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _list(text: str) -> list[Any]:
    value = json.loads(text)
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    """One submitted run: its identity, how to resume it, and its lifecycle."""

    run_id: str
    stack: str | None
    workflow: str
    mode: RunMode
    spec_path: str
    fingerprint: str
    resume_argv: list[str]  # the exact command that resumes this run
    status: str
    lifecycle_state: str
    created_at: float
    updated_at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRow:
        return cls(
            run_id=row["run_id"],
            stack=row["stack"],
            workflow=row["workflow"],
            mode=row["mode"],
            spec_path=row["spec_path"],
            fingerprint=row["fingerprint"],
            resume_argv=[str(a) for a in _list(row["resume_argv"])],
            status=row["status"],
            lifecycle_state=row["lifecycle_state"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            data=_obj(row["data"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRow:
    """One ``submit --plan-only`` run id: planned and rendered, never launched (schema v3).

    ``mode`` is the execution the plan was rendered for; ``status`` is ``PLANNED``;
    ``data`` holds the rendered jobs (``jobs[{job_name, wave, path}]``) and the target
    (``infra``, ``context``, ``namespace``), never a secret value.
    """

    run_id: str
    stack: str | None
    workflow: str
    mode: RunMode
    spec_path: str
    fingerprint: str
    status: str
    created_at: float
    updated_at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> PlanRow:
        return cls(
            run_id=row["run_id"],
            stack=row["stack"],
            workflow=row["workflow"],
            mode=row["mode"],
            spec_path=row["spec_path"],
            fingerprint=row["fingerprint"],
            status=row["status"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            data=_obj(row["data"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WaveRow:
    """One wave of a run's plan, with its two retry budgets (runtime-reference.md §3)."""

    run_id: str
    wave_index: int
    key: str
    name: str
    kind: str
    states: list[str]
    status: str
    updated_at: float
    budgets: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> WaveRow:
        return cls(
            run_id=row["run_id"],
            wave_index=row["wave_index"],
            key=row["key"],
            name=row["name"],
            kind=row["kind"],
            states=[str(s) for s in _list(row["states"])],
            status=row["status"],
            updated_at=row["updated_at"],
            budgets=_obj(row["budgets"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRow:
    """One immutable launch attempt of a wave (runtime-reference.md §2 attempt fields).

    ``run_id``, ``wave_index``, ``attempt``, ``job_name``, ``logical_launch_id``
    and ``created_at`` never change; ``job_id`` is set once, when adopted.
    """

    run_id: str
    wave_index: int
    attempt: int
    job_name: str
    logical_launch_id: str
    created_at: float
    status: str
    updated_at: float
    job_id: int | None = None
    sky_status: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> AttemptRow:
        return cls(
            run_id=row["run_id"],
            wave_index=row["wave_index"],
            attempt=row["attempt"],
            job_name=row["job_name"],
            logical_launch_id=row["logical_launch_id"],
            created_at=row["created_at"],
            status=row["status"],
            updated_at=row["updated_at"],
            job_id=row["job_id"],
            sky_status=row["sky_status"],
            data=_obj(row["data"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionRow:
    """The latest checkpoint of one launch transaction; ``record`` is the full record."""

    logical_launch_id: str
    run_id: str
    wave_index: int
    attempt: int
    launch_sequence: int
    state: str
    updated_at: float
    phase: str | None = None
    category: str | None = None
    recovery_decision: str | None = None
    operator_remedy: str | None = None
    existence: str | None = None
    job_id: int | None = None
    record: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TransactionRow:
        return cls(
            logical_launch_id=row["logical_launch_id"],
            run_id=row["run_id"],
            wave_index=row["wave_index"],
            attempt=row["attempt"],
            launch_sequence=row["launch_sequence"],
            state=row["state"],
            updated_at=row["updated_at"],
            phase=row["phase"],
            category=row["category"],
            recovery_decision=row["recovery_decision"],
            operator_remedy=row["operator_remedy"],
            existence=row["existence"],
            job_id=row["job_id"],
            record=_obj(row["record"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRow:
    """One append-only event of a run; ``id`` orders events of all runs."""

    id: int
    run_id: str
    at: float
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> EventRow:
        return cls(
            id=row["id"],
            run_id=row["run_id"],
            at=row["at"],
            kind=row["kind"],
            data=_obj(row["data"]),
        )


def transaction_columns(record: Mapping[str, Any]) -> dict[str, object]:
    """The indexed columns of a launch-transaction record (runtime-reference.md §1).

    Raises:
        InvariantError: the record lacks ``logical_launch_id``, a non-negative
            integer ``launch_sequence`` or a ``state``, or a column has the wrong type.
    """
    llid = record.get("logical_launch_id")
    sequence = record.get("launch_sequence")
    if not isinstance(llid, str) or not llid:
        raise InvariantError("checkpoint record has no logical_launch_id")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise InvariantError(f"checkpoint record {llid} has no valid launch_sequence")
    if not isinstance(record.get("state"), str):
        raise InvariantError(f"checkpoint record {llid} has no state")
    columns: dict[str, object] = {
        "logical_launch_id": llid,
        "launch_sequence": sequence,
        "state": record["state"],
    }
    for name in TRANSACTION_TEXT_COLUMNS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise InvariantError(f"checkpoint record {llid}: {name} must be a string")
        columns[name] = value
    job_id = record.get("job_id")
    if job_id is not None and (not isinstance(job_id, int) or isinstance(job_id, bool)):
        raise InvariantError(f"checkpoint record {llid}: job_id must be an integer")
    columns["job_id"] = job_id
    return columns
