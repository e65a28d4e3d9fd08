"""The happy-path cost of one runtime wave, against the SkyPilot simulator and the Kubernetes double.

A K-wave serial runtime run (each job 8 s of work: PENDING, RUNNING, SUCCEEDED on the
controller's clock, which is the virtual clock) is submitted
through the real submit SDK, the real ``SkyCli`` (one simulator process per
``sky`` call) and the real Kubernetes client against the double, on a virtual
clock, so polls and readiness windows cost no real time. Per wave it reports:

* ``sky_processes``: ``sky`` invocations that reached the simulator (each one a
  process; a real SkyPilot CLI process costs ~2 s of start-up);
* ``kube_requests``: requests the Kubernetes double served;
* ``npa_cpu_s``: CPU of npa's own thread (``time.thread_time``), which excludes
  the ``sky`` children and the double's server threads;
* ``wall_s``: wall time per wave, of which the simulated work costs nothing;
* ``simulated_s``: the virtual clock's sleeps per wave (supervision polls and the
  readiness window), what a real run would wait, and ``waited_beyond_work_s``,
  that minus the job's 8 s of work (issue 19).

Over the K measured, npa's CPU is fitted as ``a + b·K + c·K²`` (least squares), and
the CPU of each extra wave is taken between consecutive K (``Δcpu / ΔK``) and fitted
as ``m + s·K`` over the intervals' midpoints: the plan is built once per run (issue
19), so a wave's CPU is constant in K (``c`` and ``s`` near 0, where planning every
wave's outputs and schemas again made it 0.70 + 0.047·K + 0.0024·K² s). A 1-wave
run goes first, untimed, so the process's one-time imports (the Kubernetes client,
boto3) are not charged to the first K measured.

Run: ``.venv/bin/python bench/wave_cost.py [--waves 1 3 12 40] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.runs.supervised import chain_spec  # noqa: E402  # the repo's own doubles
from tests.integration.runs.world import make_world  # noqa: E402
from tests.support.fakekube import FakeKube  # noqa: E402

# Each job does 8 s of work on the controller's clock, which is the world's virtual
# clock (``make_world(sky_time=True)``): PENDING for 2 s, RUNNING, SUCCEEDED from 8 s.
WORK_S = 8.0
FINISHES = {
    "command": "jobs.launch",
    "action": "timeline",
    "statuses": ["PENDING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"],
    "clock": "seconds",
    "interval": 2.0,
}


def measure(waves: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="npa-wave-bench-") as tmp:
        root = Path(tmp)
        fake = FakeKube.start(root / "fakekube")
        try:
            world = make_world(root, fake, sky_time=True)
            world.faults(FINISHES)
            spec = root / "chain.yaml"
            spec.write_text(chain_spec(waves), encoding="utf-8")
            before = len(fake.calls())
            cpu, wall = time.thread_time(), time.perf_counter()
            result = world.submit(spec, run_id=f"bench-{waves}")
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            if result.status != "SUCCEEDED":
                raise SystemExit(f"the {waves}-wave run ended {result.status}: {result.to_json()}")
            sky = len(world.sim_calls())
            kube = len(fake.calls()) - before
            simulated = sum(world.clock.slept)
        finally:
            fake.stop()
    return {
        "waves": waves,
        "sky_processes": sky,
        "kube_requests": kube,
        "npa_cpu_s": round(cpu, 4),
        "wall_s": round(wall, 3),
        "simulated_s": round(simulated, 3),
        "per_wave": {
            "sky_processes": round(sky / waves, 2),
            "kube_requests": round(kube / waves, 2),
            "npa_cpu_s": round(cpu / waves, 4),
            "wall_s": round(wall / waves, 3),
            "simulated_s": round(simulated / waves, 3),
            # what an operator waits per wave besides the job's own work
            "waited_beyond_work_s": round(simulated / waves - WORK_S, 3),
        },
    }


def polyfit(xs: list[float], ys: list[float], degree: int) -> list[float]:
    """Least-squares polynomial coefficients, constant term first (normal equations)."""
    n = degree + 1
    a = [[sum(x ** (i + j) for x in xs) for j in range(n)] for i in range(n)]
    b = [sum(y * x**i for x, y in zip(xs, ys, strict=True)) for i in range(n)]
    for col in range(n):  # Gauss-Jordan with partial pivoting
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for row in range(n):
            if row != col and a[col][col]:
                f = a[row][col] / a[col][col]
                a[row] = [u - f * v for u, v in zip(a[row], a[col], strict=True)]
                b[row] -= f * b[col]
    return [b[i] / a[i][i] for i in range(n)]


def cpu_fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """npa CPU over K: the total ``a + b·K + c·K²``, and each extra wave's ``m + s·K``."""
    ordered = sorted(rows, key=lambda r: int(r["waves"]))
    ks = [float(r["waves"]) for r in ordered]
    cpu = [float(r["npa_cpu_s"]) for r in ordered]
    if len(set(ks)) < 3:
        return {"total": None, "per_wave": None}
    a, b, c = polyfit(ks, cpu, 2)
    steps = list(itertools.pairwise(zip(ks, cpu, strict=True)))
    marginal = [(y2 - y1) / (k2 - k1) for (k1, y1), (k2, y2) in steps]
    middles = [(k1 + k2) / 2 for (k1, _), (k2, _) in steps]
    level, slope = polyfit(middles, marginal, 1)
    return {
        "total": {"a": round(a, 4), "b": round(b, 5), "c": round(c, 6)},
        "per_wave": {
            "intervals": [
                {"from": int(k1), "to": int(k2), "cpu_s": round(m, 5)}
                for ((k1, _), (k2, _)), m in zip(steps, marginal, strict=True)
            ],
            "level_s": round(level, 5),
            "slope_s_per_k": round(slope, 6),
        },
    }


