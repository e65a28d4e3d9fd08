"""The task YAML one launch request sends, and where it is written (runtime-reference.md §1).

Each attempt's file is the planned job with that attempt's own variables:
the real fence numbers (dsl.md §6.1: "npa-infra adds the real launch sequence
and attempt number"), rewritten before every POST once the intent carrying
the sequence is durable, and the attempt's resume variables
(``runs.checkpoints``), journaled with the attempt so re-entering it sends
the same ones. Every task also carries the attempt's logical launch id in its
``_metadata`` (``runs.ownership``), which ``sky jobs queue -v`` shows, so a
lookup by name can tell this launch's job from another's (issue 24). The
wave's identity (its planned YAML digest) never depends on any of these.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npa_infra.journal.records import AttemptRow
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.isolation import IsolatedDir

__all__ = ["attempt_text", "journaled_exports", "write"]


def write(isolated: IsolatedDir, run_id: str, job_name: str, text: str) -> Path:
    """``D/submissions/<run>/<job>.yaml``, 0600; deterministic, so identity is stable.

    The run's directory carries npa's marker (``localstate.marker``): the proof
    ``npa cleanup --yes`` needs before it removes it (issue 24).
    """
    from npa_infra.localstate import marker

    directory = isolated.root / "submissions" / run_id
    marker.make_dir(directory, "task_yaml")
    path = directory / f"{job_name}.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path


def attempt_text(
    job: RenderedJob,
    attempt: int,
    sequence: int,
    exports: Mapping[str, Mapping[str, str]],
    launch_id: str,
) -> str:
    """The YAML one POST sends: the planned job with the fence numbers and ``exports``
    (per task name) set in its tasks' ``envs``, and ``launch_id`` stamped in their
    ``_metadata``; see the module docstring."""
    from npa_infra.render import documents
    from npa_infra.runs import checkpoints, ownership

    fence = {
        checkpoints.FENCE_ATTEMPT: str(attempt),
        checkpoints.FENCE_SEQUENCE: str(max(sequence, 1)),
    }
    docs: list[dict[str, Any]] = []
    for doc in job.documents:
        if "execution" in doc:  # the job header (render.documents.with_envs)
            docs.append(doc)
            continue
        envs = {**(doc.get("envs") or {}), **fence, **exports.get(str(doc.get("name")), {})}
        kept = doc.get("_metadata")
        metadata = {**(kept if isinstance(kept, dict) else {}), **ownership.stamp(launch_id)}
        docs.append({**doc, "envs": envs, "_metadata": metadata})
    return documents.dump_documents(tuple(docs))


def journaled_exports(attempt: AttemptRow | None) -> dict[str, dict[str, str]]:
    """The resume variables an existing attempt was created with (none for attempt 1)."""
    raw = (attempt.data if attempt is not None else {}).get("exports")
    if not isinstance(raw, dict):
        return {}
    return {
        str(task): {str(k): str(v) for k, v in values.items()}
        for task, values in raw.items()
        if isinstance(values, dict)
    }
