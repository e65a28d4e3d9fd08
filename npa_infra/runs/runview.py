"""The one status of a run, as ``status``, ``list`` and the SDK all report it.

A run's status is the journal's (``runs.lifecycle.RunStatus``, the words
``submit`` reports too), read through one rule set here, so no reader can
tell a different story about the same journal:

1. a run id the journal holds only as a ``--plan-only`` plan: ``PLANNED``
   (nothing was launched);
2. ``LAUNCHING`` while the process that holds the run is gone (it crashed,
   was killed, or ended on an internal error before it recorded an outcome):
   ``RECOVERY_REQUIRED``. A launch may have been sent, so the outcome is not
   proven, and ``--resume-run`` is what continues it (faults.md invariant 3).
   Whether that process lives is an observation: unknown keeps ``LAUNCHING``;
3. otherwise the journal's status as it is: ``ROLLED_BACK`` (nothing was
   launched), ``RECOVERY_REQUIRED``, ``FAILED``, ``CANCELLED``, ``SUCCEEDED``,
   ``SUBMITTED``, ``LAUNCHING``.

Only a run that may have live jobs and is in progress (``refinable``:
``LAUNCHING`` with its process alive, ``SUBMITTED``) is refined by ``status``
with SkyPilot's verified answer for its jobs; a settled or recovery-required
run keeps its journal status however its jobs read (their verified statuses
are shown per wave). ``exit_code`` is the README's one table for these words.

Pure: the caller observes, this decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from npa_infra.errors import ExitCode
from npa_infra.runs.lifecycle import RunStatus

__all__ = ["Holder", "RunFacts", "exit_code", "refinable", "run_status"]


class Holder(StrEnum):
    """Whether the process that holds the run (its submit or resume) is alive."""

    ALIVE = "alive"
    GONE = "gone"  # authoritative: the lock's recorded holder has exited
    UNKNOWN = "unknown"  # unreadable, or recorded on another host


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the journal (and the run's lock) say about one run id."""

    status: str  # the journal's run status (a RunStatus value)
    plan_only: bool = False  # the journal holds the id only as a --plan-only plan
    holder: Holder = Holder.UNKNOWN


_EXIT_CODES: dict[str, int] = {
    RunStatus.FAILED: ExitCode.FAILED,
    RunStatus.CANCELLED: ExitCode.FAILED,
    RunStatus.RECOVERY_REQUIRED: ExitCode.UNPROVEN,  # as submit exits for it (cli.md §1.4)
}


def run_status(facts: RunFacts) -> str:
    """The run's one status (the module docstring's rules, in order)."""
    if facts.plan_only:
        return RunStatus.PLANNED
    if facts.status == RunStatus.LAUNCHING and facts.holder is Holder.GONE:
        return RunStatus.RECOVERY_REQUIRED
    return facts.status


def refinable(facts: RunFacts) -> bool:
    """Whether ``status`` may replace the run's status with its jobs' verified one."""
    return run_status(facts) in (RunStatus.LAUNCHING, RunStatus.SUBMITTED)


def exit_code(status: str) -> int:
    """The exit code of a run status word: 1 failed or cancelled, 2 not proven, else 0."""
    return _EXIT_CODES.get(status, ExitCode.OK)
