"""How validate and plan grow with spec size (issue 19: linear to 5,000 states).

Generates one runtime-free chain spec per size (``--sizes``, default 500, 1,000,
2,000 and 5,000 states; every state a catalog tool with an input read from the
previous state's output, so tokens, the graph and the planner all have work),
then times, in this process after one warm-up, ``load_validated`` (every phase of
validation, including its plans) and one ``build_plan`` of the spec that run
validated: the medians of ``--runs`` runs each. Each timed call starts after an
untimed full collection, so it pays for the collections its own allocations
cause, not for the garbage of the calls before it (a full collection that the
earlier runs made due otherwise landed in whichever call came next). The sizes
run one after the other, each after its own warm-up, so every size reuses memory
a run of its own size freed (run in rounds over the sizes, the largest would be
the only one to fault in fresh pages). The growth is fitted as ``t = a * n ** k``
by least squares on the logarithms; ``k`` near 1 is linear. Times are for
comparison within one run only. ``--memory`` adds the tracemalloc peak of one
untimed validation per state.

Run: ``.venv/bin/python bench/spec_growth.py [--sizes 500 1000 2000 5000] [--memory] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from npa_infra.catalog.builtin import BUILTIN  # noqa: E402  # after the repo is on the path
from npa_infra.plan.planner import build_plan  # noqa: E402
from npa_infra.workflow.planning.loading import load_validated  # noqa: E402
from tests.support.specs import growth_chain_spec  # noqa: E402  # the tests count the same chains

__all__ = ["fit_exponent", "main"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def fit_exponent(points: Sequence[tuple[int, float]]) -> float:
    """``k`` of the least-squares fit ``log t = log a + k log n``."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def _timed(work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> tuple[float, _T]:
    """Seconds of one call of ``work`` after an untimed full collection, and its result."""
    gc.collect()
    start = time.perf_counter()
    result = work(*args, **kwargs)
    return time.perf_counter() - start, result


def _peak_bytes(work: Callable[_P, object], *args: _P.args, **kwargs: _P.kwargs) -> int:
    """The tracemalloc peak of one call of ``work``, above what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        work(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def measure(sizes: Sequence[int], runs: int, *, memory: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="npa-growth-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"chain-{n}.yaml"
            path.write_text(growth_chain_spec(n), encoding="utf-8")
            build_plan(load_validated(path, BUILTIN).spec, BUILTIN, run_id="growth-1")  # warm-up
            validate_samples: list[float] = []
            plan_samples: list[float] = []
            for _ in range(runs):
                validate_s, validated = _timed(load_validated, path, BUILTIN)
                plan_s, _ = _timed(build_plan, validated.spec, BUILTIN, run_id="growth-1")
                del validated  # one validated spec alive at a time
                validate_samples.append(validate_s)
                plan_samples.append(plan_s)
            validate_s = statistics.median(validate_samples)
            plan_s = statistics.median(plan_samples)
            row: dict[str, Any] = {
                "states": n,
                "bytes": path.stat().st_size,
                "validate_s": validate_s,
                "plan_s": plan_s,
                "validate_us_per_state": validate_s / n * 1e6,
                "plan_us_per_state": plan_s / n * 1e6,
                "validate_samples_s": validate_samples,
                "plan_samples_s": plan_samples,
            }
            if memory:
                peak = _peak_bytes(load_validated, path, BUILTIN)
                row["validate_peak_bytes_per_state"] = peak / n
            rows.append(row)
    return {
        "runs": runs,
        "rows": rows,
        "validate_exponent": fit_exponent([(r["states"], r["validate_s"]) for r in rows]),
        "plan_exponent": fit_exponent([(r["states"], r["plan_s"]) for r in rows]),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| states | spec bytes | validate (s) | µs / state | plan (s) | µs / state |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    memory = all("validate_peak_bytes_per_state" in r for r in result["rows"])
    if memory:
        lines[0] += " validate peak (KiB / state) |"
        lines[1] += "---:|"
    for r in result["rows"]:
        lines.append(
            f"| {r['states']:,} | {r['bytes']:,} | {r['validate_s']:.3f} | "
            f"{r['validate_us_per_state']:.0f} | {r['plan_s']:.3f} | {r['plan_us_per_state']:.0f} |"
            + (f" {r['validate_peak_bytes_per_state'] / 1024:.1f} |" if memory else "")
        )
    lines.append(
        f"| fit `t ∝ n^k` | | k = {result['validate_exponent']:.2f} | | "
        f"k = {result['plan_exponent']:.2f} | |" + (" |" if memory else "")
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/spec_growth.py", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    p.add_argument("--runs", type=int, default=5, help="timed runs per size (5)")
    p.add_argument(
        "--memory", action="store_true", help="add the tracemalloc peak of one validation"
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    args = p.parse_args(argv)
    result = measure(args.sizes, args.runs, memory=args.memory)
    print(markdown(result))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
