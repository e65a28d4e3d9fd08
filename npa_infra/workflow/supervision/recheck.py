"""The fresh read before a recovery acts on an infrastructure verdict (runtime-reference.md §1).

A watch that ends ``INFRASTRUCTURE_FAILED`` (a terminal FAILED_NO_RESOURCE or
FAILED_CONTROLLER row, or an absence confirmed over the grace window) is acted
on (cancel, relaunch, fail) only when a fresh queue read by exact id shows the
job terminal or absent: ``supervision.recheck`` decides, this module reads and
journals (``recovery_recheck``). A job the read shows alive is never cancelled;
it is watched again. A job that stays unreadable ends the watch as unreadable,
which leaves it running and the run recoverable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_infra.runs import supervision
from npa_infra.workflow.supervision import watch

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.workflow.target.services import Clock

__all__ = ["recheck", "watch_wave"]


def watch_wave(
    watch_once: Callable[[], watch.WatchResult], recheck_once: Callable[[], supervision.Recheck]
) -> watch.WatchResult:
    """``watch_once`` until it decides; an infrastructure verdict only after ``recheck_once``."""
    while True:
        result = watch_once()
        if result.verdict is not supervision.Verdict.INFRASTRUCTURE_FAILED:
            return result
        again = recheck_once()
        if again is supervision.Recheck.PROCEED:
            return result
        if again is supervision.Recheck.UNREADABLE:
            return dataclasses.replace(result, verdict=supervision.Verdict.UNREADABLE)
        # WATCH_AGAIN: the latest read shows the job alive; supervise it again


def recheck(
    *,
    run_id: str,
    wave_index: int,
    attempt: int,
    job_id: int,
    sky: SkyPilot,
    journal: Journal,
    clock: Clock,
    interval: float,
) -> supervision.Recheck:
    """Fresh reads by exact id until ``supervision.recheck`` allows or forbids; journaled."""
    unreadable = 0
    while True:
        presence, status = watch.presence_of(sky.queue(), job_id)
        unreadable = unreadable + 1 if presence is supervision.Presence.UNKNOWN else 0
        verdict = supervision.recheck(presence, status, unreadable)
        if verdict is not supervision.Recheck.READ_AGAIN:
            journal.append_event(
                run_id,
                "recovery_recheck",
                {
                    "wave": wave_index,
                    "attempt": attempt,
                    "job_id": job_id,
                    "presence": presence.value,
                    "status": status,
                    "verdict": verdict.value,
                    "unreadable_reads": unreadable,
                },
                now=clock.now(),
            )
            return verdict
        clock.sleep(interval)
