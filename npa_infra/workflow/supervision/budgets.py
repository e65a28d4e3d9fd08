"""A wave's budgets: ``--retries`` for payload failures, the recovery budget for
infrastructure (runtime-reference.md §3).

Each wave's budgets are persisted on its journal row the first time it is
launched, from the submit's flags, and are never borrowed between waves or
between the two kinds. ``spend`` journals every unit spent with the verdict
that spent it. On ``--resume-run`` a larger ``--retries`` may raise the
payload budget (never lower it); the recovery budget is never extended: its
exhaustion is terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.workflow.execution.liverun import LiveRequest
    from npa_infra.workflow.supervision.watch import WatchResult
    from npa_infra.workflow.target.services import Clock

__all__ = ["load", "spend"]


def load(request: LiveRequest, journal: Journal, index: int, now: float) -> dict[str, int]:
    """The wave's persisted budgets; created from the flags the first time (never borrowed).

    ``*_left`` is what may still be spent, ``*_total`` the budget the wave was
    given (``status`` reports both; a journal from before totals has only ``*_left``).
    """
    wave = journal.wave(request.run_id, index)  # by key: one row, whatever the run's length
    if wave is not None and "retries_left" in wave.budgets:
        stored = {k: int(v) for k, v in wave.budgets.items() if isinstance(v, int)}
        return _extended(request, journal, index, stored, now) if request.resume else stored
    retries = int(request.extra.get("retries") or 0)
    recoveries = int(request.extra.get("max_infrastructure_recoveries", 1))
    budgets = {
        "retries_left": retries,
        "infrastructure_recoveries_left": recoveries,
        "retries_total": retries,
        "infrastructure_recoveries_total": recoveries,
    }
    journal.update_wave(request.run_id, index, budgets=budgets, now=now)
    return budgets


def _extended(
    request: LiveRequest, journal: Journal, index: int, budgets: dict[str, int], now: float
) -> dict[str, int]:
    """On ``--resume-run``, ``--retries N`` may raise (never lower) the payload budget.

    Issue 9: an adopted job proven terminal on resume retries through the same
    durable path when the operator asks for retries now. The wave may use N
    retries in all, so what is left is N minus the retries already spent, and
    never less than what the journal holds; ``retries_total`` becomes N. The
    infrastructure budget is not extended: its exhaustion is persisted and
    terminal.
    """
    used = sum(
        1
        for event in journal.events(request.run_id)
        if event.kind == "payload_retry" and event.data.get("wave") == index
    )
    wanted = int(request.extra.get("retries") or 0) - used
    if wanted <= budgets["retries_left"]:
        return budgets
    journal.append_event(
        request.run_id,
        "budget_extended",
        {
            "wave": index,
            "retries_left": wanted,
            "retries_total": wanted + used,
            "was": budgets["retries_left"],
            "used": used,
        },
        now=now,
    )
    budgets = {**budgets, "retries_left": wanted, "retries_total": wanted + used}
    journal.update_wave(request.run_id, index, budgets=budgets, now=now)
    return budgets


def spend(
    journal: Journal,
    run_id: str,
    index: int,
    budgets: dict[str, int],
    which: str,
    result: WatchResult,
    clock: Clock,
) -> None:
    """Spend one unit of ``which`` and journal it with the verdict that spent it."""
    budgets[which] -= 1
    now = clock.now()
    journal.update_wave(run_id, index, budgets=budgets, now=now)
    journal.append_event(
        run_id,
        "payload_retry" if which == "retries_left" else "infrastructure_recovery",
        {
            "wave": index,
            "verdict": result.verdict.value,
            "status": result.status,
            "blocker": result.blocker,
            **budgets,
        },
        now=now,
    )
