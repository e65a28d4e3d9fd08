"""Is the readiness window proven, and when is the next ``/readyz`` sample due?

The readiness rule of kubernetes.md §1.2 (3 consecutive successes spanning
at least 10 s, measured between answers) does not care when the samples
were taken, only that they were consecutive and that the last one is
immediately before the launch. So the samples can be collected while the
previous wave is still running (``workflow.execution.readykeeper``), and a
launch that follows another one needs a single fresh sample.

``decide`` is pure: it judges the answers taken so far (each stamped with
the clock time its answer arrived) at ``now``, in one ordered chain:

- no answer yet: sample now;
- the latest answer failed (anything but ``ok``): the streak is broken; the
  next sample is due one interval after that answer;
- the streak is the trailing run of successes; two answers further apart
  than one interval plus one sample timeout break it (the API went
  unobserved for longer than a sample can take), and so does any failure;
- fewer than 3 successes, or a span under 10 s: the next sample is due one
  interval after the latest answer, and never before the first answer plus
  the window (so the third answer of a streak spans the window: answers at
  0.18, 5.00 and 10.00 s would span 9.82 s and need a fourth);
- the latest success older than one interval is stale: sample now;
- otherwise the window is proven; the next sample keeps it alive.

Never "proven" on less: a failed sample resets the window, a sample older
than one interval is stale, and an answer stamped after ``now`` is a clock
bug (``InvariantError``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.errors import InvariantError

__all__ = ["Answer", "Reason", "WindowDecision", "decide", "proving_tail", "streak"]


class Reason(StrEnum):
    """Why the window is, or is not yet, proven."""

    PROVEN = "proven"
    NO_SAMPLES = "no_samples"
    LAST_FAILED = "last_failed"
    TOO_FEW = "too_few"
    TOO_SHORT = "too_short"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class Answer:
    """One ``/readyz`` sample as the window sees it: when its answer arrived, and whether ok."""

    at: float
    ok: bool


@dataclass(frozen=True, slots=True)
class WindowDecision:
    """Whether the window is proven at ``now``, why, and when the next sample should start."""

    proven: bool
    reason: Reason
    due: float
    streak: int


def streak(answers: Sequence[Answer], *, max_gap: float) -> tuple[Answer, ...]:
    """The trailing run of consecutive successes, broken by a failure or by a gap over ``max_gap``."""
    run: list[Answer] = []
    for answer in reversed(answers):
        if not answer.ok:
            break
        if run and run[-1].at - answer.at > max_gap:
            break
        run.append(answer)
    return tuple(reversed(run))


def decide(
    answers: Sequence[Answer],
    *,
    now: float,
    successes: int = 3,
    window: float = 10.0,
    interval: float = 5.0,
    sample_timeout: float = 10.0,
) -> WindowDecision:
    """Judge ``answers`` (oldest first) at ``now`` (kubernetes.md §1.2; see the module docstring).

    Raises:
        InvariantError: the answers are not in time order, or one is stamped after ``now``.
    """
    if any(b.at < a.at for a, b in itertools.pairwise(answers)):
        raise InvariantError("readiness answers are not in time order")
    if answers and answers[-1].at > now:
        raise InvariantError("a readiness answer is stamped after now: check the injected clock")
    # kubernetes.md §1.2: nothing observed yet, so sample at once.
    if not answers:
        return WindowDecision(False, Reason.NO_SAMPLES, now, 0)
    last = answers[-1]
    # kubernetes.md §1.2: a failed sample resets the streak; sample again one interval later.
    if not last.ok:
        return WindowDecision(False, Reason.LAST_FAILED, last.at + interval, 0)
    run = streak(answers, max_gap=interval + sample_timeout)
    first = run[0].at
    paced = max(last.at + interval, first + window)  # the closing answer spans the window
    # kubernetes.md §1.2: 3 consecutive successes ...
    if len(run) < successes:
        due = paced if len(run) == successes - 1 else last.at + interval
        return WindowDecision(False, Reason.TOO_FEW, due, len(run))
    # ... spanning at least 10 s, measured between answers.
    if last.at - first < window:
        return WindowDecision(False, Reason.TOO_SHORT, paced, len(run))
    # the last success is immediately before the launch: within one interval of now.
    if now - last.at > interval:
        return WindowDecision(False, Reason.STALE, now, len(run))
    return WindowDecision(True, Reason.PROVEN, last.at + interval, len(run))


def proving_tail(ats: Sequence[float], *, successes: int = 3, window: float = 10.0) -> int:
    """How many of a proven streak's latest answers (``ats``, oldest first) prove the window.

    The fewest trailing answers, at least ``successes``, spanning at least ``window``: the
    evidence a launch records, so a streak kept across many waves does not grow every
    record (issue 19). All of them when no shorter tail proves it.
    """
    if not ats:
        return 0
    last = ats[-1]
    for count in range(successes, len(ats) + 1):
        if last - ats[-count] >= window:
            return count
    return len(ats)
