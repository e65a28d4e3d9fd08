"""The journal's SQL schema and its migrations.

``MIGRATIONS[i]`` takes a database from schema version ``i`` to ``i + 1``;
``meta.schema_version`` records how many have been applied (0 for an empty
file). ``migrate`` applies the missing ones in order, all inside one
``BEGIN IMMEDIATE`` transaction that reads the version first, so two
processes opening a fresh journal at once apply each migration exactly once,
and a crash mid-migration leaves the previous version intact. One
transaction, not one per version: a new journal is created with one commit
instead of one per version and a last one to re-read it (issue 19). A database
whose version is newer than ``len(MIGRATIONS)`` was written by a newer
npa-infra; it is refused rather than guessed at.

The triggers are the journal's invariants, enforced by SQLite itself so
that no code path (ours or a hand-written ``sqlite3`` session) can break
them: an attempt's identity never changes and an adopted job id is never
replaced (one live launch per attempt); ``launch_sequence`` never decreases;
checkpoints and events are append-only; runs, attempts and transactions are
never deleted. A trigger abort surfaces as ``sqlite3.IntegrityError`` whose
text starts with ``npa:``.

Version 1 is the base schema; version 2 adds the indexes the read paths use;
version 3 adds ``plans``: one row per ``submit --plan-only`` run id (issue 17),
kept apart from ``runs`` because a plan launches nothing, so no gate, status
--all or cleanup that reads ``runs`` ever counts it, and a live submit of the
same id later starts a run of its own. A repeated plan of an id replaces its
row (``created_at`` kept); plans may be replaced but are never deleted.
``COLUMNS`` and ``insert`` give store.py its column lists and ``INSERT`` text,
so the SQL naming columns lives in this one module.

``inspect`` decides whether an existing file is npa's journal before anything
writes to it (issue 24): a database without tables, one without ``meta`` or
without npa's tables (another application's), a ``meta`` without its
``schema_version`` row, a version that is not a positive integer, or one
newer than this npa-infra, is each a ``Found`` that database.py refuses;
only ``Found.JOURNAL`` is migrated and used.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.errors import ConfigError

__all__ = [
    "COLUMNS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "Found",
    "Inspection",
    "current_version",
    "insert",
    "inspect",
    "migrate",
    "statements",
]

_V1_TABLES = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY NOT NULL,
    stack           TEXT,
    workflow        TEXT NOT NULL,
    mode            TEXT NOT NULL CHECK (mode IN ('one-shot', 'runtime', 'raw')),
    spec_path       TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    resume_argv     TEXT NOT NULL,
    status          TEXT NOT NULL,
    lifecycle_state TEXT NOT NULL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    data            TEXT NOT NULL
);
CREATE TABLE waves (
    run_id     TEXT NOT NULL REFERENCES runs (run_id),
    wave_index INTEGER NOT NULL CHECK (wave_index >= 0),
    key        TEXT NOT NULL,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    states     TEXT NOT NULL,
    status     TEXT NOT NULL,
    budgets    TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (run_id, wave_index)
);
CREATE TABLE attempts (
    run_id            TEXT NOT NULL,
    wave_index        INTEGER NOT NULL,
    attempt           INTEGER NOT NULL CHECK (attempt >= 1),
    job_name          TEXT NOT NULL,
    logical_launch_id TEXT NOT NULL UNIQUE,
    created_at        REAL NOT NULL,
    status            TEXT NOT NULL,
    job_id            INTEGER,
    sky_status        TEXT,
    data              TEXT NOT NULL,
    updated_at        REAL NOT NULL,
    PRIMARY KEY (run_id, wave_index, attempt),
    FOREIGN KEY (run_id, wave_index) REFERENCES waves (run_id, wave_index)
);
CREATE TABLE transactions (
    logical_launch_id TEXT PRIMARY KEY NOT NULL REFERENCES attempts (logical_launch_id),
    run_id            TEXT NOT NULL,
    wave_index        INTEGER NOT NULL,
    attempt           INTEGER NOT NULL,
    launch_sequence   INTEGER NOT NULL CHECK (launch_sequence >= 0),
    state             TEXT NOT NULL,
    phase             TEXT,
    category          TEXT,
    recovery_decision TEXT,
    operator_remedy   TEXT,
    existence         TEXT,
    job_id            INTEGER,
    record            TEXT NOT NULL,
    updated_at        REAL NOT NULL,
    FOREIGN KEY (run_id, wave_index, attempt) REFERENCES attempts (run_id, wave_index, attempt)
);
CREATE TABLE checkpoints (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    logical_launch_id TEXT NOT NULL REFERENCES transactions (logical_launch_id),
    launch_sequence   INTEGER NOT NULL,
    state             TEXT NOT NULL,
    record            TEXT NOT NULL,
    at                REAL NOT NULL
);
CREATE TABLE events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    at     REAL NOT NULL,
    kind   TEXT NOT NULL,
    data   TEXT NOT NULL
);
"""

