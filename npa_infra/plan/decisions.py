"""Decision values and the two predicates (dsl.md §3)."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ALLOWED_ASSUMPTIONS",
    "PREDICATES",
    "Decision",
    "evaluate",
    "is_allowed_assumption",
    "normalize",
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
