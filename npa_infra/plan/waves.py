"""Group a flat plan into waves (dsl.md §5.3 ``--waves``), and name their SkyPilot jobs.

A parallel wave is a run of consecutive steps sharing a non-empty ``group``;
a repeated member starts a new wave. Every other step is its own serial wave.

Job names (cli.md §0 "Logical SkyPilot job names") are one-to-one over the
launch identity within a mode: one-shot ``(run id, attempt)``, runtime
``(run id, wave index, wave name, batch, attempt)``. The documented name is
kept exactly when it already identifies its launch: the run id (or
``<run>-<WW>-<wave>[-bN]``) unchanged by sanitising, a valid SkyPilot name
(a letter first, a letter or digit last), at most 60 characters, not ending
like an attempt suffix or a hash, and, in runtime mode, read back by
``_parse_runtime`` as exactly its own run, wave and batch. Any other
identity is shown sanitised and cut, followed by ``-`` and 10 hex of the
sha256 of the exact identity, so two runs whose ids differ only in what
sanitising or the cut drops never share a job (issue 24). ``attempt_name``
appends ``-aN`` the same way. Distinct one-shot and runtime identities may
still share a plain name (a one-shot id shaped like ``<run>-<WW>-<wave>``):
the launch identity stamped on every task (``workflow.execution.taskfiles``)
keeps adoption from taking such a job.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

from npa_infra.plan.model import Plan, PlanStep, Wave

__all__ = ["LIMIT", "attempt_name", "compute", "job_name"]

LIMIT = 60  # SkyPilot job names npa uses: at most this many characters
_HASH = 10  # hex digits of the identity's sha256 in a hashed name
_ROOM = 4  # a hashed name leaves room for ``-aNN``, so retries keep its hash visible
# SkyPilot's CLUSTER_NAME_VALID_REGEX (skylet/constants.py), lowercase only
_SKY_NAME = re.compile(r"[a-z](?:[-_a-z0-9]*[a-z0-9])?")
_ATTEMPT = re.compile(r"-a(?:[2-9]|[1-9][0-9]+)$")
_HASHED = re.compile(r"-[0-9a-f]{10}$")
_BATCH = re.compile(r"-b([1-9][0-9]*)$")
_WAVE_FIELD = re.compile(r"(?=-([0-9]{2,})-)")


def compute(plan: Plan, *, max_concurrency_cap: int = 0) -> list[Wave]:
    """Waves in order; ``max_concurrency_cap`` > 0 caps every group's concurrency."""
    runs: list[list[PlanStep]] = []
    for step in plan.steps:
        last = runs[-1] if runs else None
        if (
            step.group
            and last is not None
            and last[0].group == step.group
            and all(s.state != step.state for s in last)
        ):
            last.append(step)
        else:
            runs.append([step])
    waves = []
    for index, members in enumerate(runs):
        first = members[0]
        if first.group:
            declared = plan.group_concurrency.get(first.group, len(members))
            effective = min(declared, max_concurrency_cap) if max_concurrency_cap > 0 else declared
            effective = max(1, effective)
            waves.append(
                Wave(
                    index,
                    "parallel",
                    first.group,
                    first.group,
                    declared,
                    math.ceil(len(members) / effective),
                    tuple(members),
                )
            )
        else:
            waves.append(Wave(index, "serial", "", first.task_name, 1, 1, tuple(members)))
    return waves


def job_name(
    run_id: str, wave: Wave | None = None, attempt: int = 1, *, batch: int | None = None
) -> str:
    """The logical SkyPilot job name (cli.md §0): one-to-one, ≤ 60 chars, ``-aN`` kept.

    ``wave`` None is one-shot mode; ``batch`` (1-based) names one JobGroup of a
    parallel wave that runs in several batches.
    """
    return attempt_name(_base(run_id, wave, batch), attempt)


def attempt_name(base: str, attempt: int) -> str:
    """Attempt ``attempt`` of the job named ``base``: ``base-aN`` when it fits in 60
    characters, else ``base`` cut, ``-`` and 10 hex of its sha256, then ``-aN``."""
    if attempt < 2:
        return base
    suffix = f"-a{attempt}"
    if len(base) + len(suffix) <= LIMIT:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:_HASH]
    return f"{base[: LIMIT - len(suffix) - _HASH - 1].rstrip('-_')}-{digest}{suffix}"


def _base(run_id: str, wave: Wave | None, batch: int | None) -> str:
    if wave is None:
        identity: list[object] = ["one-shot", run_id]
        shown = run_id
        plain = _plain(shown, underscore=False)
    else:
        identity = ["runtime", run_id, wave.index, wave.name, batch]
        shown = f"{run_id}-{wave.index:02d}-{wave.name}" + (f"-b{batch}" if batch else "")
        plain = _plain(shown, underscore=True) and _parse_runtime(shown) == (
            run_id,
            wave.index,
            wave.name,
            batch,
        )
    if plain:
        return shown
    return _hashed(_sanitise(shown, underscore=wave is not None), identity)


def _sanitise(text: str, *, underscore: bool) -> str:
    keep = "-_" if underscore else "-"
    return "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in keep) else "-" for ch in text.lower()
    )


def _plain(shown: str, *, underscore: bool) -> bool:
    """Whether ``shown`` may be the job name as it is (see the module docstring)."""
    return (
        len(shown) <= LIMIT
        and _SKY_NAME.fullmatch(shown) is not None
        and (underscore or "_" not in shown)
        and _ATTEMPT.search(shown) is None
        and _HASHED.search(shown) is None
    )


def _parse_runtime(name: str) -> tuple[str, int, str, int | None] | None:
    """Read ``<run>-<WW>-<wave>[-bN]`` back: the LAST wave field whose digits are the
    two-digit (or unpadded wider) index, with a non-empty run before and wave after."""
    batch = None
    found = _BATCH.search(name)
    if found is not None:
        batch, name = int(found.group(1)), name[: found.start()]
    for match in reversed(list(_WAVE_FIELD.finditer(name))):
        digits = match.group(1)
        run, rest = name[: match.start()], name[match.start() + len(digits) + 2 :]
        if f"{int(digits):02d}" == digits and run and rest:
            return run, int(digits), rest, batch
    return None


def _hashed(clean: str, identity: list[object]) -> str:
    """``clean`` cut to leave room for the hash (and ``-aNN``), then 10 hex of the sha256
    of the exact identity; ``npa-`` first when ``clean`` does not start with a letter."""
    text = json.dumps(identity, ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH]
    if not clean[:1].isalpha():
        clean = f"npa-{clean}"
    return f"{clean[: LIMIT - _HASH - 1 - _ROOM].rstrip('-_')}-{digest}"
