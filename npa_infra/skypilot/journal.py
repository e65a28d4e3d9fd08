"""The bootstrap journal ``.<venv>.bootstrap-journal.json`` (``npa.skypilot.bootstrap.v1``).

One JSON document per bootstrap run, rewritten atomically after every
change: each step is recorded as ``started`` before it runs and completed
with its exit code and output tail afterwards, so an interrupted bootstrap
shows exactly where it stopped. Keys: ``schema status venv version_dir
pin_hash pins python started_at finished_at steps gate error``. No
environment values are recorded.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra.errors import NpaError
from npa_infra.skypilot import pins
from npa_infra.skypilot.models import CommandResult

if TYPE_CHECKING:
    from npa_infra.skypilot.status import GateResult

__all__ = ["SCHEMA", "Journal"]

SCHEMA = "npa.skypilot.bootstrap.v1"
_TAIL = 2000


class Journal:
    """Writes the journal file; every method persists before returning."""

    def __init__(
        self,
        path: Path,
        clock: Callable[[], float],
        *,
        venv: Path,
        pin_hash: str,
        python: str,
    ) -> None:
        self.path = path
        self._clock = clock
        self._data: dict[str, Any] = {
            "schema": SCHEMA,
            "status": "running",
            "venv": str(venv),
            "version_dir": None,
            "pin_hash": pin_hash,
            "pins": pins.requirements(),
            "python": python,
            "started_at": self.now(),
            "finished_at": None,
            "steps": [],
            "gate": None,
            "error": None,
        }
        self._write()

    @property
    def data(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._data))  # type: ignore[no-any-return]  # a deep copy

    def now(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="seconds")

    def set_version_dir(self, version_dir: Path) -> None:
        self._data["version_dir"] = str(version_dir)
        self._write()

    def begin(self, name: str, argv: list[str]) -> None:
        """Record the intent to run ``name`` before running it."""
        self._data["steps"].append(
            {"name": name, "argv": list(argv), "state": "started", "started_at": self.now()}
        )
        self._write()

    def _current(self, name: str) -> dict[str, Any]:
        for step in reversed(self._data["steps"]):
            if step["name"] == name and step["state"] == "started":
                return step  # type: ignore[no-any-return]  # steps hold plain dicts
        step = {"name": name, "state": "started", "started_at": self.now()}
        self._data["steps"].append(step)
        return step

    def end(self, name: str, result: CommandResult) -> None:
        step = self._current(name)
        failed = result.returncode != 0 or result.timed_out
        step.update(
            state="failed" if failed else "ok",
            returncode=result.returncode,
            timed_out=result.timed_out,
            stdout_tail=result.stdout[-_TAIL:],
            stderr_tail=result.stderr[-_TAIL:],
            finished_at=self.now(),
        )
        self._write()

    def annotate(self, name: str, **facts: Any) -> None:
        """Add facts to the latest step called ``name`` (a verdict read from its output)."""
        for step in reversed(self._data["steps"]):
            if step["name"] == name:
                step.update(facts)
                break
        self._write()

    def end_effect(self, name: str, **facts: Any) -> None:
        self._current(name).update(state="ok", finished_at=self.now(), **facts)
        self._write()

    def skip(self, name: str, reason: str) -> None:
        self._data["steps"].append(
            {"name": name, "state": "skipped", "reason": reason, "started_at": self.now()}
        )
        self._write()

    def record_gate(self, gate: GateResult) -> None:
        self._data["gate"] = {
            "ok": gate.ok,
            "bin_path": str(gate.bin_path),
            "sky_version": gate.skypilot_version,
            "versions": dict(gate.versions),
            "findings": gate.messages(),
        }
        self._write()

    def fail(self, exc: BaseException) -> None:
        error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:1000]}
        if isinstance(exc, NpaError):
            error.update(message=exc.message, remedy=exc.remedy)
        self._data.update(status="failed", error=error, finished_at=self.now())
        self._write()

    def finish(self, status: str) -> None:
        self._data.update(status=status, finished_at=self.now())
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self._data, handle, indent=2, sort_keys=True)
                handle.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
