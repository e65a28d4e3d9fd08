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

from typing import TYPE_CHECKING

from npa_infra import _lazy_resolver

if TYPE_CHECKING:
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

# Names resolve lazily (PEP 562): importing one submodule (``submit --plan-only`` needs
# only the store and its rows) does not load the run lock and its socket import (issue 19).
_HOMES = {
    "fingerprint": "npa_infra.journal.guard",
    "RunLock": "npa_infra.journal.lock",
    "lock_path": "npa_infra.journal.lock",
    "AttemptRow": "npa_infra.journal.records",
    "EventRow": "npa_infra.journal.records",
    "RunMode": "npa_infra.journal.records",
    "RunRow": "npa_infra.journal.records",
    "TransactionRow": "npa_infra.journal.records",
    "WaveRow": "npa_infra.journal.records",
    "Journal": "npa_infra.journal.store",
    "journal_path": "npa_infra.journal.store",
}

__getattr__ = _lazy_resolver(__name__, _HOMES)
