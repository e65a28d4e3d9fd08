"""Scripted faults and ``/readyz`` answers (kubernetes.md §1.2, §10.4).

A fault rule matches ``method`` (or ``*``) and a regular expression searched
in the path (plus ``?query`` when there is one); it skips the first ``nth - 1`` matching calls, then acts on
the next ``times`` ones: answer a Status with ``status`` (429 carries
``Retry-After``), reset the connection, or delay and then answer normally.

The ``/readyz`` script is a queue of answers consumed one per request:
``200`` (or ``"ok"``), any other status, ``"drop"`` (connection reset),
``("delay", seconds)`` or ``("delay", seconds, status)``, or a
``ReadyzAnswer``. With ``repeat=True`` the queue cycles (flapping); once an
unrepeated queue is empty every answer is 200 ``ok``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.support.fakekube.errors import FakeKubeError

__all__ = ["Fault", "Faults", "ReadyzAnswer", "ReadyzScript", "RequestRecord"]


@dataclass(slots=True)
class Fault:
    method: str
    pattern: re.Pattern[str]
    action: str  # "status" | "reset" | "delay"
    status: int = 500
    delay: float = 0.0
    skip: int = 0
    times: int = 1
    message: str | None = None
    retry_after: int | None = None


@dataclass(slots=True)
class RequestRecord:
    """One request the server received (the bearer token is never kept, only its user)."""

    method: str
    path: str
    query: str
    user: str
    time: float
    status: int | None = None
    outcome: str = ""  # "", "fault", "reset"


class Faults:
    """Thread-safe fault rules, consumed in insertion order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []

    def add(self, fault: Fault) -> None:
        if fault.times < 1 or fault.skip < 0:
            raise FakeKubeError("a fault needs times >= 1 and nth >= 1")
        with self._lock:
            self._rules.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, method: str, target: str) -> Fault | None:
        with self._lock:
            for rule in self._rules:
                if (
                    rule.times <= 0
                    or rule.method not in ("*", method)
                    or not rule.pattern.search(target)
                ):
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                rule.times -= 1
                return rule
        return None


@dataclass(frozen=True, slots=True)
class ReadyzAnswer:
    """One scripted ``/readyz`` answer."""

    status: int = 200
    delay: float = 0.0
    drop: bool = False
    # ("hold", reached, release): the request sets ``reached``, then waits (at most
    # HOLD_LIMIT s) for the test to set ``release``, then answers ``status`` 200
    reached: threading.Event | None = None
    release: threading.Event | None = None


def _answer(item: object) -> ReadyzAnswer:
    if isinstance(item, ReadyzAnswer):
        return item
    if isinstance(item, bool):
        raise FakeKubeError(f"unknown readyz answer {item!r}")
    if isinstance(item, int):
        return ReadyzAnswer(status=item)
    if item == "ok":
        return ReadyzAnswer()
    if item in ("drop", "reset"):
        return ReadyzAnswer(drop=True)
    if isinstance(item, tuple) and len(item) == 3 and item[0] == "hold":
        reached, release = item[1], item[2]
        if not isinstance(reached, threading.Event) or not isinstance(release, threading.Event):
            raise FakeKubeError(f"unknown readyz answer {item!r}")
        return ReadyzAnswer(reached=reached, release=release)
    if isinstance(item, tuple) and len(item) in (2, 3) and item[0] == "delay":
        status = item[2] if len(item) == 3 else 200
        return ReadyzAnswer(status=int(status), delay=float(item[1]))
    raise FakeKubeError(f"unknown readyz answer {item!r}")


@dataclass
class ReadyzScript:
    """The queue of scripted answers, plus the time of every ``/readyz`` request."""

    answers: deque[ReadyzAnswer] = field(default_factory=deque)
    repeat: bool = False
    calls: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def load(self, items: Iterable[object], *, repeat: bool) -> None:
        parsed = [_answer(item) for item in items]
        with self.lock:
            self.answers = deque(parsed)
            self.repeat = repeat

    def next(self) -> ReadyzAnswer:
        with self.lock:
            self.calls.append(time.monotonic())
            if not self.answers:
                return ReadyzAnswer()
            answer = self.answers.popleft()
            if self.repeat:
                self.answers.append(answer)
            return answer
