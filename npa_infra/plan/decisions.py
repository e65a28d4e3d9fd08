"""Decision values, the two predicates and runtime decision points (dsl.md §3, §5.4)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

__all__ = [
    "ALLOWED_ASSUMPTIONS",
    "PREDICATES",
    "Decision",
    "decision_uri",
    "evaluate",
    "is_allowed_assumption",
    "normalize",
    "point_key",
]


class Decision(StrEnum):
    PROMOTE = "promote_checkpoint"
    LOOP_BACK = "loop_back_to_inner_loop"


PREDICATES = ("promote_checkpoint", "loop_back")
ALLOWED_ASSUMPTIONS = ("promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop")
_ALIASES = {"promote": Decision.PROMOTE.value, "loop_back": Decision.LOOP_BACK.value}


def normalize(value: str) -> str:
    """``promote`` → ``promote_checkpoint``, ``loop_back`` → ``loop_back_to_inner_loop``."""
    text = value.strip()
    return _ALIASES.get(text, text)


def is_allowed_assumption(value: str) -> bool:
    return value.strip() in ALLOWED_ASSUMPTIONS


def evaluate(predicate: str, decision: str) -> bool:
    """Whether ``predicate`` holds under the current (normalised) decision."""
    if predicate == "promote_checkpoint":
        return decision == Decision.PROMOTE
    if predicate == "loop_back":
        return decision == Decision.LOOP_BACK
    return False


def decision_uri(outputs: Iterable[Mapping[str, str]], config: Mapping[str, Any]) -> str:
    """The writer's decision URI (dsl.md §3), from its resolved outputs and effective config.

    The first output whose ``schema`` contains ``decision``; otherwise
    ``config.decision_uri``; otherwise empty.
    """
    for output in outputs:
        if "decision" in output.get("schema", "").lower() and output.get("uri"):
            return output["uri"]
    return str(config.get("decision_uri") or "").strip()


def point_key(state: str, loops: Sequence[tuple[str, int]] = (), occurrence: int = 1) -> str:
    """The key of one executed decision point: ``state[@loop=i,...][#n]``.

    ``loops`` are the enclosing sequence loops, outermost first, with their
    current iteration; ``occurrence`` (> 1) tells apart a point that the same
    walk reaches again under the same loop counters (a state shared by two
    sequences). The walk is deterministic, so a key is stable across re-plans.
    """
    key = state
    if loops:
        key += "@" + ",".join(f"{name}={i}" for name, i in loops)
    if occurrence > 1:
        key += f"#{occurrence}"
    return key
