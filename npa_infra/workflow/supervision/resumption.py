"""How a new attempt of a wave starts: from its application checkpoint, or over (issue 9).

The decision is ``runs.checkpoints``'s. This module gathers its evidence once
the attempt being replaced is terminal (a payload failure, or a cancellation
verified by exact id): whether the new attempt runs the same planned task
YAML as the attempt that wrote the checkpoint, and one probe of each
declared checkpoint location. It journals one ``wave_resume`` event per task
*before* the launch (intent before effect; the event says ``resume_mode``
``checkpoint`` or ``restart``, why, and the evidence), and returns the
variables each task of the new attempt is launched with. A store that cannot
answer blocks the relaunch instead of guessing either way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npa_infra.runs import checkpoints

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.render.documents import RenderedJob
    from npa_infra.storage.base import ObjectStore

__all__ = ["EVENT", "Resumption", "prepare"]

EVENT = "wave_resume"


@dataclass(frozen=True, slots=True)
class Resumption:
    """Each task's verdict, and the variables per task name (empty when blocked)."""

    resumes: tuple[checkpoints.TaskResume, ...]
    exports: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def blocked(self) -> checkpoints.TaskResume | None:
        """The first task whose checkpoint could not be judged: no relaunch."""
        return next((r for r in self.resumes if r.mode is None), None)


def prepare(
    *,
    journal: Journal,
    run_id: str,
    wave_index: int,
    job: RenderedJob,
    store: Callable[[], ObjectStore],
    now: Callable[[], float],
) -> Resumption:
    """Decide and journal how each task of the wave's next attempt starts."""
    previous = journal.latest_attempt(run_id, wave_index)
    written_by = str((previous.data if previous else {}).get("yaml_sha256") or "")
    compatible = written_by == hashlib.sha256(job.text.encode()).hexdigest()
    judged: list[tuple[checkpoints.TaskResume, dict[str, Any]]] = []
    for declaration in checkpoints.declarations(job.documents):
        found: checkpoints.Found | None = None
        evidence: dict[str, Any] = {}
        if declaration.resumable and compatible:
            found, evidence = _probe(store, declaration.uri)
        judged.append((checkpoints.decide(declaration, found, compatible=compatible), evidence))
    resumption = Resumption(tuple(r for r, _ in judged))
    if resumption.blocked is None:
        resumption.exports.update(
            {r.declaration.task: checkpoints.exports(r) for r in resumption.resumes}
        )
    at = now()
    for resume, evidence in judged:
        journal.append_event(
            run_id,
            EVENT,
            {
                "wave": wave_index,
                "attempt": (previous.attempt if previous else 0) + 1,
                "previous_attempt": previous.attempt if previous else None,
                **resume.to_json(),
                "evidence": evidence,
                "relaunch_blocked": resumption.blocked is not None,
            },
            now=at,
        )
    return resumption


def _probe(store: Callable[[], ObjectStore], uri: str) -> tuple[checkpoints.Found, dict[str, Any]]:
    """One probe of the checkpoint location, as declared outputs are probed (§2)."""
    from npa_infra.errors import StorageError
    from npa_infra.storage.models import StorageErrorKind
    from npa_infra.workflow.execution import recovery

    try:
        [(_, probe)] = recovery.probe_outputs(store, [uri])
    except ValueError as exc:
        return checkpoints.Found.INVALID, {"state": "invalid", "detail": str(exc)}
    except StorageError as exc:
        invalid = exc.details.get("kind") == StorageErrorKind.INVALID_URI.value
        found = checkpoints.Found.INVALID if invalid else checkpoints.Found.UNAVAILABLE
        return found, {"state": found.value, "detail": exc.message}
    return checkpoints.Found(probe.state.value), {
        "state": probe.state.value,
        "size": probe.size,
        "detail": probe.detail,
    }
