"""The durable run journal: the ``Journal`` API over ``$NPA_HOME/journal.sqlite3``.

It holds what must survive any crash so that a run is never launched twice
and never lost: runs, waves, immutable attempts, the latest record of each
launch transaction with its append-only checkpoint history, and events
(README "Durable before acting"). Every write is one ``BEGIN IMMEDIATE`` …
``COMMIT`` through ``Journal._write``: when a method returns, its data is on
disk (WAL, ``synchronous=FULL``; database.py), and a SIGKILL at any instant
leaves exactly the committed prefix. Reads and merges that a write depends
on happen inside that write's transaction, so concurrent writers from other
processes never lose each other's updates.

Secret values never reach the file: ``_write`` passes every text column and
JSON value through ``guard.bind`` (the secret guard) before binding it. Rules that SQLite
enforces itself (immutable attempts, monotonic ``launch_sequence``,
append-only history) live in schema.py; their aborts surface here as
``InvariantError`` (database.translate).
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from npa_infra.errors import InvariantError, RunStateError
from npa_infra.journal import database, guard, schema
from npa_infra.journal.guard import Json
from npa_infra.journal.records import (
    RUN_MODES,
    AttemptRow,
    EventRow,
    PlanRow,
    RunRow,
    TransactionRow,
    WaveRow,
    transaction_columns,
)

__all__ = ["FILENAME", "Journal", "journal_path", "present"]

FILENAME = "journal.sqlite3"


Params = Mapping[str, object]
Statement = tuple[str, Params]
WritePlan = Callable[[sqlite3.Connection], Sequence[Statement]]


def journal_path(home: Path) -> Path:
    """Where the journal of an npa home lives."""
    return home / FILENAME


def present(home: Path) -> bool:
    """Whether anything of a journal is there (the file, even a dangling link, or its -wal):
    a reader that finds nothing may answer "no runs"; anything else is opened, and an
    unusable journal is refused (database.connect), never taken for an empty one."""
    path = journal_path(home)
    return any(os.path.lexists(p) for p in (path, path.with_name(f"{path.name}-wal")))


def _params(row: object, table: str, *json_columns: str) -> dict[str, object]:
    params: dict[str, object] = {c: getattr(row, c) for c in schema.COLUMNS[table]}
    params.update({c: Json(params[c]) for c in json_columns})
    return params


class Journal:
    """The run journal (see the module docstring). The constructor does no I/O.

    Fault injection: every durable write is exactly one call of
    ``Journal._write(label, plan)``, which commits one SQLite transaction before
    it returns; ``label`` names the step (``create_run``, ``update_run``,
    ``upsert_wave``, ``update_wave``, ``create_attempt``, ``update_attempt``,
    ``checkpoint``, ``append_event``, ``record_plan``). Patching it to call the original and then
    ``os.kill(os.getpid(), signal.SIGKILL)`` on the N-th call kills the process
    right after the N-th durable step; killing before calling the original
    loses exactly that step. Schema migration in ``open`` is not a step.

    One instance may be shared by threads (a mutex serialises them); never use
    it across ``fork``.
    """

    def __init__(self, path: Path, *, secret_values: Iterable[str] = ()) -> None:
        self.path = path
        self._secrets = guard.usable_secrets(secret_values)
        self._conn: sqlite3.Connection | None = None
        self._mutex = threading.RLock()

    @classmethod
    def open(cls, home: Path, *, secret_values: Iterable[str] = ()) -> Journal:
        """Open (creating and migrating as needed) the journal under ``home``.

        Raises:
            ConfigError: a symlinked, foreign, corrupt or newer-version journal,
                or an unusable home.
        """
        journal = cls(journal_path(home), secret_values=secret_values)
        journal._connect()
        return journal

    def add_secret_values(self, values: Iterable[str]) -> None:
        """Guard these values too from the next write on (values learnt at launch)."""
        self._secrets = guard.usable_secrets((*self._secrets, *values))

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Journal:
        self._connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- runs ------------------------------------------------------------

    def create_run(self, row: RunRow) -> None:
        """Record a new run.

        Raises:
            RunStateError: the run id is already journaled.
        """
        if row.mode not in RUN_MODES:
            raise InvariantError(f"run mode {row.mode!r} is not one of {RUN_MODES}")
        sql = "SELECT resume_argv FROM runs WHERE run_id = ?"

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            found = conn.execute(sql, (row.run_id,)).fetchone()
            if found is not None:
                raise RunStateError(
                    f"run {row.run_id} already exists in the journal",
                    remedy=f"resume it with `{shlex.join(json.loads(found[0]))}`, "
                    "or choose a new run id",
                    details={"run_id": row.run_id},
                )
            return [(schema.insert("runs"), _params(row, "runs", "resume_argv", "data"))]

        self._write("create_run", plan)

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._read("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return RunRow.from_row(rows[0]) if rows else None

    def list_runs(self, limit: int = 50) -> list[RunRow]:
        """The ``limit`` most recently updated runs, newest first."""
        sql = "SELECT * FROM runs ORDER BY updated_at DESC, run_id DESC LIMIT ?"
        return [RunRow.from_row(r) for r in self._read(sql, (max(limit, 0),))]

    def runs(self, *, stack: str | None = None) -> list[RunRow]:
        """Every run (of ``stack`` when given), oldest first: the teardown gate reads them all."""
        if stack is None:
            rows = self._read("SELECT * FROM runs ORDER BY created_at, run_id")
        else:
            sql = "SELECT * FROM runs WHERE stack = ? ORDER BY created_at, run_id"
            rows = self._read(sql, (stack,))
        return [RunRow.from_row(r) for r in rows]

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        lifecycle_state: str | None = None,
        data: Mapping[str, Any] | None = None,
        now: float,
    ) -> RunRow:
        """Change a run's status/lifecycle and merge ``data`` shallowly into its data.

        Raises:
            RunStateError: the run is not in the journal.
        """
        missing = RunStateError(
            f"run {run_id} is not in the journal",
            remedy="list known runs with `npa workbench workflow status`",
            details={"run_id": run_id},
        )
        columns = {"status": status, "lifecycle_state": lifecycle_state}
        self._update("update_run", "runs", {"run_id": run_id}, missing, columns, data, now)
        updated = self.get_run(run_id)
        if updated is None:  # runs are never deleted (schema.py trigger)
            raise InvariantError(f"run {run_id} vanished after update_run")
        return updated

    # -- plans (submit --plan-only) ----------------------------------------

    def record_plan(self, row: PlanRow) -> bool:
        """Record a plan-only run id, replacing an earlier plan of it (its ``created_at`` kept).

        A plan never shadows a run: when ``runs`` already holds the id (a preview of a
        run that exists), nothing is written and False is returned.
        """
        if row.mode not in RUN_MODES:
            raise InvariantError(f"plan mode {row.mode!r} is not one of {RUN_MODES}")
        exists = "SELECT 1 FROM runs WHERE run_id = ?"
        upsert = schema.insert("plans", upsert_on=("run_id",), keep=("created_at",))
        written: list[bool] = []

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            if conn.execute(exists, (row.run_id,)).fetchone() is not None:
                return []
            written.append(True)
            return [(upsert, _params(row, "plans", "data"))]

        self._write("record_plan", plan)
        return bool(written)

    def get_plan(self, run_id: str) -> PlanRow | None:
        rows = self._read("SELECT * FROM plans WHERE run_id = ?", (run_id,))
        return PlanRow.from_row(rows[0]) if rows else None

    def plans(self) -> list[PlanRow]:
        """Every plan-only run id, most recently planned first."""
        sql = "SELECT * FROM plans ORDER BY updated_at DESC, run_id DESC"
        return [PlanRow.from_row(r) for r in self._read(sql)]

    # -- waves -----------------------------------------------------------

    def upsert_wave(self, row: WaveRow) -> None:
        """Insert a wave, or replace all its columns but the key."""
        sql = schema.insert("waves", upsert_on=("run_id", "wave_index"))
        params = _params(row, "waves", "states", "budgets")
        self._write("upsert_wave", lambda conn: [(sql, params)])

    def waves(self, run_id: str) -> list[WaveRow]:
        sql = "SELECT * FROM waves WHERE run_id = ? ORDER BY wave_index"
        return [WaveRow.from_row(r) for r in self._read(sql, (run_id,))]

    def wave(self, run_id: str, wave_index: int) -> WaveRow | None:
        """One wave, read by its key: a wave's own step reads one row, never all of the
        run's (issue 19: a K-wave run read O(K²) wave rows)."""
        sql = "SELECT * FROM waves WHERE run_id = ? AND wave_index = ?"
        rows = self._read(sql, (run_id, wave_index))
        return WaveRow.from_row(rows[0]) if rows else None

    def update_wave(
        self,
        run_id: str,
        wave_index: int,
        *,
        status: str | None = None,
        budgets: Mapping[str, Any] | None = None,
        now: float,
    ) -> None:
        """Change a wave's status and/or replace its budgets.

        Raises:
            InvariantError: the wave is not in the journal.
        """
        key = {"run_id": run_id, "wave_index": wave_index}
        missing = InvariantError(f"wave {wave_index} of run {run_id} is not in the journal")
        columns = {"status": status, "budgets": None if budgets is None else Json(dict(budgets))}
        self._update("update_wave", "waves", key, missing, columns, None, now)

    # -- attempts --------------------------------------------------------

    def create_attempt(self, row: AttemptRow) -> None:
        """Record a new attempt of a journaled wave; attempt n needs attempt n-1.

        Raises:
            InvariantError: missing wave, a gap in attempt numbers, or a duplicate.
        """
        where = f"attempt {row.attempt} of wave {row.wave_index} of run {row.run_id}"
        key = (row.run_id, row.wave_index)

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            sql = "SELECT attempt FROM attempts WHERE run_id = ? AND wave_index = ?"
            numbers = {r[0] for r in conn.execute(sql, key)}
            if row.attempt in numbers:
                raise InvariantError(f"{where} already exists; attempts are immutable")
            if row.attempt < 1 or (row.attempt > 1 and row.attempt - 1 not in numbers):
                raise InvariantError(f"{where}: attempt numbers must be consecutive from 1")
            sql = "SELECT 1 FROM waves WHERE run_id = ? AND wave_index = ?"
            if conn.execute(sql, key).fetchone() is None:
                raise InvariantError(f"{where}: journal the wave (upsert_wave) first")
            return [(schema.insert("attempts"), _params(row, "attempts", "data"))]

        self._write("create_attempt", plan)

    def attempts(self, run_id: str, wave_index: int | None = None) -> list[AttemptRow]:
        """A run's attempts (of one wave, if given), by wave then attempt number."""
        sql = "SELECT * FROM attempts WHERE run_id = ? AND (? IS NULL OR wave_index = ?)"
        rows = self._read(sql + " ORDER BY wave_index, attempt", (run_id, wave_index, wave_index))
        return [AttemptRow.from_row(r) for r in rows]

    def latest_attempt(self, run_id: str, wave_index: int) -> AttemptRow | None:
        found = self.attempts(run_id, wave_index)
        return found[-1] if found else None

    def update_attempt(
        self,
        run_id: str,
        wave_index: int,
        attempt: int,
        *,
        status: str | None = None,
        job_id: int | None = None,
        sky_status: str | None = None,
        data: Mapping[str, Any] | None = None,
        now: float,
    ) -> None:
        """Change an attempt's mutable fields; ``data`` is merged shallowly.

        Raises:
            InvariantError: unknown attempt, or a job id that differs from the
                adopted one (schema.py trigger ``attempts_job_id_adopted``).
        """
        key = {"run_id": run_id, "wave_index": wave_index, "attempt": attempt}
        missing = InvariantError(f"attempt {key} is not in the journal")
        columns = {"status": status, "job_id": job_id, "sky_status": sky_status}
        self._update("update_attempt", "attempts", key, missing, columns, data, now)

    def record_attempt_step(
        self,
        run_id: str,
        wave_index: int,
        attempt: int,
        *,
        data: Mapping[str, Any],
        event: tuple[str, Mapping[str, Any]],
        budgets: Mapping[str, Any] | None = None,
        now: float,
    ) -> None:
        """Merge ``data`` into an attempt, replace its wave's budgets (if given) and append
        ``event`` (kind, data), all in one durable step: a crash leaves all or none.

        Raises:
            InvariantError: the attempt is not in the journal.
        """
        key = {"run_id": run_id, "wave_index": wave_index, "attempt": attempt}
        where = "run_id = :run_id AND wave_index = :wave_index AND attempt = :attempt"
        kind, body = event

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            old = conn.execute(f"SELECT data FROM attempts WHERE {where}", key).fetchone()
            if old is None:
                raise InvariantError(f"attempt {key} is not in the journal")
            merged = Json({**json.loads(old["data"]), **data})
            steps: list[Statement] = [
                (
                    f"UPDATE attempts SET data = :data, updated_at = :now WHERE {where}",
                    {**key, "data": merged, "now": now},
                )
            ]
            if budgets is not None:
                steps.append(
                    (
                        "UPDATE waves SET budgets = :budgets, updated_at = :now "
                        "WHERE run_id = :run_id AND wave_index = :wave_index",
                        {**key, "budgets": Json(dict(budgets)), "now": now},
                    )
                )
            steps.append(
                (
                    "INSERT INTO events (run_id, at, kind, data) VALUES (:run_id, :at, :kind, :data)",
                    {"run_id": run_id, "at": now, "kind": kind, "data": Json(dict(body))},
                )
            )
            return steps

        self._write("attempt_step", plan)

    # -- launch transactions ---------------------------------------------

    def checkpoint(
        self, run_id: str, wave_index: int, attempt: int, record: Mapping[str, Any], *, now: float
    ) -> None:
        """Upsert the transaction's latest record and append it to its history, atomically.

        Raises:
            InvariantError: a malformed record, an unknown attempt, a record of
                another attempt, or a decreasing ``launch_sequence``.
        """
        params = transaction_columns(record)
        params.update(run_id=run_id, wave_index=wave_index, attempt=attempt, updated_at=now)
        params["record"] = Json(dict(record))
        name = f"attempt {attempt} of wave {wave_index} of run {run_id}"
        history = (
            "INSERT INTO checkpoints (logical_launch_id, launch_sequence, state, record, at) "
            "VALUES (:logical_launch_id, :launch_sequence, :state, :record, :updated_at)"
        )

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            owner = conn.execute(
                "SELECT logical_launch_id, job_name FROM attempts "
                "WHERE run_id = ? AND wave_index = ? AND attempt = ?",
                (run_id, wave_index, attempt),
            ).fetchone()
            if owner is None:
                raise InvariantError(f"checkpoint of {name}, which is not in the journal")
            mine = (params["logical_launch_id"], record.get("job_name", owner["job_name"]))
            if tuple(owner) != mine:
                raise InvariantError(f"checkpoint record does not belong to {name}")
            upsert = schema.insert("transactions", upsert_on=("logical_launch_id",))
            return [(upsert, params), (history, params)]

        self._write("checkpoint", plan)

    def transaction(self, logical_launch_id: str) -> TransactionRow | None:
        sql = "SELECT * FROM transactions WHERE logical_launch_id = ?"
        rows = self._read(sql, (logical_launch_id,))
        return TransactionRow.from_row(rows[0]) if rows else None

    def transactions(self, run_id: str) -> list[TransactionRow]:
        sql = "SELECT * FROM transactions WHERE run_id = ? ORDER BY wave_index, attempt"
        return [TransactionRow.from_row(r) for r in self._read(sql, (run_id,))]

    def checkpoints(self, logical_launch_id: str) -> list[dict[str, Any]]:
        """Every checkpoint of one transaction, oldest first (keys: the table's columns)."""
        sql = "SELECT * FROM checkpoints WHERE logical_launch_id = ? ORDER BY id"
        rows = self._read(sql, (logical_launch_id,))
        return [{**dict(r), "record": json.loads(r["record"])} for r in rows]

    # -- events ----------------------------------------------------------

    def append_event(self, run_id: str, kind: str, data: Mapping[str, Any], *, now: float) -> None:
        sql = "INSERT INTO events (run_id, at, kind, data) VALUES (:run_id, :at, :kind, :data)"
        params = {"run_id": run_id, "at": now, "kind": kind, "data": Json(dict(data))}
        self._write("append_event", lambda conn: [(sql, params)])

    def events(self, run_id: str) -> list[EventRow]:
        sql = "SELECT * FROM events WHERE run_id = ? ORDER BY id"
        return [EventRow.from_row(r) for r in self._read(sql, (run_id,))]

    # -- the one write path and the one read path ------------------------

    def _write(self, label: str, plan: WritePlan) -> None:
        """Run ``plan`` inside ``BEGIN IMMEDIATE`` and commit: one durable journal step.

        ``plan`` reads what it needs under the write lock and returns the
        statements; every parameter is guarded before it is bound.
        """
        with self._mutex:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in plan(conn):
                        conn.execute(sql, guard.bind(params, self._secrets, label=label))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise database.translate(exc, label, self.path) from exc

    def _update(
        self,
        label: str,
        table: str,
        key: Mapping[str, object],
        missing: Exception,
        columns: Mapping[str, object],
        merge: Mapping[str, Any] | None,
        now: float,
    ) -> None:
        """Set non-None ``columns``, merge ``merge`` into ``data`` (read under the write lock)."""
        where = " AND ".join(f"{k} = :{k}" for k in key)

        def plan(conn: sqlite3.Connection) -> list[Statement]:
            old = conn.execute(f"SELECT * FROM {table} WHERE {where}", key).fetchone()
            if old is None:
                raise missing
            new = {c: v for c, v in columns.items() if v is not None}
            if merge is not None:
                new["data"] = Json({**json.loads(old["data"]), **merge})
            new["updated_at"] = now
            sets = ", ".join(f"{c} = :{c}" for c in new)
            return [(f"UPDATE {table} SET {sets} WHERE {where}", {**new, **key})]

        self._write(label, plan)

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        with self._mutex:
            conn = self._connection()
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise database.translate(exc, "read", self.path) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise InvariantError("the journal is not open: use Journal.open(home)")
        return self._conn

    def _connect(self) -> None:
        with self._mutex:
            if self._conn is None:
                self._conn = database.connect(self.path)
