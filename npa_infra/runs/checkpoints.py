"""Checkpoint recovery: does a new attempt resume mid-stage, or restart? (runtime-reference.md §3)

"Checkpoint recovery is capability-based": a relaunched task resumes from an
application checkpoint only when its state declares an explicit loader *and*
a validated checkpoint exists; otherwise the wave restarts and the attempt
must not claim checkpoint resume.

The v0.0.1 DSL has no loader field. npa-infra reads two keys of a state's
effective config (``config:``, overlaid by the state's ``params:``), like
``config.decision_uri``: ``checkpoint_uri`` (an S3 key, or a prefix ending in
``/``, where the application writes its checkpoint) and ``checkpoint_loader``
(a label naming the loader its command resumes with). Only a declared loader
makes a declaration: corpus specs already use ``config.checkpoint_uri`` for
model locations nothing resumes from, and their rendering must not change.
The renderer exports a declaration to every attempt (``DECLARED_URI``,
``DECLARED_LOADER``); this module reads it back from the rendered task
documents, so the declaration judged is exactly the one the launched YAML
carries. Keep the location out of the state's declared ``outputs``: a present
output blocks an infrastructure relaunch (§3).

``decide(declaration, found, compatible=...)`` is pure, one ordered chain:

1. no declared loader (or no checkpoint URI) → restart, ``no_loader``; the
   store is never asked;
2. the attempt to launch does not run the same task YAML as the attempt that
   wrote the checkpoint (its loader may differ) → restart, ``loader_incompatible``;
3. the declared URI is malformed → restart, ``checkpoint_uri_invalid``;
4. the checkpoint is present (a key with ContentLength > 0, or a prefix with an
   object of Size > 0: the rule for declared outputs, §2) → **checkpoint**,
   ``checkpoint_validated``;
5. present but empty → restart, ``checkpoint_empty``; absent → restart,
   ``checkpoint_absent``;
6. the store could not tell → no verdict (``mode`` None),
   ``checkpoint_unreadable``: unknown evidence blocks the relaunch (§3), since
   restarting could overwrite a good checkpoint and resuming could load a bad one.

``exports`` gives the variables a relaunched task gets: ``RESUME_MODE``
always, and ``RESUME_CHECKPOINT`` (the validated location) only for a
checkpoint resume. The real attempt number and launch sequence go in the
fence variables (dsl.md §6.1) on every attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DECLARED_LOADER",
    "DECLARED_URI",
    "FENCE_ATTEMPT",
    "FENCE_SEQUENCE",
    "RESUME_CHECKPOINT",
    "RESUME_MODE",
    "Declaration",
    "Found",
    "Reason",
    "ResumeMode",
    "TaskResume",
    "decide",
    "declarations",
    "exports",
]

DECLARED_URI = "NPA_WORKFLOW_CHECKPOINT_URI"
DECLARED_LOADER = "NPA_WORKFLOW_CHECKPOINT_LOADER"
RESUME_MODE = "NPA_WORKFLOW_RESUME_MODE"
RESUME_CHECKPOINT = "NPA_WORKFLOW_RESUME_CHECKPOINT"
FENCE_ATTEMPT = "NPA_WORKFLOW_FENCE_ATTEMPT"
FENCE_SEQUENCE = "NPA_WORKFLOW_FENCE_SEQUENCE"


class ResumeMode(StrEnum):
    CHECKPOINT = "checkpoint"
    RESTART = "restart"


class Found(StrEnum):
    """The store's answer for the checkpoint location (the values of ``ProbeState``)."""

    PRESENT = "present"
    EMPTY = "empty"
    ABSENT = "absent"
    UNAVAILABLE = "unavailable"
    INVALID = "invalid"  # the declared URI does not parse


class Reason(StrEnum):
    NO_LOADER = "no_loader"
    LOADER_INCOMPATIBLE = "loader_incompatible"
    CHECKPOINT_URI_INVALID = "checkpoint_uri_invalid"
    CHECKPOINT_VALIDATED = "checkpoint_validated"
    CHECKPOINT_EMPTY = "checkpoint_empty"
    CHECKPOINT_ABSENT = "checkpoint_absent"
    CHECKPOINT_UNREADABLE = "checkpoint_unreadable"


@dataclass(frozen=True, slots=True)
class Declaration:
    """One task's declared checkpoint location and loader ("" when not declared)."""

    task: str
    uri: str = ""
    loader: str = ""

    @property
    def resumable(self) -> bool:
        return bool(self.uri and self.loader)


@dataclass(frozen=True, slots=True)
class TaskResume:
    """How one task of the new attempt starts; ``mode`` None: the relaunch is blocked."""

    declaration: Declaration
    mode: ResumeMode | None
    reason: Reason

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.declaration.task,
            "resume_mode": self.mode.value if self.mode is not None else None,
            "reason": self.reason.value,
            "loader": self.declaration.loader or None,
            "checkpoint_uri": self.declaration.uri or None,
        }


def declarations(documents: Iterable[Mapping[str, Any]]) -> tuple[Declaration, ...]:
    """Each task document's declaration, read from its rendered ``envs`` (header skipped)."""
    found = []
    for doc in documents:
        if "execution" in doc:  # the job header: {name, execution}
            continue
        envs = doc.get("envs")
        values: Mapping[str, Any] = envs if isinstance(envs, Mapping) else {}
        found.append(
            Declaration(
                task=str(doc.get("name") or ""),
                uri=str(values.get(DECLARED_URI) or "").strip(),
                loader=str(values.get(DECLARED_LOADER) or "").strip(),
            )
        )
    return tuple(found)


def decide(declaration: Declaration, found: Found | None, *, compatible: bool) -> TaskResume:
    """Checkpoint or restart for one task; see the module rules. ``found`` None: not probed."""
    if not declaration.resumable:  # rule 1: no explicit loader, no claim
        return TaskResume(declaration, ResumeMode.RESTART, Reason.NO_LOADER)
    if not compatible:  # rule 2: a loader only loads what its own task YAML wrote
        return TaskResume(declaration, ResumeMode.RESTART, Reason.LOADER_INCOMPATIBLE)
    if found is Found.INVALID:  # rule 3
        return TaskResume(declaration, ResumeMode.RESTART, Reason.CHECKPOINT_URI_INVALID)
    if found is Found.PRESENT:  # rule 4: validated as declared outputs are (§2)
        return TaskResume(declaration, ResumeMode.CHECKPOINT, Reason.CHECKPOINT_VALIDATED)
    if found is Found.EMPTY:  # rule 5
        return TaskResume(declaration, ResumeMode.RESTART, Reason.CHECKPOINT_EMPTY)
    if found is Found.ABSENT:
        return TaskResume(declaration, ResumeMode.RESTART, Reason.CHECKPOINT_ABSENT)
    return TaskResume(declaration, None, Reason.CHECKPOINT_UNREADABLE)  # rule 6: unknown blocks


def exports(resume: TaskResume) -> dict[str, str]:
    """The variables the relaunched task gets; none for a blocked one."""
    if resume.mode is None:
        return {}
    if resume.mode is ResumeMode.CHECKPOINT:
        return {RESUME_MODE: resume.mode.value, RESUME_CHECKPOINT: resume.declaration.uri}
    return {RESUME_MODE: resume.mode.value}
