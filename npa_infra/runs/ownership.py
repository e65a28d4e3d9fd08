"""Whether the one job an exact-name lookup found is this launch's own (issue 24).

A name is not proof of ownership: a job of another run, of an older npa or of
another client can carry it. Every task npa launches carries its attempt's
logical launch id in the task's ``_metadata`` (``STAMP_KEY``), which SkyPilot
keeps per task and ``sky jobs queue -v`` shows as ``metadata``. ``judge``
reads those stamps, one per queue row (task) of the found job:

1. every row carries this launch's id: ``ours``, the job may be adopted;
2. any row carries another id: ``foreign``, proven another launch's job;
3. otherwise (a row without a stamp, or no row): ``unproven``.

Only ``ours`` may be adopted. The other two fail closed: the transaction
neither takes the job's id nor launches beside it (a second job of the same
name would make every later lookup ambiguous).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["STAMP_KEY", "Ownership", "Verdict", "judge", "remedy", "stamp"]

STAMP_KEY = "npa_launch_id"


class Ownership(StrEnum):
    OURS = "ours"
    FOREIGN = "foreign"
    UNPROVEN = "unproven"


@dataclass(frozen=True, slots=True)
class Verdict:
    ownership: Ownership
    reason: str = ""


def stamp(launch_id: str) -> dict[str, str]:
    """The ``_metadata`` entries every task of the launch carries."""
    return {STAMP_KEY: launch_id}


def judge(launch_id: str, stamps: Sequence[str | None]) -> Verdict:
    """This launch's ownership of a job whose rows carry ``stamps`` (None: no stamp)."""
    others = sorted({s for s in stamps if s is not None and s != launch_id})
    if others:
        return Verdict(
            Ownership.FOREIGN, f"its tasks carry launch identity {', '.join(others)}, not this one"
        )
    if stamps and all(s == launch_id for s in stamps):
        return Verdict(Ownership.OURS)
    return Verdict(Ownership.UNPROVEN, "it carries no npa launch identity")


def remedy(job_name: str, job_id: int | None, reason: str) -> str:
    """What the operator does about a job that holds this launch's name but is not its own."""
    job = f"job {job_id}" if job_id is not None else "a job"
    return (
        f"{job} named {job_name} is not this launch's ({reason}); npa neither adopts it nor "
        "launches beside it. Inspect it with `sky jobs queue -v`, then submit under another "
        "run id"
    )
