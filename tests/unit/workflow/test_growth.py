"""Validate and plan do the same work per state at every size (issue 19: linear core).

Times belong in the benchmark (bench/spec_growth.py), so these tests count instead:
the Python calls ``load_validated`` and ``build_plan`` make (cProfile), and the
memory a validation holds at its peak (tracemalloc), on chains of 100 to 800 states.
A quadratic step (an issue list scanned per issue, a plan re-walked per state)
shows as a per-state increment that grows; an oversized document must be refused
in memory bounded by the node cap, not by what composing all of it would take.
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import pstats
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.plan.planner import build_plan
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.source import Limits, load_text
from npa_infra.workflow.planning.loading import load_validated
from tests.support.specs import growth_chain_spec

SIZES = (100, 200, 400, 800)


def _calls(call: Callable[[], object]) -> int:
    # Earlier tests leave garbage whose finalizers would run (and be counted) whenever
    # the collector fires mid-profile; collect it first and hold the collector off.
    gc.collect()
    gc.disable()
    try:
        profile = cProfile.Profile()
        profile.enable()
        call()
        profile.disable()
    finally:
        gc.enable()
    return sum(row[1] for row in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]  # untyped in typeshed


def _peak_bytes(call: Callable[[], object]) -> int:
    gc.collect()  # earlier tests' garbage is not freed (nor finalized) inside the trace
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _chain(tmp_path: Path, states: int) -> Path:
    path = tmp_path / f"chain-{states}.yaml"
    path.write_text(growth_chain_spec(states), encoding="utf-8")
    return path


def _increments(counts: list[int]) -> list[float]:
    """Calls per added state between consecutive sizes."""
    points = list(zip(SIZES, counts, strict=True))
    return [(b - a) / (m - n) for (n, a), (m, b) in itertools.pairwise(points)]


def test_load_validated_calls_per_added_state_same_at_every_size(tmp_path: Path) -> None:
    paths = [_chain(tmp_path, n) for n in SIZES]
    load_validated(paths[0], BUILTIN)  # first-use imports and caches are not per state

    per_state = _increments([_calls(lambda p=p: load_validated(p, BUILTIN)) for p in paths])

    assert max(per_state) <= min(per_state) * 1.01, per_state


def test_build_plan_calls_per_added_state_same_at_every_size(tmp_path: Path) -> None:
    specs = [load_validated(_chain(tmp_path, n), BUILTIN).spec for n in SIZES]
    build_plan(specs[0], BUILTIN, run_id="growth-1")

    per_state = _increments(
        [_calls(lambda s=s: build_plan(s, BUILTIN, run_id="growth-1")) for s in specs]
    )

    assert max(per_state) <= min(per_state) * 1.01, per_state


def test_load_validated_peak_memory_per_state_does_not_grow(tmp_path: Path) -> None:
    small, large = _chain(tmp_path, 200), _chain(tmp_path, 800)
    load_validated(small, BUILTIN)

    per_state_small = _peak_bytes(lambda: load_validated(small, BUILTIN)) / 200
    per_state_large = _peak_bytes(lambda: load_validated(large, BUILTIN)) / 800

    # dicts and lists grow in steps, so the peak may hold a resize; never a multiple
    assert per_state_large <= per_state_small * 1.25, (per_state_small, per_state_large)


def test_load_text_oversized_refused_in_memory_bounded_by_the_cap() -> None:
    limits = Limits(max_nodes=1_000)
    just_over, far_over = growth_chain_spec(200), growth_chain_spec(20_000)  # 2 MB

    def refuse(text: str) -> Callable[[], object]:
        def call() -> object:
            result = load_text(text, "t.yaml", limits=limits)
            assert isinstance(result, SpecIssue), result  # refused at the cap, not loaded
            assert result.message == "refused: document has more than 1000 nodes"
            return result

        return call

    baseline = _peak_bytes(refuse(just_over))
    peak = _peak_bytes(refuse(far_over))

    # the nodes up to the cap and one copy of the text (libyaml reads it as UTF-8);
    # composing the whole document would hold ~100 bytes per byte of text
    assert peak <= baseline + 1.5 * len(far_over), (baseline, peak, len(far_over))
