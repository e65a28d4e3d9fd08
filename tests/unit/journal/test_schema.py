"""Schema versioning and the invariants SQLite enforces itself (journal/schema.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError
from npa_infra.journal import schema
from npa_infra.journal.records import AttemptRow, RunRow, WaveRow
from npa_infra.journal.store import Journal, journal_path

V2_INDEXES = {"runs_by_updated", "events_by_run", "checkpoints_by_launch", "transactions_by_run"}


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _names(conn: sqlite3.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
    return {r[0] for r in rows}


def test_migrate_empty_database_reaches_latest_version(tmp_path: Path) -> None:
    conn = _raw(tmp_path / "j.sqlite3")
    assert schema.current_version(conn) == 0
    assert schema.migrate(conn) == schema.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert schema.current_version(conn) == schema.SCHEMA_VERSION
    tables = _names(conn, "table")
    assert {"meta", "runs", "waves", "attempts", "transactions", "checkpoints", "events"} <= tables
    assert _names(conn, "index") >= V2_INDEXES
    assert "attempts_identity_immutable" in _names(conn, "trigger")


@pytest.mark.parametrize("start", [0, 1, 2], ids=["empty", "v1", "v2"])
def test_migrate_applies_every_missing_version_in_one_transaction(
    tmp_path: Path, start: int
) -> None:
    conn = _raw(tmp_path / "j.sqlite3")
    if start:
        schema.migrate(conn, target=start)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)

    assert schema.migrate(conn) == schema.SCHEMA_VERSION

    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    assert schema.current_version(conn) == schema.SCHEMA_VERSION


def test_migrate_reopen_is_idempotent(tmp_path: Path) -> None:
    conn = _raw(tmp_path / "j.sqlite3")
    schema.migrate(conn)
    before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    assert schema.migrate(conn) == schema.SCHEMA_VERSION
    after = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    assert before == after


def test_migrate_v1_database_gets_v2_and_keeps_its_rows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conn = _raw(journal_path(home))
    assert schema.migrate(conn, target=1) == 1
    assert not V2_INDEXES & _names(conn, "index")
    conn.execute(
        "INSERT INTO runs VALUES ('r1', NULL, 'wf', 'runtime', 's.yaml', 'fp', '[]', "
        "'running', 'launching', 1.0, 2.0, '{}')"
    )
    conn.close()
    with Journal.open(home) as journal:
        run = journal.get_run("r1")
    assert run is not None and run.status == "running"
    conn = _raw(journal_path(home))
    assert schema.current_version(conn) == schema.SCHEMA_VERSION
    assert _names(conn, "index") >= V2_INDEXES
    assert "plans" in _names(conn, "table")


def test_migrate_v2_database_gets_plans_and_keeps_its_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conn = _raw(journal_path(home))
    assert schema.migrate(conn, target=2) == 2
    assert "plans" not in _names(conn, "table")
    conn.execute(
        "INSERT INTO runs VALUES ('r1', NULL, 'wf', 'runtime', 's.yaml', 'fp', '[]', "
        "'SUBMITTED', 'committed', 1.0, 2.0, '{}')"
    )
    conn.close()
    with Journal.open(home) as journal:
        assert [r.run_id for r in journal.runs()] == ["r1"]
        assert journal.plans() == []
    conn = _raw(journal_path(home))
    assert schema.current_version(conn) == 3
    assert {"plans_by_updated"} <= _names(conn, "index")
    assert "plans_no_delete" in _names(conn, "trigger")


def test_plans_are_never_deleted(tmp_path: Path) -> None:
    conn = _raw(tmp_path / "j.sqlite3")
    schema.migrate(conn)
    conn.execute(
        "INSERT INTO plans VALUES ('p1', NULL, 'wf', 'raw', 's.yaml', '', 'PLANNED', 1.0, 1.0, "
        "'{}')"
    )
    with pytest.raises(sqlite3.IntegrityError, match="npa: plans are never deleted"):
        conn.execute("DELETE FROM plans")


def test_open_newer_schema_version_refused_with_upgrade_remedy(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Journal.open(home).close()
    conn = _raw(journal_path(home))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(99),))
    conn.close()
    with pytest.raises(ConfigError) as info:
        Journal.open(home)
    assert "upgrade npa-infra" in info.value.remedy
    assert info.value.details["schema_version"] == 99


def test_migrate_failing_migration_rolls_back_whole_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _raw(tmp_path / "j.sqlite3")
    latest = schema.migrate(conn)
    broken = "CREATE TABLE extra (x INTEGER);\nCREATE TABLE broken (;\n"
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, broken))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))
    with pytest.raises(sqlite3.OperationalError):
        schema.migrate(conn, target=schema.SCHEMA_VERSION)
    assert schema.current_version(conn) == latest
    assert "extra" not in _names(conn, "table")
    assert not conn.in_transaction


def test_statements_keeps_trigger_bodies_whole() -> None:
    script = "CREATE TABLE t (x);\nCREATE TRIGGER g BEFORE DELETE ON t\nBEGIN SELECT 1; END;\n"
    assert schema.statements(script) == [
        "CREATE TABLE t (x);",
        "CREATE TRIGGER g BEFORE DELETE ON t\nBEGIN SELECT 1; END;",
    ]


def test_insert_upsert_sets_every_column_but_the_key() -> None:
    sql = schema.insert("waves", upsert_on=("run_id", "wave_index"))
    assert sql.startswith("INSERT INTO waves (run_id, wave_index, key,")
    assert "ON CONFLICT (run_id, wave_index) DO UPDATE SET key = excluded.key" in sql
    assert "run_id = excluded" not in sql


# -- triggers, exercised with raw SQL: no code path can bypass them --------------------


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    with Journal.open(home) as journal:
        journal.create_run(
            RunRow(
                run_id="r1",
                stack=None,
                workflow="wf",
                mode="runtime",
                spec_path="s.yaml",
                fingerprint="fp",
                resume_argv=["npa"],
                status="running",
                lifecycle_state="launching",
                created_at=1.0,
                updated_at=1.0,
            )
        )
        journal.upsert_wave(
            WaveRow(
                run_id="r1",
                wave_index=0,
                key="000|serial|a",
                name="a",
                kind="serial",
                states=["a"],
                status="running",
                updated_at=1.0,
            )
        )
        for number, job_id in ((1, 7), (2, None)):
            journal.create_attempt(
                AttemptRow(
                    run_id="r1",
                    wave_index=0,
                    attempt=number,
                    job_name=f"r1-00-a-a{number}",
                    logical_launch_id=f"npa-launch-{number}",
                    created_at=1.0,
                    status="running",
                    updated_at=1.0,
                    job_id=job_id,
                )
            )
        record = {"logical_launch_id": "npa-launch-1", "launch_sequence": 2, "state": "submitted"}
        journal.checkpoint("r1", 0, 1, record, now=2.0)
        journal.append_event("r1", "launched", {"job_id": 7}, now=2.0)
    yield journal_path(home)


ABORTED = {
    "attempt job_name": "UPDATE attempts SET job_name = 'other' WHERE attempt = 1",
    "attempt logical id": "UPDATE attempts SET logical_launch_id = 'x' WHERE attempt = 1",
    "attempt created_at": "UPDATE attempts SET created_at = 9 WHERE attempt = 1",
    "attempt number": "UPDATE attempts SET attempt = 5 WHERE attempt = 1",
    "attempt wave": "UPDATE attempts SET wave_index = 3 WHERE attempt = 1",
    "attempt run": "UPDATE attempts SET run_id = 'r2' WHERE attempt = 1",
    "adopted job id changed": "UPDATE attempts SET job_id = 8 WHERE attempt = 1",
    "adopted job id cleared": "UPDATE attempts SET job_id = NULL WHERE attempt = 1",
    "attempt delete": "DELETE FROM attempts WHERE attempt = 2",
    "sequence decreases": "UPDATE transactions SET launch_sequence = 1",
    "transaction attempt": "UPDATE transactions SET attempt = 2",
    "transaction delete": "DELETE FROM transactions",
    "checkpoint update": "UPDATE checkpoints SET state = 'x'",
    "checkpoint delete": "DELETE FROM checkpoints",
    "event update": "UPDATE events SET kind = 'x'",
    "event delete": "DELETE FROM events",
    "run identity": "UPDATE runs SET fingerprint = 'other'",
    "run delete": "DELETE FROM runs",
}


@pytest.mark.parametrize("sql", list(ABORTED.values()), ids=list(ABORTED))
def test_trigger_forbidden_change_aborts(filled: Path, sql: str) -> None:
    conn = _raw(filled)
    with pytest.raises(sqlite3.IntegrityError, match=r"^npa: "):
        conn.execute(sql)


ALLOWED = {
    "job id adopted once": "UPDATE attempts SET job_id = 9 WHERE attempt = 2",
    "job id rewritten unchanged": "UPDATE attempts SET job_id = 7 WHERE attempt = 1",
    "attempt status": "UPDATE attempts SET status = 'failed', sky_status = 'FAILED' WHERE attempt = 1",
    "sequence grows": "UPDATE transactions SET launch_sequence = 3",
    "run status": "UPDATE runs SET status = 'succeeded', updated_at = 5",
    "append event": "INSERT INTO events (run_id, at, kind, data) VALUES ('r1', 3, 'k', '{}')",
}


@pytest.mark.parametrize("sql", list(ALLOWED.values()), ids=list(ALLOWED))
def test_trigger_allowed_change_passes(filled: Path, sql: str) -> None:
    conn = _raw(filled)
    assert conn.execute(sql).rowcount == 1