_V1_TRIGGERS = """
CREATE TRIGGER runs_identity_immutable BEFORE UPDATE ON runs
WHEN NEW.run_id IS NOT OLD.run_id OR NEW.stack IS NOT OLD.stack
  OR NEW.workflow IS NOT OLD.workflow OR NEW.mode IS NOT OLD.mode
  OR NEW.fingerprint IS NOT OLD.fingerprint OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'npa: a run''s identity is immutable'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'npa: runs are never deleted'); END;
CREATE TRIGGER attempts_identity_immutable BEFORE UPDATE ON attempts
WHEN NEW.run_id IS NOT OLD.run_id OR NEW.wave_index IS NOT OLD.wave_index
  OR NEW.attempt IS NOT OLD.attempt OR NEW.job_name IS NOT OLD.job_name
  OR NEW.logical_launch_id IS NOT OLD.logical_launch_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'npa: an attempt''s identity is immutable'); END;
CREATE TRIGGER attempts_job_id_adopted BEFORE UPDATE OF job_id ON attempts
WHEN OLD.job_id IS NOT NULL AND NEW.job_id IS NOT OLD.job_id
BEGIN SELECT RAISE(ABORT, 'npa: an attempt''s adopted job id never changes'); END;
CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts
BEGIN SELECT RAISE(ABORT, 'npa: attempts are never deleted'); END;
CREATE TRIGGER transactions_identity_immutable BEFORE UPDATE ON transactions
WHEN NEW.logical_launch_id IS NOT OLD.logical_launch_id OR NEW.run_id IS NOT OLD.run_id
  OR NEW.wave_index IS NOT OLD.wave_index OR NEW.attempt IS NOT OLD.attempt
BEGIN SELECT RAISE(ABORT, 'npa: a transaction''s identity is immutable'); END;
CREATE TRIGGER transactions_sequence_monotonic BEFORE UPDATE OF launch_sequence ON transactions
WHEN NEW.launch_sequence < OLD.launch_sequence
BEGIN SELECT RAISE(ABORT, 'npa: launch_sequence may never decrease'); END;
CREATE TRIGGER transactions_no_delete BEFORE DELETE ON transactions
BEGIN SELECT RAISE(ABORT, 'npa: transactions are never deleted'); END;
CREATE TRIGGER checkpoints_append_only_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'npa: checkpoints are append-only'); END;
CREATE TRIGGER checkpoints_append_only_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'npa: checkpoints are append-only'); END;
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'npa: events are append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'npa: events are append-only'); END;
"""

_V2_INDEXES = """
CREATE INDEX runs_by_updated ON runs (updated_at DESC, run_id DESC);
CREATE INDEX events_by_run ON events (run_id, id);
CREATE INDEX checkpoints_by_launch ON checkpoints (logical_launch_id, id);
CREATE INDEX transactions_by_run ON transactions (run_id, wave_index, attempt);
"""

_V3_PLANS = """
CREATE TABLE plans (
    run_id      TEXT PRIMARY KEY NOT NULL,
    stack       TEXT,
    workflow    TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('one-shot', 'runtime', 'raw')),
    spec_path   TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX plans_by_updated ON plans (updated_at DESC, run_id DESC);
CREATE TRIGGER plans_no_delete BEFORE DELETE ON plans
BEGIN SELECT RAISE(ABORT, 'npa: plans are never deleted'); END;
"""

MIGRATIONS: tuple[str, ...] = (_V1_TABLES + _V1_TRIGGERS, _V2_INDEXES, _V3_PLANS)
SCHEMA_VERSION = len(MIGRATIONS)

# The columns the Journal writes, per table, in DDL order.
COLUMNS: dict[str, tuple[str, ...]] = {
    table: tuple(names.split())
    for table, names in {
        "runs": "run_id stack workflow mode spec_path fingerprint resume_argv status "
        "lifecycle_state created_at updated_at data",
        "waves": "run_id wave_index key name kind states status budgets updated_at",
        "attempts": "run_id wave_index attempt job_name logical_launch_id created_at status "
        "job_id sky_status data updated_at",
        "transactions": "logical_launch_id run_id wave_index attempt launch_sequence state "
        "phase category recovery_decision operator_remedy existence job_id record updated_at",
        "plans": "run_id stack workflow mode spec_path fingerprint status created_at updated_at "
        "data",
    }.items()
}


