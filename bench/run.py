"""Whole-process start-up and throughput benchmarks for the ``npa`` CLI.

Every measurement is one complete process started with ``subprocess.run`` and
timed with ``time.perf_counter``: a fresh interpreter each run, so interpreter
start, imports, argument parsing, the work itself and exit are all counted,
exactly what a person typing ``npa …`` (or a CI job) waits for.

Measured (one warm-up run each first, then ``--runs`` timed runs, interleaved
round-robin so that drift on a busy machine hits every command alike):

* ``python -c pass``: interpreter start, the floor every ratio is against;
* ``sky --help``: the SkyPilot CLI, when a binary is present
  (``NPA_SKYPILOT_BIN`` or ``~/.npa/skypilot-venv/bin/sky``);
* ``kubectl version --client``: the Kubernetes CLI, when ``kubectl`` is on PATH
  (``make kubectl`` installs it);
* ``npa --help``;
* ``npa workbench workflow validate-spec`` and ``plan-spec`` of the largest
  reference workflow (``workflows/main/*.yaml`` with the most planned steps), and
  ``submit --plan-only --no-preflight-images`` of it (``make demo``), whose target
  is 1.5x ``validate-spec`` measured in the same run (issue 19);
* ``python bench/corpus_driver.py``: validate and plan every spec of
  ``NPA_SPEC_CORPUS`` with the catalog of ``NPA_TOOL_CATALOG``, in one process.

Run ``make bench`` (or ``.venv/bin/python bench/run.py --help``). The exit
status is 0 when every target passes, 1 when a target fails or a command
exits non-zero, 2 on a usage or setup problem.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "bench"
WORKFLOW_DIR = ROOT / "workflows" / "main"
DEFAULT_SKY = Path.home() / ".npa" / "skypilot-venv" / "bin" / "sky"

TARGET_HELP_S = 0.25
TARGET_VALIDATE_S = 0.25
TARGET_CORPUS_S = 1.0
TARGET_PLAN_ONLY_X_VALIDATE = 1.5

Status = Literal["PASS", "FAIL", "ERROR", "-"]


class SetupError(Exception):
    """The benchmark cannot run as configured (missing binary, no workflow, …)."""


@dataclass(slots=True)
class Bench:
    key: str
    label: str
    argv: list[str]
    env: dict[str, str]
    target_s: float | None = None
    note: str = ""
    samples: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def status(self) -> Status:
        if self.failures:
            return "ERROR"
        if self.target_s is None:
            return "-"
        return "PASS" if self.median < self.target_s else "FAIL"


@dataclass(frozen=True, slots=True)
class SkyInfo:
    path: Path | None
    reason: str


# -- process running ----------------------------------------------------


def _display(argv: Sequence[str]) -> str:
    """A short, readable form of a command line (paths relative to the repo)."""
    parts: list[str] = []
    for arg in argv:
        shown = arg
        if arg == sys.executable:
            shown = "python"
        elif arg.startswith(str(ROOT) + os.sep):
            shown = os.path.relpath(arg, ROOT)
        parts.append(shown)
    return " ".join(parts)


def _run_once(bench: Bench, *, capture: bool) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    start = time.perf_counter()
    proc = subprocess.run(
        bench.argv, env=bench.env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out
    )
    return time.perf_counter() - start, proc


def _failure(proc: subprocess.CompletedProcess[bytes]) -> str:
    tail = (proc.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
    return f"exit {proc.returncode}" + (": " + " | ".join(tail) if tail else "")


def _warm_up(benches: Sequence[Bench], count: int) -> None:
    for bench in benches:
        for _ in range(count):
            _, proc = _run_once(bench, capture=True)
            if proc.returncode != 0:
                bench.failures.append(_failure(proc))
                break


def _measure(benches: Sequence[Bench], runs: int, progress: bool) -> None:
    live = [b for b in benches if not b.failures]
    for i in range(runs):
        if progress:
            sys.stderr.write(f"\rrun {i + 1}/{runs}")
            sys.stderr.flush()
        for bench in live:
            elapsed, proc = _run_once(bench, capture=False)
            if proc.returncode != 0:
                bench.failures.append(f"exit {proc.returncode} on timed run {i + 1}")
            bench.samples.append(elapsed)
    if progress:
        sys.stderr.write("\r" + " " * 20 + "\r")


def _relative_target(benches: Sequence[Bench]) -> None:
    """``submit --plan-only``'s target: 1.5x ``validate-spec`` of the same run (issue 19)."""
    by_key = {b.key: b for b in benches}
    validate, demo = by_key.get("validate_spec"), by_key.get("plan_only")
    if validate and demo and validate.samples and not validate.failures:
        demo.target_s = TARGET_PLAN_ONLY_X_VALIDATE * validate.median


