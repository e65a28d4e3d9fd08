"""Reading a journaled transaction record back into a ``TransactionRecord``.

The inverse of ``TransactionRecord.to_json``: resume and status rebuild the
record exactly as it was checkpointed. Unknown keys are ignored (a newer
writer) and missing ones take the field default, so old records stay readable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from npa_infra.runs.children import ChildIdentity
from npa_infra.runs.models import (
    Category,
    Existence,
    LaunchState,
    Phase,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    RequestState,
    TransactionRecord,
)

__all__ = ["record_from_json"]

_ENUMS: dict[str, type[StrEnum]] = {
    "phase": Phase,
    "state": LaunchState,
    "category": Category,
    "last_category": Category,
    "recovery_decision": RecoveryDecision,
    "existence": Existence,
    "last_request_state": RequestState,
}


def _reconciliation(raw: Mapping[str, Any]) -> Reconciliation:
    return Reconciliation(
        state=ReconciliationState(raw["state"]),
        job_ids=tuple(int(i) for i in raw.get("job_ids") or ()),
        status=raw.get("status"),
        error=str(raw.get("error") or ""),
        category=Category(raw.get("category") or "none"),
        at=float(raw.get("at") or 0.0),
    )


def record_from_json(data: Mapping[str, Any]) -> TransactionRecord:
    """Rebuild a record from its journaled JSON form."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(TransactionRecord):
        if f.name == "context":
            values["context"] = (data.get("controller") or {}).get("selected_context")
            continue
        if f.name not in data:
            continue
        raw = data[f.name]
        if f.name in _ENUMS:
            values[f.name] = None if raw is None else _ENUMS[f.name](raw)
        elif f.name == "launch_child":
            values[f.name] = ChildIdentity.from_json(raw)
        elif f.name == "reconciliations":
            values[f.name] = tuple(_reconciliation(r) for r in raw)
        elif isinstance(raw, list):
            values[f.name] = tuple(raw)
        else:
            values[f.name] = raw
    return TransactionRecord(**values)
