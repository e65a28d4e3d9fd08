"""May a launch child of an earlier npa process still act? (faults.md, process death)

A ``sky jobs launch`` child is started gated: it cannot reach the API server
before its identity (pid, start time, boot, host) is durable in the launch
record. A resume therefore knows every child that could still create a job.
This module decides, from what is observed of that child now, whether the
resume may go on (the child is gone, or none was ever released), must wait
for it to exit (it is alive on this host), or must fail closed (it may act
and cannot be watched from here, or it outlived the wait).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["ChildAction", "ChildDecision", "ChildIdentity", "ChildState", "decide"]


@dataclass(frozen=True, slots=True)
class ChildIdentity:
    """Who a launch child is, exactly enough to tell it from a reused pid."""

    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22; 0 where the platform has none
    boot_id: str  # the kernel's boot id: a reboot ends every child
    host: str

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "boot_id": self.boot_id,
            "host": self.host,
        }

    @classmethod
    def from_json(cls, raw: Any) -> ChildIdentity | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("pid"), int):
            return None
        return cls(
            pid=int(raw["pid"]),
            start_ticks=int(raw.get("start_ticks") or 0),
            boot_id=str(raw.get("boot_id") or ""),
            host=str(raw.get("host") or ""),
        )


class ChildState(StrEnum):
    NOT_RECORDED = "not_recorded"  # no child was released (the gate held, or none started)
    GONE = "gone"  # authoritatively: no such process, another start time, another boot
    ALIVE = "alive"  # the very process is running on this host
    UNKNOWN = "unknown"  # another host, or the process table cannot be read


class ChildAction(StrEnum):
    PROCEED = "proceed"
    WAIT = "wait"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class ChildDecision:
    action: ChildAction
    reason: str


def decide(state: ChildState, *, waited: float, limit: float) -> ChildDecision:
    """What a resume does about the recorded launch child; see the module docstring."""
    if state is ChildState.NOT_RECORDED:  # the gate: an unrecorded child never acted
        return ChildDecision(ChildAction.PROCEED, "no launch child was released")
    if state is ChildState.GONE:
        return ChildDecision(ChildAction.PROCEED, "the launch child has exited")
    if state is ChildState.UNKNOWN:  # faults.md invariant 4: unknown is not absent
        return ChildDecision(
            ChildAction.BLOCK, "the launch child cannot be observed from here and may still act"
        )
    if waited < limit:
        return ChildDecision(ChildAction.WAIT, "the launch child of the earlier submit still runs")
    return ChildDecision(
        ChildAction.BLOCK, f"the launch child still runs after {limit:.0f} s and may still act"
    )
