"""The answer of ``sky check <infra>``, read from its text output (skypilot-0.12.md §1, §12).

``sky check`` exits 0 whether the infra is enabled or not: the verdict is the
``  Kubernetes: enabled [compute]`` / ``  Kubernetes: disabled`` line that the
API server streams back, and SkyPilot's reason is the indented block under
it (``Reason [compute]: …`` and, per context, ``└── <ctx>: disabled. Reason: …``),
up to the first blank line. The client then prints ``Using SkyPilot API
server: <url>``: the server that actually ran the check, local or remote.

The check itself runs inside that API server, so it sees the server's PATH
and kubeconfig; the operator's own tools are ``clienttools``' business.
Pure: output that does not prove a verdict is ``unknown``, never enabled.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple

from npa_infra.skypilot import classify
from npa_infra.skypilot.models import CommandResult, ErrorKind

__all__ = ["CheckResult", "CheckVerdict", "parse_check"]

_ENDPOINT = re.compile(r"^Using SkyPilot API server: (\S+)\s*$", re.MULTILINE)
# `├── ctx: enabled.` / `└── ctx: disabled. Reason: …` (sky/check.py _format_context_details)
_CONTEXT = re.compile(r"^\s*[├└]── (\S+?)(?:: (.*))?$")
_NAMES = {"kubernetes": "Kubernetes"}  # SkyPilot's repr of the cloud, as printed
_REASON_LIMIT = 2000


class CheckVerdict(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    UNKNOWN = "unknown"  # the command failed, or printed no verdict line for the infra


class CheckResult(NamedTuple):
    """``sky check <infra>``: SkyPilot's verdict, its reason text and the server it used."""

    infra: str
    verdict: CheckVerdict
    reason: str  # the block under the verdict line, ANSI stripped and dedented
    contexts: tuple[tuple[str, str], ...]  # (context, SkyPilot's text for it)
    endpoint: str | None  # from ``Using SkyPilot API server: <url>``; None if not printed
    error_kind: ErrorKind
    detail: str
    command: CommandResult


def _block(lines: list[str], start: int) -> list[str]:
    """The indented lines under the verdict line, up to the first blank one."""
    block = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        block.append(line)
    return block


def _reason(verdict_tail: str, block: list[str]) -> str:
    lines = (ln.strip().removeprefix("Reason [compute]:").strip() for ln in [verdict_tail, *block])
    return "\n".join(ln for ln in lines if ln)[:_REASON_LIMIT]


def _contexts(block: list[str]) -> tuple[tuple[str, str], ...]:
    found = []
    for line in block:
        match = _CONTEXT.match(line)
        if match:
            found.append((match.group(1), (match.group(2) or "").strip()))
    return tuple(found)


def parse_check(result: CommandResult, infra: str = "kubernetes") -> CheckResult:
    """SkyPilot's verdict on ``infra`` in ``sky check <infra>`` output; ``unknown`` unless proven."""
    kind = classify.classify(result)
    text = classify.strip_ansi(result.stdout)
    endpoints = _ENDPOINT.findall(text)
    endpoint = endpoints[-1] if endpoints else None
    if kind is not ErrorKind.NONE:
        detail = (classify.strip_ansi(result.stderr).strip() or text.strip())[-1000:]
        return CheckResult(infra, CheckVerdict.UNKNOWN, "", (), endpoint, kind, detail, result)
    name = _NAMES.get(infra, infra.capitalize())
    line = re.compile(rf"^\s*{re.escape(name)}: (enabled|disabled)\b(.*)$")
    lines = text.splitlines()
    for index, candidate in enumerate(lines):
        match = line.match(candidate)
        if match is None:
            continue
        block = _block(lines, index)
        tail = match.group(2).strip()
        # `enabled [compute]`: the capability list is not part of the reason
        tail = re.sub(r"^\[[^\]]*\]", "", tail)
        return CheckResult(
            infra,
            CheckVerdict(match.group(1)),
            _reason(tail, block),
            _contexts(block),
            endpoint,
            ErrorKind.NONE,
            "",
            result,
        )
    detail = f"`sky check {infra}` printed no '{name}: enabled|disabled' line"
    return CheckResult(
        infra, CheckVerdict.UNKNOWN, "", (), endpoint, ErrorKind.UNKNOWN, detail, result
    )
