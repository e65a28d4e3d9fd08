"""Crash injection: run a submit in a forked child that is SIGKILLed after its N-th journal write.

Every durable write of the journal goes through ``Journal._write`` (its
docstring promises it), so counting calls to it enumerates the journal steps
of a submit. The child really dies with SIGKILL right after step N committed:
no ``finally`` block, lock release or close runs, exactly as if the machine
lost the process there.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npa_infra.journal.store import Journal

KILLED = -signal.SIGKILL


def count_writes(action: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Run ``action`` in-process, recording the label of every journal write."""
    labels: list[str] = []
    original = Journal._write

    def counting(self: Journal, label: str, plan: Any) -> None:
        original(self, label, plan)
        labels.append(label)

    Journal._write = counting  # type: ignore[method-assign]  # the documented test seam
    try:
        return action(), labels
    finally:
        Journal._write = original  # type: ignore[method-assign]


def run_killed_after(step: int, action: Callable[[], Any], report: Path) -> int:
    """Fork; the child runs ``action`` and kills itself right after journal write ``step``.

    Returns the child's wait status as a signed code: ``KILLED`` when the crash
    happened, otherwise the child's exit code (0: the action finished first).
    """
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            original = Journal._write
            done = 0

            def crashing(self: Journal, label: str, plan: Any) -> None:
                nonlocal done
                original(self, label, plan)
                done += 1
                if done == step:
                    os.kill(os.getpid(), signal.SIGKILL)

            Journal._write = crashing  # type: ignore[method-assign]
            result = action()
            report.write_text(json.dumps({"finished": True, "result": str(result)}))
            os._exit(0)
        except BaseException as exc:  # the child must never unwind into pytest
            report.write_text(json.dumps({"finished": False, "error": repr(exc)}))
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)
