"""The Journal API: files and modes, every method, the write path, error translation."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import InvariantError, RunStateError
from npa_infra.journal.records import EventRow
from npa_infra.journal.store import Journal

from . import CANARY, a_record, a_run, a_wave, an_attempt


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def journal(home: Path) -> Iterator[Journal]:
    with Journal.open(home, secret_values=[CANARY]) as opened:
        yield opened


@pytest.fixture
def launched(journal: Journal) -> Journal:
    """A run with one wave and its first attempt."""
    journal.create_run(a_run())
    journal.upsert_wave(a_wave())
    journal.create_attempt(an_attempt())
    return journal


# -- runs -----------------------------------------------------------------------------


def test_create_run_get_returns_equal_row(journal: Journal) -> None:
    row = a_run()
    journal.create_run(row)
    assert journal.get_run("r1") == row
    assert journal.get_run("missing") is None


def test_create_run_existing_id_refused_with_resume_command(journal: Journal) -> None:
    journal.create_run(a_run())
    with pytest.raises(RunStateError) as info:
        journal.create_run(a_run(status="other"))
    assert "--resume-run r1" in info.value.remedy
    assert journal.get_run("r1") == a_run()


def test_create_run_unknown_mode_is_a_bug(journal: Journal) -> None:
    with pytest.raises(InvariantError, match="mode"):
        journal.create_run(a_run(mode="batch"))


def test_list_runs_newest_updated_first_and_limited(journal: Journal) -> None:
    for number, at in enumerate((3.0, 1.0, 2.0)):
        journal.create_run(a_run(f"r{number}", at=at))
    journal.update_run("r1", status="succeeded", now=9.0)
    assert [r.run_id for r in journal.list_runs()] == ["r1", "r0", "r2"]
    assert [r.run_id for r in journal.list_runs(limit=2)] == ["r1", "r0"]


def test_update_run_merges_data_shallowly_and_returns_row(journal: Journal) -> None:
    journal.create_run(a_run(data={"a": {"x": 1}, "b": 2}))
    row = journal.update_run("r1", lifecycle_state="planned", data={"a": {"y": 1}}, now=5.0)
    assert (row.status, row.lifecycle_state, row.updated_at) == ("running", "planned", 5.0)
    assert row.data == {"a": {"y": 1}, "b": 2}
    assert row.created_at == 1.0
    assert journal.get_run("r1") == row


def test_update_run_unknown_run_raises_run_state_error(journal: Journal) -> None:
    with pytest.raises(RunStateError, match="not in the journal"):
        journal.update_run("nope", status="x", now=1.0)


# -- waves ----------------------------------------------------------------------------


def test_upsert_wave_inserts_then_replaces(journal: Journal) -> None:
    journal.create_run(a_run())
    journal.upsert_wave(a_wave(index=1))
    journal.upsert_wave(a_wave(index=0))
    journal.upsert_wave(a_wave(index=1, status="running", states=["x", "y"]))
    waves = journal.waves("r1")
    assert [(w.wave_index, w.status, w.states) for w in waves] == [
        (0, "pending", ["train"]),
        (1, "running", ["x", "y"]),
    ]


def test_update_wave_changes_status_and_replaces_budgets(journal: Journal) -> None:
    journal.create_run(a_run())
    journal.upsert_wave(a_wave())
    journal.update_wave("r1", 0, budgets={"retries": 3}, now=4.0)
    journal.update_wave("r1", 0, status="succeeded", now=5.0)
    (wave,) = journal.waves("r1")
    assert (wave.status, wave.budgets, wave.updated_at) == ("succeeded", {"retries": 3}, 5.0)


def test_wave_by_key_reads_its_row_as_another_writer_left_it(journal: Journal, home: Path) -> None:
    journal.create_run(a_run())
    journal.create_run(a_run("r2"))
    journal.upsert_wave(a_wave(index=0))
    journal.upsert_wave(a_wave(index=1, name="eval"))
    journal.upsert_wave(a_wave("r2", index=1, name="other"))
    assert journal.wave("r1", 1) == journal.waves("r1")[1]
    assert journal.wave("r1", 2) is None and journal.wave("ghost", 0) is None
    with Journal.open(home) as other:  # another process's connection: never cached over
        other.update_wave("r1", 1, status="succeeded", budgets={"retries_left": 0}, now=7.0)
    found = journal.wave("r1", 1)
    assert found is not None
    assert (found.name, found.status, found.budgets) == ("eval", "succeeded", {"retries_left": 0})


def test_wave_unknown_run_or_wave_is_a_bug(journal: Journal) -> None:
    with pytest.raises(InvariantError, match="FOREIGN KEY"):
        journal.upsert_wave(a_wave("ghost"))
    journal.create_run(a_run())
    with pytest.raises(InvariantError, match="not in the journal"):
        journal.update_wave("r1", 4, status="x", now=1.0)


# -- attempts -------------------------------------------------------------------------


def test_create_attempt_consecutive_numbers_listed_in_order(launched: Journal) -> None:
    launched.upsert_wave(a_wave(index=1))
    launched.create_attempt(an_attempt(index=1))
    launched.create_attempt(an_attempt(attempt=2))
    assert [(a.wave_index, a.attempt) for a in launched.attempts("r1")] == [(0, 1), (0, 2), (1, 1)]
    assert [a.attempt for a in launched.attempts("r1", 0)] == [1, 2]
    latest = launched.latest_attempt("r1", 0)
    assert latest == an_attempt(attempt=2)
    assert launched.latest_attempt("r1", 7) is None


BAD_ATTEMPTS = {
    "gap": (3, {}, "consecutive"),
    "zero": (0, {}, "consecutive"),
    "duplicate": (1, {}, "already exists"),
    "duplicate logical id": (2, {"logical_launch_id": "npa-launch-r1-0-1"}, "UNIQUE"),
    "no wave": (1, {"wave_index": 5}, "upsert_wave"),
}


@pytest.mark.parametrize(("number", "changes", "match"), BAD_ATTEMPTS.values(), ids=BAD_ATTEMPTS)
def test_create_attempt_invalid_is_a_bug(
    launched: Journal, number: int, changes: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvariantError, match=match):
        launched.create_attempt(an_attempt(attempt=number, **changes))
    assert len(launched.attempts("r1")) == 1


def test_update_attempt_merges_data_and_adopts_job_id_once(launched: Journal) -> None:
    launched.update_attempt("r1", 0, 1, status="running", data={"a": 1}, now=2.0)
    launched.update_attempt("r1", 0, 1, job_id=7, sky_status="RUNNING", data={"b": 2}, now=3.0)
    launched.update_attempt("r1", 0, 1, job_id=7, now=4.0)  # the same id again is fine
    attempt = launched.latest_attempt("r1", 0)
    assert attempt is not None
    assert (attempt.status, attempt.job_id, attempt.sky_status) == ("running", 7, "RUNNING")
    assert (attempt.data, attempt.updated_at, attempt.created_at) == ({"a": 1, "b": 2}, 4.0, 1.0)
    with pytest.raises(InvariantError, match="adopted job id never changes"):
        launched.update_attempt("r1", 0, 1, job_id=8, now=5.0)


def test_update_attempt_unknown_is_a_bug(launched: Journal) -> None:
    with pytest.raises(InvariantError, match="not in the journal"):
        launched.update_attempt("r1", 0, 2, status="x", now=1.0)


# -- launch transactions --------------------------------------------------------------


def test_checkpoint_upserts_transaction_and_appends_history(launched: Journal) -> None:
    attempt = an_attempt()
    launched.checkpoint("r1", 0, 1, a_record(attempt, 0), now=2.0)
    final = a_record(attempt, 1, state="submitted", existence="found", job_id=7)
    launched.checkpoint("r1", 0, 1, final, now=3.0)
    tx = launched.transaction(attempt.logical_launch_id)
    assert tx is not None
    assert (tx.state, tx.launch_sequence, tx.existence, tx.job_id) == ("submitted", 1, "found", 7)
    assert (tx.run_id, tx.wave_index, tx.attempt, tx.updated_at) == ("r1", 0, 1, 3.0)
    assert tx.record == final
    assert launched.transactions("r1") == [tx]
    history = launched.checkpoints(attempt.logical_launch_id)
    assert [(c["launch_sequence"], c["state"], c["at"]) for c in history] == [
        (0, "launching", 2.0),
        (1, "submitted", 3.0),
    ]
    assert history[1]["record"] == final
    assert launched.transaction("missing") is None


def test_checkpoint_decreasing_sequence_refused_atomically(launched: Journal) -> None:
    attempt = an_attempt()
    launched.checkpoint("r1", 0, 1, a_record(attempt, 2), now=2.0)
    with pytest.raises(InvariantError, match="launch_sequence may never decrease"):
        launched.checkpoint("r1", 0, 1, a_record(attempt, 1), now=3.0)
    assert len(launched.checkpoints(attempt.logical_launch_id)) == 1  # no history row either
    tx = launched.transaction(attempt.logical_launch_id)
    assert tx is not None and tx.launch_sequence == 2


BAD_RECORDS = {
    "no logical id": ({"logical_launch_id": None}, "logical_launch_id"),
    "negative sequence": ({"launch_sequence": -1}, "launch_sequence"),
    "bool sequence": ({"launch_sequence": True}, "launch_sequence"),
    "no state": ({"state": None}, "state"),
    "non-text phase": ({"phase": 3}, "phase"),
    "text job id": ({"job_id": "7"}, "job_id"),
    "other attempt's id": ({"logical_launch_id": "npa-launch-other"}, "does not belong"),
    "other job name": ({"job_name": "other"}, "does not belong"),
}


@pytest.mark.parametrize(("changes", "match"), BAD_RECORDS.values(), ids=BAD_RECORDS)
def test_checkpoint_invalid_record_is_a_bug(
    launched: Journal, changes: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvariantError, match=match):
        launched.checkpoint("r1", 0, 1, a_record(an_attempt(), 0, **changes), now=2.0)
    assert launched.transactions("r1") == []


def test_checkpoint_unknown_attempt_is_a_bug(launched: Journal) -> None:
    with pytest.raises(InvariantError, match="not in the journal"):
        launched.checkpoint("r1", 0, 2, a_record(an_attempt(attempt=2)), now=2.0)


# -- events ---------------------------------------------------------------------------


def test_append_event_listed_in_order(launched: Journal) -> None:
    launched.append_event("r1", "planned", {"waves": 1}, now=2.0)
    launched.append_event("r1", "launched", {"job_id": 7}, now=3.0)
    events = launched.events("r1")
    assert [(e.kind, e.data, e.at) for e in events] == [
        ("planned", {"waves": 1}, 2.0),
        ("launched", {"job_id": 7}, 3.0),
    ]
    assert events[0].id < events[1].id
    assert launched.events("other") == []


def test_append_event_unknown_run_is_a_bug(journal: Journal) -> None:
    with pytest.raises(InvariantError, match="FOREIGN KEY"):
        journal.append_event("ghost", "x", {}, now=1.0)


def test_rows_to_json_round_trip_through_json(launched: Journal) -> None:
    launched.checkpoint("r1", 0, 1, a_record(an_attempt()), now=2.0)
    launched.append_event("r1", "k", {"n": 1}, now=2.0)
    rows: list[Any] = [launched.get_run("r1"), *launched.waves("r1"), *launched.attempts("r1")]
    rows += [*launched.transactions("r1"), *launched.events("r1")]
    for row in rows:
        assert json.loads(json.dumps(row.to_json())) == row.to_json()
    assert isinstance(rows[-1], EventRow) and rows[-1].to_json()["data"] == {"n": 1}


# -- the one write path: guard, labels, coverage --------------------------------------


def test_write_secret_value_refused_without_naming_it(journal: Journal) -> None:
    with pytest.raises(InvariantError) as info:
        journal.create_run(a_run(data={"env": {"HF": f"prefix-{CANARY}"}}))
    assert "create_run.data.env.HF" in str(info.value)
    assert CANARY not in str(info.value)
    assert journal.get_run("r1") is None


def test_write_secret_in_text_column_refused(launched: Journal) -> None:
    record = a_record(an_attempt(), operator_remedy=f"export TOKEN={CANARY}")
    with pytest.raises(InvariantError, match=r"checkpoint\.operator_remedy") as info:
        launched.checkpoint("r1", 0, 1, record, now=2.0)
    assert CANARY not in str(info.value)
    assert launched.transactions("r1") == []


def test_write_secret_key_and_late_secret_values_refused(launched: Journal) -> None:
    with pytest.raises(InvariantError, match=r"append_event\.data\.password"):
        launched.append_event("r1", "x", {"password": "p"}, now=1.0)
    launched.add_secret_values(["late-secret-value"])
    with pytest.raises(InvariantError):
        launched.update_attempt("r1", 0, 1, status="late-secret-value", now=1.0)
    assert launched.events("r1") == []


def test_write_non_json_value_is_a_bug(launched: Journal) -> None:
    with pytest.raises(InvariantError, match="not JSON"):
        launched.append_event("r1", "x", {"bad": {1, 2}}, now=1.0)
    with pytest.raises(InvariantError, match="not JSON"):
        launched.append_event("r1", "x", {"bad": float("nan")}, now=1.0)


def test_every_durable_write_goes_through_write(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels: list[str] = []
    outside: list[str] = []
    inside = False
    original = Journal._write

    def recording(self: Journal, label: str, plan: Any) -> None:
        nonlocal inside
        labels.append(label)
        inside = True
        try:
            original(self, label, plan)
        finally:
            inside = False

    def trace(sql: str) -> None:
        verb = sql.lstrip().split(" ", 1)[0].upper()
        if verb in {"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP"} and not inside:
            outside.append(sql)

    monkeypatch.setattr(Journal, "_write", recording)
    journal._connection().set_trace_callback(trace)
    journal.create_run(a_run())
    journal.update_run("r1", status="s", now=2.0)
    journal.upsert_wave(a_wave())
    journal.update_wave("r1", 0, status="s", now=2.0)
    journal.create_attempt(an_attempt())
    journal.update_attempt("r1", 0, 1, status="s", now=2.0)
    journal.checkpoint("r1", 0, 1, a_record(an_attempt()), now=2.0)
    journal.append_event("r1", "k", {}, now=2.0)
    assert labels == [
        "create_run",
        "update_run",
        "upsert_wave",
        "update_wave",
        "create_attempt",
        "update_attempt",
        "checkpoint",
        "append_event",
    ]
    assert outside == []


# -- plans (submit --plan-only; schema v3) ----------------------------------------------


def _plan(run_id: str = "p1", **overrides: Any) -> Any:
    from npa_infra.journal.records import PlanRow

    values: dict[str, Any] = {
        "run_id": run_id,
        "stack": "dev",
        "workflow": "wf",
        "mode": "runtime",
        "spec_path": "spec.yaml",
        "fingerprint": "fp-1",
        "status": "PLANNED",
        "created_at": 10.0,
        "updated_at": 10.0,
        "data": {"jobs": [{"job_name": "p1-00-a", "wave": 0, "path": "/r/p1-00-a.yaml"}]},
    }
    values.update(overrides)
    return PlanRow(**values)


def test_record_plan_get_and_list_newest_first(journal: Journal) -> None:
    assert journal.record_plan(_plan("p1")) is True
    assert journal.record_plan(_plan("p2", created_at=20.0, updated_at=20.0)) is True
    assert journal.get_plan("p1") == _plan("p1")
    assert journal.get_plan("missing") is None
    assert [p.run_id for p in journal.plans()] == ["p2", "p1"]
    assert journal.runs() == []  # a plan is never a run: no gate or status --all sees it


def test_record_plan_again_replaces_it_and_keeps_created_at(journal: Journal) -> None:
    journal.record_plan(_plan())
    journal.record_plan(
        _plan(fingerprint="fp-2", mode="one-shot", created_at=50.0, updated_at=50.0)
    )
    again = journal.get_plan("p1")
    assert again is not None
    assert (again.fingerprint, again.mode, again.created_at, again.updated_at) == (
        "fp-2",
        "one-shot",
        10.0,
        50.0,
    )


def test_record_plan_of_an_existing_run_writes_nothing(journal: Journal) -> None:
    journal.create_run(a_run())
    assert journal.record_plan(_plan("r1")) is False
    assert journal.get_plan("r1") is None
    assert journal.plans() == []


def test_record_plan_secret_value_refused(journal: Journal) -> None:
    with pytest.raises(InvariantError, match="secret"):
        journal.record_plan(_plan(data={"note": f"token {CANARY}"}))
    assert journal.get_plan("p1") is None