def python_pass_s(runs: int = 9) -> float:
    """The reference measured in the same run: the median wall time of ``python -c pass``."""
    import statistics
    import subprocess

    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waves", type=int, nargs="+", default=[1, 3, 12, 40])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    reference = python_pass_s()
    measure(1)  # untimed: the first run in the process pays the imports, no wave's cost
    rows = [measure(k) for k in args.waves]
    for row in rows:
        row["per_wave"]["npa_cpu_x_python_pass"] = round(
            row["per_wave"]["npa_cpu_s"] / reference, 2
        )
    print(f"reference: python -c pass = {reference * 1000:.1f} ms")
    print(
        f"{'waves':>5} {'sky/wave':>9} {'kube/wave':>10} {'npa cpu/wave':>13} "
        f"{'x python -c pass':>17} {'wall/wave':>10} {'simulated/wave':>15} {'beyond work':>12}"
    )
    for row in rows:
        p = row["per_wave"]
        print(
            f"{row['waves']:>5} {p['sky_processes']:>9} {p['kube_requests']:>10} "
            f"{p['npa_cpu_s']:>12.4f}s {p['npa_cpu_x_python_pass']:>16}x {p['wall_s']:>9.3f}s"
            f" {p['simulated_s']:>14.2f}s {p['waited_beyond_work_s']:>11.2f}s"
        )
    fit = cpu_fit(rows)
    if fit["total"] is not None:
        t, w = fit["total"], fit["per_wave"]
        print(
            f"npa cpu = {t['a']:.3f} + {t['b']:.4f}·K + {t['c']:.5f}·K² s; "
            f"each extra wave: {w['level_s']:.4f} s + {w['slope_s_per_k']:.6f} s·K ("
            + ", ".join(f"K {i['from']}→{i['to']}: {i['cpu_s']:.4f} s" for i in w["intervals"])
            + ")"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {"status": "ok", "python_pass_s": reference, "rows": rows, "npa_cpu_fit": fit}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
