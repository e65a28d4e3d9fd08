"""The stable plan fingerprint: sha256 over the canonical JSON of the plan.

``run_fingerprint`` is what a live run is journaled under: the plan's
fingerprint, folded with the image pins preflight resolved when there are
any. A resume re-runs preflight; if a tag moved meanwhile, the rendered YAML
(and so the logical launch id) would change, and the journal must refuse the
resume rather than launch under a new identity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from npa_infra.plan.model import Plan

__all__ = ["plan_fingerprint", "run_fingerprint"]


def _sha256(text: str) -> str:
    import hashlib  # lazy: validate-spec never fingerprints, and start-up is budgeted

    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def plan_fingerprint(plan: Plan) -> str:
    body = {**plan.to_json(), "run_id": plan.run_id}
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return _sha256(canonical)


def run_fingerprint(plan: Plan, pins: Mapping[str, str]) -> str:
    """``plan_fingerprint`` alone without pins; otherwise folded with the sorted pins."""
    base = plan_fingerprint(plan)
    if not pins:
        return base
    return _sha256(json.dumps([base, sorted(pins.items())], separators=(",", ":")))