def insert(table: str, *, upsert_on: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> str:
    """``INSERT`` of all ``COLUMNS[table]`` as named parameters; an upsert on ``upsert_on``
    that leaves the ``keep`` columns of an existing row as they were."""
    columns = COLUMNS[table]
    names, values = ", ".join(columns), ", ".join(":" + c for c in columns)
    sql = f"INSERT INTO {table} ({names}) VALUES ({values})"
    if upsert_on:
        fixed = (*upsert_on, *keep)
        sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in fixed)
        sql += f" ON CONFLICT ({', '.join(upsert_on)}) DO UPDATE SET {sets}"
    return sql


def statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies keep their ``;``).

    ``executescript`` would commit on its own, so migrations run statement by
    statement inside the caller's transaction instead.
    """
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())  # let SQLite report the incomplete statement
    return out


# The tables each schema version has (a file missing one is not npa's journal).
_V1_NAMES = frozenset(
    {"meta", "runs", "waves", "attempts", "transactions", "checkpoints", "events"}
)
TABLES: dict[int, frozenset[str]] = {1: _V1_NAMES, 2: _V1_NAMES, 3: _V1_NAMES | {"plans"}}
_VERSION = re.compile(r"^[0-9]{1,9}$")


class Found(StrEnum):
    """What an existing SQLite file at the journal path is."""

    JOURNAL = "journal"  # npa's journal at a version this npa-infra knows
    NO_TABLES = "no_tables"  # a database without a single table
    FOREIGN = "foreign"  # tables, but no ``meta`` or not npa's tables: another application's
    NO_VERSION = "no_version"  # npa's ``meta`` without its ``schema_version`` row
    BAD_VERSION = "bad_version"  # a ``schema_version`` that is not a positive integer
    NEWER = "newer"  # written by a newer npa-infra


@dataclass(frozen=True, slots=True)
class Inspection:
    found: Found
    detail: str = ""  # what was found, in words
    version: int | None = None


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {str(r[0]) for r in rows}


def _listed(names: set[str] | frozenset[str]) -> str:
    shown = sorted(names)[:5]
    return ", ".join(shown) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def inspect(conn: sqlite3.Connection) -> Inspection:
    """What the database behind ``conn`` is; reads only (see the module docstring).

    Raises:
        sqlite3.Error: the file cannot be read as a database (database.translate maps it).
    """
    tables = _tables(conn)
    if not tables:
        return Inspection(Found.NO_TABLES, "an SQLite database without any table")
    if "meta" not in tables:
        return Inspection(Found.FOREIGN, f"another application's tables ({_listed(tables)})")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:  # a ``meta`` of other columns: not ours
        return Inspection(Found.FOREIGN, f"a meta table that is not npa's ({_listed(tables)})")
    if row is None:
        return Inspection(Found.NO_VERSION, "npa's meta table without its schema_version row")
    raw = str(row[0])
    if not _VERSION.match(raw) or int(raw) < 1:
        return Inspection(Found.BAD_VERSION, f"schema_version {raw[:40]!r}, not a version number")
    version = int(raw)
    if version > SCHEMA_VERSION:
        return Inspection(
            Found.NEWER, f"schema version {version}, newer than {SCHEMA_VERSION}", version
        )
    missing = TABLES.get(version, _V1_NAMES) - tables
    if missing:
        what = f"a meta table but not npa's tables (missing {_listed(missing)})"
        return Inspection(Found.FOREIGN, what, version)
    return Inspection(Found.JOURNAL, f"npa's journal, schema version {version}", version)


def current_version(conn: sqlite3.Connection) -> int:
    """The applied schema version: 0 for a database without ``meta``.

    Raises:
        ConfigError: ``meta`` holds a ``schema_version`` that is not a version number.
    """
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if found is None:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return 0
    if not _VERSION.match(str(row[0])):
        raise ConfigError(
            f"the journal's schema_version {str(row[0])[:40]!r} is not a version number",
            remedy="move the journal aside (with its -wal and -shm files) and rerun",
            details={"schema_version": str(row[0])[:40]},
        )
    return int(row[0])


def migrate(conn: sqlite3.Connection, *, target: int = SCHEMA_VERSION, source: str = "") -> int:
    """Apply ``MIGRATIONS`` up to ``target`` in one transaction; return the version.

    ``conn`` must be in autocommit mode (``isolation_level=None``).

    Raises:
        ConfigError: the database is newer than this npa-infra.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn)
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"the journal {source or '(database)'} has schema version {version}, newer "
                f"than this npa-infra understands ({SCHEMA_VERSION})",
                remedy="upgrade npa-infra (pip install -U npa-infra) and rerun the command",
                details={"schema_version": version, "supported": SCHEMA_VERSION},
            )
        for step in range(version, target):
            for statement in statements(MIGRATIONS[step]):
                conn.execute(statement)
        if version < target:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(target),),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(version, target)
