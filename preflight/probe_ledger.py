"""The durable record of pull-probe pods: intent before create, UID after, gone after cleanup.

A probe pod is an external mutation (faults.md invariant 5). npa cleans up
every pod it creates, also on Ctrl-C, but a SIGKILL between the create and the
verified delete would leave a labelled pod that nothing remembers. So each pod
is recorded under ``$NPA_HOME/probes/<context hash>/<namespace>.<name>.json``
(0600 in 0700 directories) before the create request is sent, gains its UID
once the API server answers, and loses its record only when its deletion is
verified. The next probe run on that context first carries every leftover
record through (``recover``): a pod found under that name with the recorded UID,
or with the probe label when the UID never came back, is deleted with its UID
as precondition and confirmed gone. One file per pod keeps concurrent probe runs
from rewriting each other's records.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from npa_infra.journal import files

__all__ = ["LEDGER_DIR", "PendingProbe", "ProbeLedger"]

LEDGER_DIR = "probes"


@dataclass(frozen=True, slots=True)
class PendingProbe:
    namespace: str
    name: str
    uid: str | None  # None: the create was sent, its answer never recorded


class ProbeLedger:
    """The probe pods of one context that may exist; constructing it does no I/O."""

    def __init__(self, home: Path, context: str) -> None:
        digest = hashlib.sha256(context.encode("utf-8")).hexdigest()[:16]
        self.directory = home / LEDGER_DIR / digest
        self.context = context

    def __repr__(self) -> str:
        return f"ProbeLedger({str(self.directory)!r})"

    def _path(self, namespace: str, name: str) -> Path:
        return self.directory / f"{namespace}.{name}.json"

    def intend(self, namespace: str, name: str) -> None:
        """Durable before the create request is sent."""
        self._write(namespace, name, None)

    def created(self, namespace: str, name: str, uid: str) -> None:
        self._write(namespace, name, uid)

    def removed(self, namespace: str, name: str) -> None:
        """The pod is verified gone (or was never ours): forget it."""
        with contextlib.suppress(FileNotFoundError):
            self._path(namespace, name).unlink()

    def pending(self) -> list[PendingProbe]:
        """Every recorded pod, oldest name first; unreadable records are skipped."""
        found: list[PendingProbe] = []
        try:
            entries = sorted(self.directory.glob("*.json"))
        except OSError:
            return found
        for entry in entries:
            try:
                raw = json.loads(entry.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(raw, dict) and raw.get("name") and raw.get("namespace"):
                uid = raw.get("uid")
                found.append(
                    PendingProbe(str(raw["namespace"]), str(raw["name"]), str(uid) if uid else None)
                )
        return found

    def _write(self, namespace: str, name: str, uid: str | None) -> None:
        old = os.umask(0o077)
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        finally:
            os.umask(old)
        body = json.dumps(
            {"context": self.context, "namespace": namespace, "name": name, "uid": uid},
            sort_keys=True,
        ).encode("utf-8")
        files.replace_private(self._path(namespace, name), body)
