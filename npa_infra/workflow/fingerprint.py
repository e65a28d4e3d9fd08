"""The stable plan fingerprint: sha256 over the canonical JSON of the plan."""

from __future__ import annotations

import json

from npa_infra.plan.model import Plan

__all__ = ["plan_fingerprint"]


def plan_fingerprint(plan: Plan) -> str:
    import hashlib  # lazy: validate-spec never fingerprints, and start-up is budgeted

    body = {**plan.to_json(), "run_id": plan.run_id}
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
