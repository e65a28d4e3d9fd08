"""The journal never silently starts over (issue 24): an existing file that is not npa's
journal is refused, untouched, with what was found and the command that moves it aside with
its -wal and -shm files; a new journal appears whole or not at all."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError
from npa_infra.journal import database, schema
from npa_infra.journal.store import Journal, journal_path

from . import a_run


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(home: Path, moved: str = "") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        Journal.open(home)
    error = info.value
    assert str(journal_path(home)) in error.message
    assert f"mv -n {journal_path(home)}{moved} " in error.remedy
    return error


def _journal_then(change: Callable[[sqlite3.Connection], None]) -> Callable[[Path], None]:
    def plant(path: Path) -> None:
        with Journal.open(path.parent) as journal:
            journal.create_run(a_run())
        conn = sqlite3.connect(str(path), isolation_level=None)
        change(conn)
        conn.close()

    return plant


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('another application')")
    conn.close()


def _foreign_meta(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE meta (name TEXT, value TEXT)")
    conn.close()


def _meta_only(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.close()


def _no_tables(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("DROP TABLE t")
    conn.close()


@pytest.mark.parametrize(
    ("plant", "found"),
    [
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_bytes(b"#!/bin/sh\necho hello\n"), "not_sqlite"),
        (_no_tables, "no_tables"),
        (_foreign, "foreign"),
        (_foreign_meta, "foreign"),
        (_meta_only, "foreign"),
        (_journal_then(lambda c: c.execute("DELETE FROM meta")), "no_version"),
        (_journal_then(lambda c: c.execute("UPDATE meta SET value = 'three'")), "bad_version"),
        (_journal_then(lambda c: c.execute("UPDATE meta SET value = '-1'")), "bad_version"),
        (_journal_then(lambda c: c.execute("UPDATE meta SET value = '0'")), "bad_version"),
    ],
    ids=["empty", "not-sqlite", "no-tables", "foreign", "foreign-meta", "meta-only",
         "no-version-row", "word-version", "negative-version", "zero-version"],
)  # fmt: skip
def test_open_file_that_is_not_npas_journal_refused_untouched(
    tmp_path: Path, plant: Callable[[Path], None], found: str
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    path = journal_path(home)
    plant(path)
    before = _sha(path)
    error = _refused(home)
    assert error.details["found"] == found
    assert _sha(path) == before  # nothing written: no migration, no journal mode switch
    assert error.exit_code == 1


def test_open_foreign_database_is_never_switched_to_wal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _foreign(journal_path(home))
    _refused(home)
    conn = sqlite3.connect(str(journal_path(home)))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("SELECT text FROM notes").fetchall() == [("another application",)]
    assert not os.path.lexists(journal_path(home).with_name("journal.sqlite3-wal"))


def test_open_wal_left_without_its_journal_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Journal.open(home) as journal:
        journal.create_run(a_run())
        wal = journal_path(home).with_name("journal.sqlite3-wal")
        moved = tmp_path / "aside.sqlite3"
        journal_path(home).rename(moved)  # moved aside alone, its log left behind (issue 24)
    # the connection's close checkpointed into the moved file; leave a log behind as a crash
    wal.write_bytes(b"\0" * 32)
    error = _refused(home, "-wal")
    assert error.details["found"] == "wal_without_journal"
    assert "put the journal back" in error.remedy
    assert not journal_path(home).exists()  # no new journal started beside the old log


def test_open_emptied_journal_remedy_moves_it_with_its_log_and_keeps_the_runs(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    first = Journal.open(home)
    first.create_run(a_run("kept-run"))  # committed to the -wal while first stays open
    path = journal_path(home)
    path.write_bytes(b"")  # `: > journal.sqlite3`
    error = _refused(home)
    assert error.details["found"] == "empty"
    for suffix in ("-wal", "-shm"):
        assert f"{path}{suffix}" in error.remedy  # the log and index move with it
    first.close()
    subprocess.run(["sh", "-c", error.remedy.rsplit(": ", 1)[1]], check=True)
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("journal.sqlite3")) == [
        n for n in sorted(p.name for p in home.iterdir()) if n.startswith("journal.sqlite3.aside")
    ]
    with Journal.open(home) as fresh:  # a new journal, started because the operator chose so
        assert fresh.list_runs() == []


def test_create_links_a_complete_journal_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    seen: list[int] = []
    real_link = os.link

    def link(src: str | Path, dst: str | Path) -> None:
        assert not os.path.lexists(dst)  # nobody ever saw a half-made journal at the path
        conn = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        seen.append(schema.current_version(conn))
        conn.close()
        real_link(src, dst)

    monkeypatch.setattr(database.os, "link", link)
    with Journal.open(home) as journal:
        journal.create_run(a_run())
    assert seen == [schema.SCHEMA_VERSION]
    assert os.listdir(home) == ["journal.sqlite3"]  # no temporary left behind


def test_create_race_loser_opens_the_winners_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    real_link = os.link

    def other_process_first(src: str | Path, dst: str | Path) -> None:
        monkeypatch.setattr(database.os, "link", real_link)
        with Journal.open(home) as winner:  # another process creates it meanwhile
            winner.create_run(a_run("winners"))
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(database.os, "link", other_process_first)
    with Journal.open(home) as journal:
        assert [r.run_id for r in journal.list_runs()] == ["winners"]
    assert not [n for n in os.listdir(home) if n.endswith(".new")]  # no temporary left


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION + 1))
def test_tables_per_version_match_the_migrations(tmp_path: Path, version: int) -> None:
    conn = sqlite3.connect(str(tmp_path / "j.sqlite3"), isolation_level=None)
    schema.migrate(conn, target=version)
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    assert {n for (n,) in names} == schema.TABLES[version]
