"""The terminal-run gate of a teardown: pure decisions, then the journal read."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.stack import gate
from npa_infra.stack.gate import GateVerdict, RunObservation, RunVerdict
from tests.support.stackjournal import journal_run


def obs(
    status: str,
    *,
    run_id: str = "r1",
    stack: str = "dev",
    cancel: str | None = None,
    cancel_at: float | None = None,
    mentions: str = "",
) -> RunObservation:
    return RunObservation(run_id, stack, status, 100.0, cancel, cancel_at, mentions)


@pytest.mark.parametrize(
    ("observation", "verdict"),
    [
        (obs("SUCCEEDED"), RunVerdict.TERMINAL),
        (obs("FAILED"), RunVerdict.TERMINAL),
        (obs("FAILED_SETUP"), RunVerdict.TERMINAL),
        (obs("CANCELLED"), RunVerdict.TERMINAL),
        (obs("ROLLED_BACK"), RunVerdict.TERMINAL),
        (obs("SUBMITTED"), RunVerdict.ACTIVE),
        (obs("LAUNCHING"), RunVerdict.ACTIVE),
        (obs("RECOVERY_REQUIRED"), RunVerdict.ACTIVE),
        (obs("CANCELLING"), RunVerdict.ACTIVE),
        (obs("SUBMITTED", cancel="already_absent", cancel_at=101.0), RunVerdict.CANCEL_PROVED),
        (obs("SUBMITTED", cancel="not_submitted", cancel_at=100.0), RunVerdict.CANCEL_PROVED),
        (obs("SUBMITTED", cancel="cancelled", cancel_at=99.0), RunVerdict.ACTIVE),
        (obs("SUBMITTED", cancel="partial_cancellation", cancel_at=101.0), RunVerdict.ACTIVE),
        (obs("SUBMITTED", cancel="verification_failed", cancel_at=101.0), RunVerdict.ACTIVE),
    ],
    ids=[
        "succeeded",
        "failed",
        "failed-star",
        "cancelled",
        "rolled-back",
        "submitted",
        "launching",
        "recovery-required",
        "cancelling",
        "cancel-proved-absent",
        "cancel-not-submitted",
        "cancel-before-last-update",
        "cancel-partial",
        "cancel-unverified",
    ],
)
def test_run_verdict_matrix(observation: RunObservation, verdict: RunVerdict) -> None:
    assert gate.run_verdict(observation) is verdict


def test_decide_blocked_names_only_active_runs() -> None:
    decision = gate.decide([obs("SUCCEEDED", run_id="a"), obs("SUBMITTED", run_id="b")])

    assert decision.verdict is GateVerdict.BLOCKED
    assert [r.run_id for r in decision.active] == ["b"]
    assert decision.describe() == "1 run(s) not terminal: b (SUBMITTED)"


def test_decide_no_runs_clear() -> None:
    assert gate.decide([]).clear


def test_decide_source_other_stack_blocks_only_when_it_names_uri() -> None:
    uri = "s3://b/npa-src/npa/" + "a" * 64 + "/"
    elsewhere = obs("SUBMITTED", stack="prod", mentions='{"src": "s3://b/other/"}')
    user = obs("SUBMITTED", run_id="r2", stack="prod", mentions=f'{{"src": "{uri}"}}')

    assert gate.decide_source([elsewhere], "dev", uri).clear
    assert [r.run_id for r in gate.decide_source([elsewhere, user], "dev", uri).active] == ["r2"]
    assert not gate.decide_source([obs("LAUNCHING")], "dev", uri).clear


def test_observe_home_reads_stack_runs_and_latest_cancel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    journal_run(home, "r1", status="SUBMITTED", cancel_outcome="already_absent")
    journal_run(home, "r2", status="SUBMITTED")
    journal_run(home, "r3", stack="prod", status="SUBMITTED")

    seen = gate.observe_home({"NPA_HOME": str(home)}, stack="dev")

    assert [(o.run_id, o.last_cancel_outcome) for o in seen] == [
        ("r1", "already_absent"),
        ("r2", None),
    ]
    assert [r.run_id for r in gate.decide(seen).active] == ["r2"]


def test_observe_home_without_journal_is_empty(tmp_path: Path) -> None:
    assert gate.observe_home({"NPA_HOME": str(tmp_path / "nothing")}, stack="dev") == []
    assert not (tmp_path / "nothing").exists()  # reading never creates the journal
