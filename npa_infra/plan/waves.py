"""Group a flat plan into waves (dsl.md §5.3 ``--waves``).

A parallel wave is a run of consecutive steps sharing a non-empty ``group``;
a repeated member starts a new wave. Every other step is its own serial wave.
"""

from __future__ import annotations

import math

from npa_infra.plan.model import Plan, PlanStep, Wave

__all__ = ["compute", "job_name"]


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


def job_name(run_id: str, wave: Wave | None = None, attempt: int = 1) -> str:
    """The logical SkyPilot job name (cli.md §0): sanitised, ≤ 60 chars, ``-aN`` kept."""
    base = run_id
    if wave is not None:
        base = f"{run_id}-{wave.index:02d}-{wave.name}"
    clean = "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "-" for ch in base.lower()
    )
    if wave is None:
        clean = clean.replace("_", "-")
    suffix = f"-a{attempt}" if attempt >= 2 else ""
    return clean[: 60 - len(suffix)] + suffix
