"""The journal work of a runtime wave does not grow with the run's length (issue 19).

A 3-wave and a 6-wave serial runtime run go through the real submit SDK against the
simulator and the Kubernetes double. Counted, never timed: the wave rows the journal
reads (every read goes through ``Journal._read``) and the SQL statements it runs (the
connection's ``set_trace_callback``). Each wave reads its own row by key, so three more
waves cost no more than the first three did; re-reading every earlier wave's row on
each wave made a K-wave run read O(K²) wave rows (66 for 6 waves against 15 for 3).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from npa_infra.journal import database
from npa_infra.journal.store import Journal
from tests.integration.runs.supervised import chain_spec
from tests.integration.runs.world import World

SHORT, LONG = 3, 6
WAVE_ROWS_PER_WAVE = 3  # its own row, read by key, at most once per step that needs it


class _Counts:
    def __init__(self) -> None:
        self.wave_rows = 0
        self.statements = 0


def _counted(monkeypatch: pytest.MonkeyPatch, counts: _Counts) -> None:
    read = Journal._read
    connect = database.connect

    def counting_read(self: Journal, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        rows = read(self, sql, params)
        if " FROM waves " in f" {sql} ":
            counts.wave_rows += len(rows)
        return rows

    def traced_connect(path: Path) -> sqlite3.Connection:
        conn = connect(path)

        def trace(_statement: str) -> None:
            counts.statements += 1

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(Journal, "_read", counting_read)
    monkeypatch.setattr(database, "connect", traced_connect)


def _run(world: World, tmp_path: Path, waves: int, monkeypatch: pytest.MonkeyPatch) -> _Counts:
    spec = tmp_path / f"chain-{waves}.yaml"
    spec.write_text(chain_spec(waves), encoding="utf-8")
    counts = _Counts()
    with monkeypatch.context() as patch:
        _counted(patch, counts)
        result = world.submit(spec, run_id=f"reads-{waves}")
    assert result.status == "SUCCEEDED", result.to_json()
    assert len(result.job_ids) == waves
    return counts


def test_runtime_waves_journal_reads_bounded_per_wave(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.faults(
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING", "SUCCEEDED"]}
    )
    short = _run(world, tmp_path, SHORT, monkeypatch)
    long = _run(world, tmp_path, LONG, monkeypatch)
    # wave rows: each wave reads its own, never every earlier wave's
    assert 0 < short.wave_rows <= SHORT * WAVE_ROWS_PER_WAVE
    assert long.wave_rows <= LONG * WAVE_ROWS_PER_WAVE
    assert long.wave_rows - short.wave_rows <= short.wave_rows
    # SQL statements: the three extra waves run no more than the first three (and the
    # run's own setup) did
    assert short.statements > 0
    assert long.statements - short.statements <= short.statements
