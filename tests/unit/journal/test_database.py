"""The journal's SQLite file: private modes, pragmas, refusals, and error translation."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import ConfigError, InvariantError
from npa_infra.journal import database
from npa_infra.journal.store import Journal, journal_path

from . import a_run


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def journal(home: Path) -> Iterator[Journal]:
    with Journal.open(home) as opened:
        yield opened


# -- files, modes and pragmas -------------------------------------------------------


def test_open_missing_home_created_private_with_private_files(tmp_path: Path) -> None:
    home = tmp_path / "a" / "b" / "home"
    with Journal.open(home) as journal:
        journal.create_run(a_run())
        path = journal_path(home)
        for directory in (tmp_path / "a", tmp_path / "a" / "b", home):
            assert _mode(directory) == 0o700
        for name in ("", "-wal", "-shm"):
            assert _mode(path.with_name(path.name + name)) == 0o600


def test_open_existing_readable_file_made_0600(home: Path) -> None:
    Journal.open(home).close()
    journal_path(home).chmod(0o644)
    Journal.open(home).close()
    assert _mode(journal_path(home)) == 0o600


def test_open_sets_wal_full_sync_foreign_keys_and_busy_timeout(journal: Journal) -> None:
    conn = journal._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"], ids=["db", "wal", "shm"])
def test_open_symlinked_journal_file_refused(home: Path, tmp_path: Path, suffix: str) -> None:
    home.mkdir()
    target = tmp_path / "elsewhere"
    target.touch()
    link = journal_path(home).with_name(journal_path(home).name + suffix)
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="symlink") as info:
        Journal.open(home)
    assert str(link) in info.value.remedy


def test_open_not_a_database_refused_with_move_aside_remedy(home: Path) -> None:
    home.mkdir()
    journal_path(home).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError) as info:
        Journal.open(home)
    assert info.value.details["found"] == "not_sqlite"
    assert "move it aside" in info.value.remedy
    assert f"mv -n {journal_path(home)} {journal_path(home)}.aside-" in info.value.remedy


def test_open_sqlite_header_over_garbage_is_notadb_with_move_aside_command(home: Path) -> None:
    home.mkdir()
    journal_path(home).write_bytes(database.SQLITE_HEADER + b"\xff" * 4000)
    with pytest.raises(ConfigError) as info:
        Journal.open(home)
    assert info.value.details["sqlite_error"] in ("SQLITE_NOTADB", "SQLITE_CORRUPT")
    assert f"mv -n {journal_path(home)} " in info.value.remedy


def test_constructor_does_no_io_and_unopened_journal_refuses_use(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "nowhere" / "journal.sqlite3")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(InvariantError, match="not open"):
        journal.get_run("r1")
    journal.close()  # closing an unopened journal is harmless


# -- SQLite errors translated ---------------------------------------------------------


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


@pytest.mark.parametrize("cls", _subclasses(sqlite3.Error), ids=lambda c: c.__name__)
def test_translate_every_sqlite_error_class_maps(cls: type[sqlite3.Error], tmp_path: Path) -> None:
    mapped = database.translate(cls("boom"), "step", tmp_path)
    assert isinstance(mapped, InvariantError)


@pytest.mark.parametrize("code", sorted(database.ENVIRONMENT_CODES))
def test_translate_environment_codes_become_config_errors(code: str, tmp_path: Path) -> None:
    exc = sqlite3.OperationalError("boom")
    exc.sqlite_errorname = code + "_SOMETHING"
    mapped = database.translate(exc, "checkpoint", tmp_path)
    assert isinstance(mapped, ConfigError) and mapped.remedy
    assert mapped.details == {
        "sqlite_error": code + "_SOMETHING",
        "step": "checkpoint",
        "journal": str(tmp_path),
    }


def test_write_while_another_writer_holds_lock_is_busy_config_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "BUSY_TIMEOUT_S", 0.05)
    with Journal.open(home) as journal:
        journal.create_run(a_run())
        other = sqlite3.connect(str(journal_path(home)), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(ConfigError, match="locked") as info:
                journal.append_event("r1", "k", {}, now=1.0)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert info.value.details["sqlite_error"] == "SQLITE_BUSY"
        journal.append_event("r1", "k", {}, now=1.0)  # usable again once the lock is gone
        assert len(journal.events("r1")) == 1


def test_open_foreign_owned_journal_refused(home: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    home.mkdir()
    journal_path(home).touch()
    os.chown(journal_path(home), 4242, 4242)
    with pytest.raises(ConfigError, match="owned by you"):
        Journal.open(home)


def _open_together(path: str, barrier: Any) -> None:
    barrier.wait()
    database.connect(Path(path)).close()


def test_processes_opening_a_new_journal_at_once_all_succeed(tmp_path: Path) -> None:
    """Switching a new database to WAL takes a lock SQLite does not wait for: the open retries."""
    context = multiprocessing.get_context("fork")
    for round_ in range(8):
        barrier = context.Barrier(6)
        path = tmp_path / f"round-{round_}" / "journal.sqlite3"
        path.parent.mkdir(mode=0o700)
        workers = [
            context.Process(target=_open_together, args=(str(path), barrier)) for _ in range(6)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert [w.exitcode for w in workers] == [0] * 6, f"round {round_}"