# -- setup -----------------------------------------------------------------


def _find_npa() -> Path:
    candidate = Path(sys.executable).parent / "npa"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    raise SetupError(f"no npa console script next to {sys.executable}; run `make` first")


def _find_sky(env: Mapping[str, str]) -> SkyInfo:
    explicit = env.get("NPA_SKYPILOT_BIN", "")
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return SkyInfo(path, f"NPA_SKYPILOT_BIN={path}")
        return SkyInfo(None, f"NPA_SKYPILOT_BIN={explicit} is not an executable file")
    if DEFAULT_SKY.is_file() and os.access(DEFAULT_SKY, os.X_OK):
        return SkyInfo(DEFAULT_SKY, str(DEFAULT_SKY))
    return SkyInfo(None, f"NPA_SKYPILOT_BIN is unset and {DEFAULT_SKY} does not exist")


def _planned_steps(npa: Path, workflow: Path, env: Mapping[str, str]) -> int | None:
    proc = subprocess.run(
        [str(npa), "workbench", "workflow", "plan-spec", str(workflow), "--json"],
        env=dict(env),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    try:
        doc: Any = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    steps = doc.get("steps") if isinstance(doc, dict) else None
    return len(steps) if isinstance(steps, list) else None


def _pick_workflow(
    npa: Path, explicit: Path | None, env: Mapping[str, str]
) -> tuple[Path, dict[str, int | None]]:
    """The reference workflow with the most planned steps (or ``explicit``)."""
    candidates = [explicit] if explicit else sorted(WORKFLOW_DIR.glob("*.yaml"))
    if not candidates:
        raise SetupError(f"no reference workflows in {WORKFLOW_DIR}")
    counts = {str(p): _planned_steps(npa, p, env) for p in candidates}
    planned = [(n, p) for p, n in counts.items() if n is not None]
    if not planned:
        raise SetupError(
            "no reference workflow plans cleanly: "
            + ", ".join(_display([p]) for p in counts)
            + " (run `npa workbench workflow plan-spec FILE` to see why)"
        )
    best = max(planned, key=lambda item: item[0])[1]
    return Path(best), counts


def _build(
    args: argparse.Namespace, base_env: dict[str, str]
) -> tuple[list[Bench], SkyInfo, dict[str, Any]]:
    npa = _find_npa()
    py = sys.executable
    wf_env = dict(base_env)
    if args.workflow_catalog == "builtin":
        wf_env.pop("NPA_TOOL_CATALOG", None)
    workflow, counts = _pick_workflow(npa, args.workflow, wf_env)
    wf_rel = _display([str(workflow)])
    catalog_note = (
        "built-in catalog"
        if "NPA_TOOL_CATALOG" not in wf_env
        else f"catalog {wf_env['NPA_TOOL_CATALOG']}"
    )

    benches = [Bench("python", "python -c pass", [py, "-c", "pass"], dict(base_env))]
    sky = _find_sky(base_env)
    if sky.path is not None:
        benches.append(Bench("sky", "sky --help", [str(sky.path), "--help"], dict(base_env)))
    kubectl = shutil.which("kubectl", path=base_env.get("PATH"))
    if kubectl is not None:
        benches.append(
            Bench(
                "kubectl",
                "kubectl version --client",
                [kubectl, "version", "--client"],
                dict(base_env),
            )
        )
    home = Path(tempfile.mkdtemp(prefix="npa-bench-home-"))  # the plan-only runs' journal
    atexit.register(shutil.rmtree, home, True)
    demo_env = {**wf_env, "NPA_HOME": str(home)}
    benches += [
        Bench("npa_help", "npa --help", [str(npa), "--help"], dict(base_env), TARGET_HELP_S),
        Bench(
            "validate_spec",
            f"npa workbench workflow validate-spec {wf_rel}",
            [str(npa), "workbench", "workflow", "validate-spec", str(workflow)],
            wf_env,
            TARGET_VALIDATE_S,
            catalog_note,
        ),
        Bench(
            "plan_spec",
            f"npa workbench workflow plan-spec {wf_rel}",
            [str(npa), "workbench", "workflow", "plan-spec", str(workflow)],
            wf_env,
            None,
            catalog_note,
        ),
        Bench(
            "plan_only",
            f"npa workbench workflow submit {wf_rel} --plan-only --no-preflight-images",
            [
                str(npa),
                "workbench",
                "workflow",
                "submit",
                str(workflow),
                "--plan-only",
                "--no-preflight-images",
            ],
            demo_env,
            None,
            catalog_note + f"; target < {TARGET_PLAN_ONLY_X_VALIDATE}x validate-spec",
        ),
    ]
    corpus = base_env.get("NPA_SPEC_CORPUS", "")
    corpus_info: dict[str, Any] = {"dir": corpus or None, "catalog": None, "summary": None}
    if corpus:
        corpus_info["catalog"] = base_env.get("NPA_TOOL_CATALOG") or "built-in"
        driver = [py, str(BENCH_DIR / "corpus_driver.py")]
        corpus_info["summary"] = _corpus_summary(driver, base_env)
        n = corpus_info["summary"].get("specs", "?") if corpus_info["summary"] else "?"
        benches.append(
            Bench(
                "corpus",
                f"corpus: validate+plan {n} specs",
                driver,
                dict(base_env),
                TARGET_CORPUS_S,
                f"catalog {corpus_info['catalog']}",
            )
        )
    meta = {
        "reference_workflow": {
            "path": wf_rel,
            "catalog": catalog_note,
            "planned_steps": counts,
        },
        "corpus": corpus_info,
    }
    return benches, sky, meta


def _corpus_summary(driver: list[str], env: Mapping[str, str]) -> dict[str, Any] | None:
    proc = subprocess.run(
        driver, env=dict(env), cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    if proc.returncode != 0:
        return None
    try:
        doc: Any = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None
    return doc if isinstance(doc, dict) else None


def _machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# -- reporting ---------------------------------------------------------------


def _ratio(value: float | None, ref: float | None) -> float | None:
    if value is None or ref is None or ref <= 0:
        return None
    return value / ref


def _fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_x(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x"


def _rows(benches: Sequence[Bench]) -> list[dict[str, Any]]:
    refs = {b.key: b.median for b in benches if b.samples and not b.failures}
    rows: list[dict[str, Any]] = []
    for b in benches:
        ok = bool(b.samples) and not b.failures
        median = b.median if ok else None
        rows.append(
            {
                "key": b.key,
                "label": b.label,
                "command": _display(b.argv),
                "note": b.note,
                "runs": len(b.samples),
                "median_s": median,
                "min_s": min(b.samples) if ok else None,
                "max_s": max(b.samples) if ok else None,
                "mean_s": statistics.fmean(b.samples) if ok else None,
                "stdev_s": statistics.stdev(b.samples) if ok and len(b.samples) > 1 else None,
                "samples_s": [round(s, 6) for s in b.samples],
                "vs_python": _ratio(median, refs.get("python")),
                "vs_sky": _ratio(median, refs.get("sky")),
                "vs_kubectl": _ratio(median, refs.get("kubectl")),
                "vs_validate_spec": _ratio(median, refs.get("validate_spec")),
                "target_s": b.target_s,
                "status": b.status(),
                "failures": b.failures,
            }
        )
    return rows


def _target_text(row: Mapping[str, Any]) -> str:
    target = row["target_s"]
    return "-" if target is None else f"< {target:.3g} s"


def _text_table(rows: Sequence[Mapping[str, Any]], has_sky: bool) -> str:
    head = ["benchmark", "median s", "min s", "max s", "vs python"]
    if has_sky:
        head.append("vs sky")
    has_kubectl = any(r["key"] == "kubectl" for r in rows)
    if has_kubectl:
        head.append("vs kubectl")
    head += ["target", "result"]
    body: list[list[str]] = []
    for r in rows:
        line = [
            r["label"],
            _fmt_s(r["median_s"]),
            _fmt_s(r["min_s"]),
            _fmt_s(r["max_s"]),
            _fmt_x(r["vs_python"]),
        ]
        if has_sky:
            line.append(_fmt_x(r["vs_sky"]))
        if has_kubectl:
            line.append(_fmt_x(r["vs_kubectl"]))
        line += [_target_text(r), r["status"]]
        body.append(line)
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(head), rule, *(fmt(b) for b in body)])


def _markdown_table(rows: Sequence[Mapping[str, Any]], has_sky: bool) -> str:
    head = ["Benchmark", "Median (s)", "Min (s)", "Max (s)", "× `python -c pass`"]
    if has_sky:
        head.append("× `sky --help`")
    has_kubectl = any(r["key"] == "kubectl" for r in rows)
    if has_kubectl:
        head.append("× `kubectl version --client`")
    head += ["Target", "Result"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join([":---", *(["---:"] * (len(head) - 1))]) + "|",
    ]
    for r in rows:
        cells = [
            f"`{r['label']}`" if r["key"] != "corpus" else r["label"],
            _fmt_s(r["median_s"]),
            _fmt_s(r["min_s"]),
            _fmt_s(r["max_s"]),
            _fmt_x(r["vs_python"]),
        ]
        if has_sky:
            cells.append(_fmt_x(r["vs_sky"]))
        if has_kubectl:
            cells.append(_fmt_x(r["vs_kubectl"]))
        status = r["status"]
        cells += [_target_text(r), f"**{status}**" if status in ("PASS", "FAIL") else status]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _report(
    rows: Sequence[Mapping[str, Any]],
    sky: SkyInfo,
    machine: Mapping[str, Any],
    meta: Mapping[str, Any],
    runs: int,
    warmup: int,
) -> str:
    wf = meta["reference_workflow"]
    counts = ", ".join(
        f"{_display([p]).removeprefix('workflows/main/')}={'error' if n is None else n}"
        for p, n in wf["planned_steps"].items()
    )
    corpus = meta["corpus"]
    lines = [
        f"npa-infra benchmarks: {runs} timed run(s) per command after {warmup} warm-up run(s); "
        "each run is a fresh process",
        f"machine: nproc={machine['nproc']}  python {machine['python']}  "
        f"{machine['platform']}  {machine['date']}",
        f"bytecode: {meta['bytecode']}",
        f"reference workflow: {wf['path']} ({wf['catalog']}; planned steps: {counts})",
    ]
    if corpus["dir"]:
        summary = corpus["summary"] or {}
        lines.append(
            f"spec corpus: {corpus['dir']} (catalog {corpus['catalog']}; "
            f"{summary.get('specs', '?')} specs, {summary.get('planned', '?')} planned, "
            f"{summary.get('rejected', '?')} rejected, {summary.get('steps', '?')} steps)"
        )
    else:
        lines.append("spec corpus: NPA_SPEC_CORPUS is unset, corpus benchmark SKIPPED")
    if sky.path is not None:
        lines.append(f"sky: {sky.reason}")
    else:
        lines.append(f"sky: ABSENT, no `sky --help` reference ({sky.reason})")
    lines += ["", _text_table(rows, sky.path is not None)]
    for r in rows:
        for failure in r["failures"]:
            lines.append(f"ERROR {r['label']}: {failure}")
    return "\n".join(lines)


# -- entry point ---------------------------------------------------------------


def _child_env(mode: str, pycache: Path) -> tuple[dict[str, str], str]:
    """The environment every timed process gets, and a line describing its bytecode."""
    env = dict(os.environ)
    if mode == "env":
        writes = "off" if env.get("PYTHONDONTWRITEBYTECODE") else "on"
        return env, f"inherited from the environment (bytecode writing {writes})"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if env.get("PYTHONPYCACHEPREFIX"):
        return env, f"cached in PYTHONPYCACHEPREFIX={env['PYTHONPYCACHEPREFIX']} (caller's)"
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env, "cached .pyc in a private PYTHONPYCACHEPREFIX, filled by the warm-up run"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description="Time npa commands as whole processes (fresh interpreter per run).",
    )
    p.add_argument("--runs", type=_positive, default=15, help="timed runs per command (15)")
    p.add_argument("--warmup", type=_non_negative, default=1, help="warm-up runs per command (1)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write machine-readable results")
    p.add_argument(
        "--markdown", action="store_true", help="also print a markdown table for BENCHMARKS.md"
    )
    p.add_argument(
        "--workflow",
        type=Path,
        help="reference workflow (default: the workflows/main/*.yaml with most planned steps)",
    )
    p.add_argument(
        "--workflow-catalog",
        choices=("builtin", "env"),
        default="builtin",
        help="catalog for the reference workflow: the built-in tools it is written "
        "against (default) or NPA_TOOL_CATALOG from the environment",
    )
    p.add_argument(
        "--bytecode",
        choices=("cached", "env"),
        default="cached",
        help="cached (default): children may write bytecode, into a private "
        "PYTHONPYCACHEPREFIX, so timed runs import cached .pyc as an installed CLI "
        "does; env: children inherit the environment as is (e.g. PYTHONDONTWRITEBYTECODE)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workflow is not None:
        args.workflow = args.workflow.resolve()
    with tempfile.TemporaryDirectory(prefix="npa-bench-pycache-") as pycache:
        base_env, bytecode = _child_env(args.bytecode, Path(pycache))
        try:
            benches, sky, meta = _build(args, base_env)
        except SetupError as exc:
            sys.stderr.write(f"bench: {exc}\n")
            return 2
        meta["bytecode"] = bytecode
        _warm_up(benches, args.warmup)
        _measure(benches, args.runs, progress=not args.quiet and sys.stderr.isatty())
        _relative_target(benches)
    rows = _rows(benches)
    machine = _machine()
    print(_report(rows, sky, machine, meta, args.runs, args.warmup))
    passed = all(r["status"] in ("PASS", "-") for r in rows)
    checked = [r for r in rows if r["target_s"] is not None]
    print()
    for r in checked:
        print(
            f"{r['status']:5}  {r['label']}: median {_fmt_s(r['median_s'])} s"
            f" (target {_target_text(r)})"
        )
    if not meta["corpus"]["dir"]:
        print("SKIP   corpus < 1 s: NPA_SPEC_CORPUS is unset")
    print(f"overall: {'PASS' if passed else 'FAIL'}")
    if args.markdown:
        print()
        print(_markdown_table(rows, sky.path is not None))
    if args.json is not None:
        doc = {
            "machine": machine,
            "runs": args.runs,
            "warmup": args.warmup,
            "timer": "time.perf_counter around subprocess.run (whole process)",
            "sky": {
                "present": sky.path is not None,
                "path": str(sky.path or ""),
                "why": sky.reason,
            },
            **meta,
            "results": rows,
            "passed": passed,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
