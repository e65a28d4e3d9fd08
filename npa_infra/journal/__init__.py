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

Callers import the module they need (``npa_infra.journal.store``, ``.lock``, ...);
the package itself imports nothing, so ``submit --plan-only``, which needs only the
store and its rows, never loads the run lock and its socket import (issue 19).
"""
