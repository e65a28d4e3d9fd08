"""How validate and plan grow with spec size (issue 19: linear to 5,000 states).

Generates one runtime-free chain spec per size (``--sizes``, default 500, 1,000,
2,000 and 5,000 states; every state a catalog tool with an input read from the
previous state's output, so tokens, the graph and the planner all have work),
then times, in this process after one warm-up, ``load_validated`` (every phase of
validation, including its plans) and one ``build_plan`` of the validated spec:
the medians of ``--runs`` runs each. The growth is fitted as ``t = a * n ** k`` by
least squares on the logarithms; ``k`` near 1 is linear. Times are for
comparison within one run only.

Run: ``.venv/bin/python bench/spec_growth.py [--sizes 500 1000 2000 5000] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from npa_infra.catalog.builtin import BUILTIN  # noqa: E402  # after the repo is on the path
from npa_infra.plan.planner import build_plan  # noqa: E402
from npa_infra.workflow.planning.loading import load_validated  # noqa: E402

__all__ = ["chain_spec", "fit_exponent", "main"]


def chain_spec(states: int) -> str:
    """A valid one-shot chain of ``states`` states, each reading its predecessor's output."""
    lines = [
        "apiVersion: npa.workflow/v0.0.1",
        "kind: Workflow",
        "metadata: {name: growth}",
        'config: {bucket: example-bucket, root_uri: "s3://example-bucket/growth"}',
        "resources:",
        "  default: {cloud: kubernetes, cpus: 1, memory: 1Gi}",
        "states:",
    ]
    for i in range(states):
        lines += [
            f"  s{i}:",
            "    run:",
            f'      shell: "echo step {i} > $OUT"',
            "    outputs:",
            f'      - {{uri: "{{{{config.root_uri}}}}/s{i}/out.txt"}}',
        ]
        if i:
            lines += [
                "    inputs:",
                f'      - {{uri: "{{{{state.s{i - 1}.uri}}}}"}}',
            ]
        lines.append(f"    next: s{i + 1}" if i < states - 1 else "    terminal: true")
    return "\n".join(lines) + "\n"


def fit_exponent(points: Sequence[tuple[int, float]]) -> float:
    """``k`` of the least-squares fit ``log t = log a + k log n``."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def _median_time(work: Callable[[], object], runs: int) -> float:
    work()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(sizes: Sequence[int], runs: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="npa-growth-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"chain-{n}.yaml"
            path.write_text(chain_spec(n), encoding="utf-8")
            validated = load_validated(path, BUILTIN)
            validate_s = _median_time(lambda p=path: load_validated(p, BUILTIN), runs)
            plan_s = _median_time(
                lambda v=validated: build_plan(v.spec, BUILTIN, run_id="growth-1"), runs
            )
            rows.append(
                {
                    "states": n,
                    "bytes": path.stat().st_size,
                    "validate_s": validate_s,
                    "plan_s": plan_s,
                    "validate_us_per_state": validate_s / n * 1e6,
                    "plan_us_per_state": plan_s / n * 1e6,
                }
            )
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
    for r in result["rows"]:
        lines.append(
            f"| {r['states']:,} | {r['bytes']:,} | {r['validate_s']:.3f} | "
            f"{r['validate_us_per_state']:.0f} | {r['plan_s']:.3f} | {r['plan_us_per_state']:.0f} |"
        )
    lines.append(
        f"| fit `t ∝ n^k` | | k = {result['validate_exponent']:.2f} | | "
        f"k = {result['plan_exponent']:.2f} | |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/spec_growth.py", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    p.add_argument("--runs", type=int, default=3, help="timed runs per size (3)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    args = p.parse_args(argv)
    result = measure(args.sizes, args.runs)
    print(markdown(result))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
