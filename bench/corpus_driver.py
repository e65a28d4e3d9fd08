"""Validate and plan every spec of the corpus in one process (timed whole by ``bench/run.py``).

The corpus directory comes from ``NPA_SPEC_CORPUS`` (or the first argument) and
the tool catalog from ``NPA_TOOL_CATALOG`` (via ``select_catalog``, exactly as
the CLI chooses it). Every ``*.yaml`` in the directory is fully validated
(``load_validated``: every phase, including the token dry run and one plan per
decision assumption) and then planned once more the way ``plan-spec`` does.

A spec that is rejected with a located ``SpecError`` or ``PlanError`` is
counted, not fatal: rejecting it is part of the work being timed. The result
is one JSON line on stdout; the exit status is 0 when the corpus was
processed, 2 when the corpus is missing or empty, and 1 on a catalog error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from npa_infra.catalog.loader import select_catalog
from npa_infra.errors import NpaError
from npa_infra.plan.model import PlanError
from npa_infra.plan.planner import build_plan
from npa_infra.workflow.planning.loading import load_validated

__all__ = ["main"]


def main(argv: list[str]) -> int:
    corpus = argv[0] if argv else os.environ.get("NPA_SPEC_CORPUS", "")
    if not corpus:
        sys.stderr.write("corpus_driver: set NPA_SPEC_CORPUS (or pass the corpus directory)\n")
        return 2
    files = sorted(Path(corpus).glob("*.yaml"))
    if not files:
        sys.stderr.write(f"corpus_driver: no *.yaml files in {corpus}\n")
        return 2
    try:
        catalog = select_catalog(None, os.environ)
    except NpaError as exc:
        sys.stderr.write(f"corpus_driver: {exc}\n")
        return 1
    planned = 0
    steps = 0
    rejected: list[str] = []
    for path in files:
        try:
            validated = load_validated(path, catalog)
            plan = build_plan(validated.spec, catalog, run_id=f"{validated.spec.name}-plan")
        except (NpaError, PlanError):
            rejected.append(path.name)
            continue
        planned += 1
        steps += len(plan.steps)
    summary = {
        "specs": len(files),
        "planned": planned,
        "rejected": len(rejected),
        "rejected_files": rejected,
        "steps": steps,
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
