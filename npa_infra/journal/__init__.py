"""The durable run journal and the per-run lock.

This package decides what survives a crash and who may touch a run: the
SQLite journal under the npa home (store.py, with its schema in schema.py,
its file handling in database.py, its rows in records.py and its secret
guard in guard.py) and the run lock (lock.py). Together they make "no
duplicate job and no lost run, whatever fails and whenever the process
dies" checkable: intent is committed before every effect, and two commands
never work on one run at once.

It sits below ``workflow`` (which drives runs) and above ``skypilot`` in the
import-linter layers; it talks only to the local file system and SQLite.
"""

from __future__ import annotations

from npa_infra.journal.guard import fingerprint
from npa_infra.journal.lock import RunLock, lock_path
from npa_infra.journal.records import (
    AttemptRow,
    EventRow,
    RunMode,
    RunRow,
    TransactionRow,
    WaveRow,
)
from npa_infra.journal.store import Journal, journal_path

__all__ = [
    "AttemptRow",
    "EventRow",
    "Journal",
    "RunLock",
    "RunMode",
    "RunRow",
    "TransactionRow",
    "WaveRow",
    "fingerprint",
    "journal_path",
    "lock_path",
]
