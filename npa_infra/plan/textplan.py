"""The text form of a plan: one line per step (or wave) that a person can read.

Each step line names the step, where it sits in its loops (``loop rounds#2``,
outermost first) and the command it runs: a tool's ``toolRef`` and its
resolved argv, a shell-quoted ``argv``, or the first line of a ``shell``
script, each cut at ``WIDTH`` characters with an ellipsis so a line stays on
one screen row or two. Pure: it only formats the records it is given.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from npa_infra.plan.model import Plan, PlanStep, Wave

__all__ = ["WIDTH", "command", "plan_lines", "step_name", "where"]

# Long enough for a tool's module and first flags, short enough for a terminal row.
WIDTH = 96
_ELLIPSIS = "..."


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - len(_ELLIPSIS))] + _ELLIPSIS


def command(step: PlanStep, width: int = WIDTH) -> str:
    """What the step runs, shell-quoted and cut at ``width`` characters."""
    head = f"toolRef={step.tool_ref} " if step.tool_ref else ""
    if step.argv:
        return _cut(head + "argv: " + shlex.join(step.argv), width)
    lines = [line.strip() for line in step.shell.splitlines() if line.strip()]
    if not lines:
        return _cut(head + "argv: (none)", width)
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return _cut(head + "shell: " + lines[0], max(len(_ELLIPSIS), width - len(more))) + more


def step_name(step: PlanStep) -> str:
    """``state``, or ``state#N`` for the N-th iteration of a leaf loop."""
    return f"{step.state}#{step.iteration}" if step.iteration is not None else step.state


def where(step: PlanStep) -> str:
    """``loop outer#1/inner#2`` for a step inside sequence loops, else empty."""
    if not step.loops:
        return ""
    return "loop " + "/".join(f"{name}#{i}" for name, i in step.loops)


def _step_line(index: int, step: PlanStep) -> str:
    parts = [f"{index:02d}. {step_name(step)}"]
    if place := where(step):
        parts.append(f"[{place}]")
    parts.append(command(step))
    return "  ".join(parts)


def _wave_line(wave: Wave) -> str:
    names = ", ".join(step_name(s) for s in wave.steps)
    line = f"{wave.index:02d}. [{wave.kind}] {wave.name}: {names}"
    if wave.kind == "parallel":
        line += f" maxConcurrency={wave.max_concurrency} batches={wave.batches}"
    if place := where(wave.steps[0]):
        line += f"  [{place}]"
    return line


def plan_lines(plan: Plan, waves: Sequence[Wave] | None, fingerprint: str) -> list[str]:
    """The whole text plan: header, one line per step (or per wave), the fingerprint."""
    lines = [f"workflow: {plan.workflow}"]
    if plan.assume_decision:
        lines.append(f"assume_decision: {plan.assume_decision}")
    if waves is not None:
        lines.append(f"waves: {len(waves)}")
        lines.extend(_wave_line(w) for w in waves)
    else:
        lines.extend(_step_line(i, s) for i, s in enumerate(plan.steps, start=1))
    lines.append(f"fingerprint: {fingerprint}")
    return lines
