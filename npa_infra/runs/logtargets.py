"""``workflow logs``: which attempts' jobs to read, and what a ``sky jobs logs`` answer proves.

Logs are read by exact provider job id only (cli.md §1.7): a name can match
another user's job, or a job of an earlier attempt, so an attempt whose id was
never adopted is reported as such and never looked up by name. ``select``
picks the attempts from the journal's view of the run, as one ordered chain:

1. the run has no attempt at all: **nothing launched** (a plan-only run, or a
   run rolled back before its first attempt);
2. ``--wave N`` that the run does not have: **no such wave**;
3. ``--attempt N`` that no selected wave has: **no such attempt**;
4. otherwise **selected**: ``--attempt N`` of each selected wave that has it,
   else the latest attempt of each selected wave (every wave without
   ``--wave``), by wave then attempt.

``read_state`` classifies one answer (skypilot-0.12.md, the 0.12.2
``jobs logs`` command): with ``--no-follow`` the command exits 0 once it has
printed the log so far; with ``--follow`` it exits with the job's
``JobExitCode`` (0 succeeded, 100 failed, 101 not finished, 103 cancelled,
each a log that was read) and 102 when the job was not found. Anything else
(a ClusterNotUpError, a transport failure) read nothing provable.

Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "FOLLOW_READ_CODES",
    "NO_JOB_ID",
    "AttemptRef",
    "LogSelection",
    "ReadState",
    "Verdict",
    "read_state",
    "select",
]

# sky.exceptions.JobExitCode of 0.12.2: SUCCEEDED, FAILED, NOT_FINISHED, CANCELLED
FOLLOW_READ_CODES = frozenset({0, 100, 101, 103})
NO_JOB_ID = "no job id: never launched or not reconciled"


class Verdict(StrEnum):
    SELECTED = "selected"
    NOTHING_LAUNCHED = "nothing_launched"
    NO_SUCH_WAVE = "no_such_wave"
    NO_SUCH_ATTEMPT = "no_such_attempt"


class ReadState(StrEnum):
    READ = "read"
    NO_JOB_ID = "no_job_id"  # never asked: the attempt has no adopted id
    UNREADABLE = "unreadable"  # asked, and the answer proves nothing


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """One journaled attempt, as the selection needs it; ``job_id`` None: never adopted."""

    wave: int
    attempt: int
    job_name: str
    job_id: int | None = None


@dataclass(frozen=True, slots=True)
class LogSelection:
    verdict: Verdict
    targets: tuple[AttemptRef, ...] = ()
    detail: str = ""

    @property
    def selected(self) -> bool:
        return self.verdict is Verdict.SELECTED


def select(
    attempts: Sequence[AttemptRef], *, wave: int | None = None, attempt: int | None = None
) -> LogSelection:
    """The attempts whose logs to read (the module docstring's chain)."""
    if not attempts:
        # rule 1: no attempt was ever journaled, so no job can have a log
        return LogSelection(Verdict.NOTHING_LAUNCHED, detail="the run has no launched attempt")
    waves = sorted({a.wave for a in attempts})
    if wave is not None and wave not in waves:
        # rule 2: a wave the run does not have
        known = ", ".join(map(str, waves))
        return LogSelection(Verdict.NO_SUCH_WAVE, detail=f"no wave {wave} (waves: {known})")
    chosen = [w for w in waves if wave is None or w == wave]
    by_wave = {
        w: sorted((a for a in attempts if a.wave == w), key=lambda a: a.attempt) for w in chosen
    }
    if attempt is not None:
        picked = [a for w in chosen for a in by_wave[w] if a.attempt == attempt]
        if not picked:
            # rule 3: no selected wave has that attempt
            where = f"wave {wave}" if wave is not None else "any wave"
            return LogSelection(Verdict.NO_SUCH_ATTEMPT, detail=f"no attempt {attempt} of {where}")
        return LogSelection(Verdict.SELECTED, tuple(picked))
    # rule 4: the latest attempt of each selected wave
    return LogSelection(Verdict.SELECTED, tuple(by_wave[w][-1] for w in chosen))


def read_state(exit_code: int | None, *, follow: bool, timed_out: bool = False) -> ReadState:
    """What one ``sky jobs logs <id>`` answer proves (the module docstring)."""
    if exit_code is None or timed_out:
        return ReadState.UNREADABLE
    if follow:
        return ReadState.READ if exit_code in FOLLOW_READ_CODES else ReadState.UNREADABLE
    return ReadState.READ if exit_code == 0 else ReadState.UNREADABLE
