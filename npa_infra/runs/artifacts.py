"""Parsing of decision artifacts (dsl.md §3), pure: bytes in, a ``DecisionRead`` out.

Runtime mode reads a state's decision artifact after a leaf with transitions
and after each sequence-loop iteration (dsl.md §5.4), and fails closed: a
malformed artifact fails the run. This module decides only what the bytes
say; the caller fetched them (``storage``) and decides what absence means.

The artifact is a JSON object; the decision is the value of the first key
present among ``decision``, ``last_decision`` and ``action`` (dsl.md §3),
normalised by the plan's normaliser, passed in because the plan package sits
above this one in the import layers. npa-infra is stricter than the reference
in one respect: the chosen value must be a non-empty string, since anything
else would silently make both predicates false.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["DECISION_KEYS", "MAX_DECISION_BYTES", "MISSING_FIELD", "DecisionRead", "parse_decision"]

DECISION_KEYS = ("decision", "last_decision", "action")
MAX_DECISION_BYTES = 1024 * 1024
MISSING_FIELD = "decision payload missing decision field"  # the reference's exact text (dsl.md §3)


@dataclass(frozen=True, slots=True)
class DecisionRead:
    """One parsed artifact: either ``decision`` (normalised) and its ``source_key``, or ``error``."""

    decision: str | None
    source_key: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "source_key": self.source_key, "error": self.error}


def parse_decision(
    payload: bytes,
    *,
    uri: str,
    normalize: Callable[[str], str],
    max_bytes: int = MAX_DECISION_BYTES,
) -> DecisionRead:
    """Read the decision from an artifact's bytes; total: every failure is a ``DecisionRead.error``.

    ``uri`` only names the artifact in the error text, which leads with the reason.
    """
    if len(payload) > max_bytes:
        return _failed(f"decision payload is larger than {max_bytes} bytes", uri)
    if not payload.strip():
        return _failed("decision payload is empty", uri)
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _failed("decision payload is not valid JSON", uri)
    if not isinstance(document, dict):
        return _failed(f"decision payload is not a JSON object (found {_json_type(document)})", uri)
    # dsl.md §3: the first key present wins, even when its value is unusable (fail closed).
    key = next((name for name in DECISION_KEYS if name in document), None)
    if key is None:
        return _failed(MISSING_FIELD, uri)
    value = document[key]
    if not isinstance(value, str):
        return _failed(
            f"decision field {key!r} is not a string (found {_json_type(value)})", uri, key
        )
    decision = normalize(value)
    if not decision.strip():
        return _failed(f"decision field {key!r} is empty", uri, key)
    return DecisionRead(decision=decision, source_key=key, error=None)


def _failed(reason: str, uri: str, key: str | None = None) -> DecisionRead:
    return DecisionRead(decision=None, source_key=key, error=f"{reason}: {uri}")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
