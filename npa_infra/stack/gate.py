"""The terminal-run gate of a stack's teardown (cli.md §2.4, §6; pulumi.md §3).

The jobs controller and the staged source belong to the stack; tearing
either down while a run still needs it would orphan that run's jobs or pull
its code from under it. So teardown asks the journal first:

- a run is **settled** when its status is terminal (SUCCEEDED, CANCELLED,
  ROLLED_BACK, FAILED or any FAILED* status), or when the last thing that
  happened to it is a ``cancel`` event whose outcome proved its jobs are no
  longer live (``cancelled``, ``already_absent``, ``not_submitted``);
- every other run (LAUNCHING, SUBMITTED, RECOVERY_REQUIRED, …) is **active**,
  and blocks the teardown. Nothing here cancels anything: a caller that was
  asked to (``--cancel-runs``) cancels, then asks again.

``decide`` and ``decide_source`` are pure; ``observe`` is the one journal read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from npa_infra import config as npa_config
from npa_infra.runs import lifecycle

if TYPE_CHECKING:
    from npa_infra.journal.records import EventRow, RunRow
    from npa_infra.journal.store import Journal

__all__ = [
    "SETTLING_CANCEL_OUTCOMES",
    "TERMINAL_STATUSES",
    "GateDecision",
    "GateVerdict",
    "RunObservation",
    "RunVerdict",
    "decide",
    "decide_source",
    "observe",
    "observe_home",
    "run_verdict",
]

# the journal statuses after which no job of the run can still be live (runs.lifecycle)
TERMINAL_STATUSES = lifecycle.SETTLED
SETTLING_CANCEL_OUTCOMES = frozenset({"cancelled", "already_absent", "not_submitted"})


class RunVerdict(StrEnum):
    TERMINAL = "terminal"
    CANCEL_PROVED = "cancel_proved"
    ACTIVE = "active"


class GateVerdict(StrEnum):
    CLEAR = "clear"
    BLOCKED = "blocked_active_jobs"


@dataclass(frozen=True, slots=True)
class RunObservation:
    """What the journal says about one run, reduced to what the gate needs."""

    run_id: str
    stack: str
    status: str
    updated_at: float
    last_cancel_outcome: str | None = None  # the latest ``cancel`` event's outcome
    last_cancel_at: float | None = None
    mentions: str = ""  # the run's journaled data as JSON text (URIs it references)


@dataclass(frozen=True, slots=True)
class GateDecision:
    verdict: GateVerdict
    active: tuple[RunObservation, ...] = ()

    @property
    def clear(self) -> bool:
        return self.verdict is GateVerdict.CLEAR

    def describe(self) -> str:
        runs = ", ".join(f"{r.run_id} ({r.status})" for r in self.active)
        return f"{len(self.active)} run(s) not terminal: {runs}" if self.active else "no active run"


def run_verdict(run: RunObservation) -> RunVerdict:
    """Terminal, settled by a later cancel, or active (the module docstring's rules)."""
    status = run.status.upper()
    # cli.md §2.4: only terminal runs let the controller go
    if status in TERMINAL_STATUSES or status.startswith("FAILED"):
        return RunVerdict.TERMINAL
    # a cancel that proved the jobs gone counts only if nothing happened to the run since
    if (
        run.last_cancel_outcome in SETTLING_CANCEL_OUTCOMES
        and run.last_cancel_at is not None
        and run.last_cancel_at >= run.updated_at
    ):
        return RunVerdict.CANCEL_PROVED
    return RunVerdict.ACTIVE


def decide(runs: Sequence[RunObservation]) -> GateDecision:
    """Clear when every run of the stack is settled; otherwise blocked, naming the active ones."""
    active = tuple(r for r in runs if run_verdict(r) is RunVerdict.ACTIVE)
    if active:
        return GateDecision(GateVerdict.BLOCKED, active)
    return GateDecision(GateVerdict.CLEAR)


def decide_source(runs: Sequence[RunObservation], stack: str, uri: str) -> GateDecision:
    """Staged source may go only when no active run of the stack, or one that names it, remains.

    An active run of this stack may use the prefix without having journaled it,
    so it blocks as well (runtime-reference.md §6: never delete what a live run uses).
    """
    active = tuple(
        r
        for r in runs
        if run_verdict(r) is RunVerdict.ACTIVE and (r.stack == stack or uri in r.mentions)
    )
    return GateDecision(GateVerdict.BLOCKED, active) if active else GateDecision(GateVerdict.CLEAR)


def _observation(run: RunRow, events: Sequence[EventRow]) -> RunObservation:
    cancels = [e for e in events if e.kind == "cancel"]
    last = cancels[-1] if cancels else None
    outcome = last.data.get("outcome") if last is not None else None
    return RunObservation(
        run_id=run.run_id,
        stack=run.stack or "",
        status=run.status,
        updated_at=run.updated_at,
        last_cancel_outcome=outcome if isinstance(outcome, str) else None,
        last_cancel_at=last.at if last is not None else None,
        mentions=json.dumps(run.data, sort_keys=True, default=str),
    )


def observe(journal: Journal, *, stack: str | None = None) -> list[RunObservation]:
    """The runs of ``stack`` (every run when None), with their latest cancel."""
    return [_observation(run, journal.events(run.run_id)) for run in journal.runs(stack=stack)]


def observe_home(env: Mapping[str, str], *, stack: str | None = None) -> list[RunObservation]:
    """``observe`` on the journal under the npa home; no journal means no run yet.

    Raises:
        ConfigError: the journal exists but cannot be opened.
    """
    from npa_infra.journal.store import Journal, present

    home = npa_config.npa_home(env)
    if not present(home):
        return []
    journal = Journal.open(home)
    try:
        return observe(journal, stack=stack)
    finally:
        journal.close()
