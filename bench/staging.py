"""Source staging benchmark: fingerprint-and-reuse of a 10,000-file tree, and upload throughput.

One generated tree (``--files`` files, default 10,000, in a fresh git repository
with every file untracked, so the listing is the real ``git ls-files --others``
path), one moto S3 server on loopback (its own process), and these measurements in the same run:

* ``raw``: read every selected file and sha256 it, one thread: the floor any
  fingerprint or upload is compared against;
* ``scan``: ``tree.scan``: list, select, and fingerprint (the §6 byte format);
* ``reuse``: ``sourcing.stage_src`` (what ``stage-src`` calls) against a prefix
  already staged, with a fresh ``BotoStore``: the scan, building the boto3
  client (overlapped with the scan on a thread) and the marker GET.
  Targets: under 1 s, and exactly one S3 request;
* ``reuse, sequential``: the same with the client built after the scan, for
  comparison (no target);
* ``stage``: a cold ``stage_source`` into an empty bucket (8 workers), reported
  as throughput against ``raw``; ``moto PUT floor`` times 500 sequential
  ``put_object`` calls of a plain boto3 client, to show what the server allows.

Every measurement runs ``--runs`` times (after one warm-up) and reports the
median. ``npa workbench workflow stage-src`` as a whole process (interpreter,
imports, boto3, the scan and the reuse GET) is timed too, for reference.

Run ``.venv/bin/python bench/staging.py`` (``make bench`` runs it after
``bench/run.py``). Exit status 0 when both reuse targets hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from npa_infra.source import staging, tree  # noqa: E402  # after the sys.path line: run as a script
from npa_infra.storage.s3 import BotoStore  # noqa: E402  # same
from npa_infra.workflow.submission import sourcing  # noqa: E402  # same
from npa_infra.workflow.target.services import Services  # noqa: E402  # same

__all__ = ["main"]

BUCKET = "npa-bench"
PREFIX = "npa-src/npa"
TARGET_REUSE_S = 1.0
_FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def build_tree(root: Path, files: int, seed: int) -> None:
    """``files`` files in 100-file directories: mostly small, a long tail, 10% executable."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for i in range(files):
        folder = root / f"pkg{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        size = min(int(rng.paretovariate(1.2) * 600), 512 * 1024)
        path = folder / f"mod{i:05d}.py"
        path.write_bytes(rng.randbytes(size))
        if i % 10 == 0:
            path.chmod(0o755)
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=True)


def raw_read_and_hash(root: Path, paths: list[str]) -> int:
    total = 0
    for path in paths:
        with open(root / path, "rb") as handle:
            data = handle.read()
        hashlib.sha256(data).hexdigest()
        total += len(data)
    return total


def timed(
    fn: Callable[[], Any],
    runs: int,
    before: Callable[[], None] | None = None,
    *,
    warmup: bool = True,
) -> list[float]:
    """``runs`` timings of ``fn`` (``before`` runs untimed ahead of each), after one warm-up."""
    samples: list[float] = []
    for i in range(runs + int(warmup)):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        if i or not warmup:
            samples.append(elapsed)
    return samples


class Moto:
    """moto's S3 server in its own process on a free loopback port.

    Its own process, not ``ThreadedMotoServer``: a server sharing this process's
    GIL would slow both the scan and the uploads being measured.
    """

    def __init__(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2) as answer:
                    answer.read()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise SystemExit("moto server did not start") from None
                time.sleep(0.2)

    def reset_with_bucket(self) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        BotoStore.create(endpoint_url=self.endpoint)._s3().create_bucket(Bucket=BUCKET)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _moto_puts(endpoint: str, count: int) -> None:
    client = BotoStore.create(endpoint_url=endpoint)._s3()
    for i in range(count):
        client.put_object(Bucket=BUCKET, Key=f"floor/{i}", Body=b"x" * 2048)


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.update(_FAKE_AWS)
    os.environ["NPA_HOME"] = tempfile.mkdtemp(prefix="npa-stage-bench-home-")  # saved URIs
    work = Path(tempfile.mkdtemp(prefix="npa-stage-bench-"))
    root = work / "tree"
    build_tree(root, args.files, args.seed)
    moto = Moto()
    try:
        moto.reset_with_bucket()
        scanned = tree.scan(root)
        paths = [f.path for f in scanned.files]

        raw = timed(lambda: raw_read_and_hash(root, paths), args.runs)
        scan = timed(lambda: tree.scan(root), args.runs)

        def stage_cold() -> None:
            store = BotoStore.create(endpoint_url=moto.endpoint)
            result = staging.stage_source(root, BUCKET, PREFIX, store=store)
            assert not result.reused

        # No warm-up: a cold staging of 10,000 files into moto takes minutes.
        stage = timed(stage_cold, args.stage_runs, before=moto.reset_with_bucket, warmup=False)

        floor = timed(lambda: _moto_puts(moto.endpoint, 500), 1, warmup=False)
        requests: list[int] = []

        def reuse() -> None:
            store = BotoStore.create(endpoint_url=moto.endpoint)
            result = sourcing.stage_src(
                root,
                bucket=BUCKET,
                prefix=PREFIX,
                services=Services(store=lambda _endpoint: store),
            )
            assert result.reused
            requests.append(store.request_count)

        def reuse_sequential() -> None:
            store = BotoStore.create(endpoint_url=moto.endpoint)
            result = staging.stage_source(
                root, BUCKET, PREFIX, store=store, scanned=tree.scan(root)
            )
            assert result.reused and store.request_count == 1

        reuse_samples = timed(reuse, args.runs)
        sequential = timed(reuse_sequential, args.runs)
        cli = _time_cli(root, moto.endpoint, args.runs)
    finally:
        moto.stop()
    megabytes = scanned.total_bytes / 1e6
    raw_s, scan_s, stage_s = (statistics.median(x) for x in (raw, scan, stage))
    reuse_s = statistics.median(reuse_samples)
    floor_files_s = 500 / statistics.median(floor)
    return {
        "tree": {
            "files": scanned.file_count,
            "bytes": scanned.total_bytes,
            "listing": scanned.listing,
            "fingerprint": scanned.fingerprint,
        },
        "raw_s": raw_s,
        "scan_s": scan_s,
        "stage_s": stage_s,
        "reuse_s": reuse_s,
        "reuse_sequential_s": statistics.median(sequential),
        "moto_put_floor_files_s": floor_files_s,
        "cli_reuse_s": statistics.median(cli) if cli else None,
        "reuse_requests": sorted(set(requests)),
        "raw_mb_s": megabytes / raw_s,
        "scan_mb_s": megabytes / scan_s,
        "stage_mb_s": megabytes / stage_s,
        "stage_files_s": scanned.file_count / stage_s,
        "scan_vs_raw": scan_s / raw_s,
        "stage_vs_raw_throughput": (megabytes / stage_s) / (megabytes / raw_s),
        "samples": {
            "raw": raw,
            "scan": scan,
            "stage": stage,
            "reuse": reuse_samples,
            "reuse_sequential": sequential,
            "cli": cli,
        },
        "targets": {
            "reuse_under_s": TARGET_REUSE_S,
            "reuse_pass": reuse_s < TARGET_REUSE_S,
            "one_request_pass": set(requests) == {1},
        },
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "runs": args.runs,
        "stage_runs": args.stage_runs,
    }


def _time_cli(root: Path, endpoint: str, runs: int) -> list[float]:
    npa = Path(sys.executable).parent / "npa"
    if not npa.is_file():
        return []
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint}
    env["NPA_HOME"] = tempfile.mkdtemp(prefix="npa-stage-bench-home-")
    argv = [str(npa), "workbench", "workflow", "stage-src", "--source", str(root)]
    argv += ["--bucket", BUCKET, "--json"]

    def once() -> None:
        proc = subprocess.run(argv, env=env, capture_output=True, check=False)
        if proc.returncode != 0 or not json.loads(proc.stdout)["reused"]:
            raise SystemExit(f"stage-src failed: {proc.stderr.decode()[-500:]}")

    return timed(once, runs)


def markdown(r: dict[str, Any]) -> str:
    t = r["tree"]
    rows = [
        (
            "raw read + sha256 per file (1 thread)",
            r["raw_s"],
            f"{r['raw_mb_s']:.0f} MB/s",
            "1.00x",
            "-",
        ),
        (
            "`tree.scan` (git ls-files, select, fingerprint)",
            r["scan_s"],
            f"{r['scan_mb_s']:.0f} MB/s",
            f"{r['scan_vs_raw']:.2f}x time",
            "-",
        ),
        (
            "reuse: `stage_src` = scan + client + marker GET",
            r["reuse_s"],
            f"{r['reuse_requests']} request(s)",
            f"{r['reuse_s'] / r['raw_s']:.2f}x time",
            f"< {TARGET_REUSE_S:g} s, 1 request: **{'PASS' if r['targets']['reuse_pass'] and r['targets']['one_request_pass'] else 'FAIL'}**",
        ),
        (
            "reuse, client built after the scan",
            r["reuse_sequential_s"],
            "1 request",
            f"{r['reuse_sequential_s'] / r['raw_s']:.2f}x time",
            "-",
        ),
        (
            "cold stage to moto (8 workers)",
            r["stage_s"],
            f"{r['stage_mb_s']:.1f} MB/s, {r['stage_files_s']:.0f} files/s",
            f"{r['stage_vs_raw_throughput']:.3f}x throughput",
            "-",
        ),
        (
            "moto PUT floor: 500 sequential `put_object`",
            500 / r["moto_put_floor_files_s"],
            f"{r['moto_put_floor_files_s']:.0f} files/s",
            "-",
            "-",
        ),
    ]
    if r["cli_reuse_s"] is not None:
        rows.append(
            ("`npa … stage-src --json` whole process, reused", r["cli_reuse_s"], "-", "-", "-")
        )
    lines = [
        f"Tree: {t['files']} files, {t['bytes'] / 1e6:.1f} MB, listed by {t['listing']}.",
        "",
        "| Measurement | Median (s) | Rate | vs raw | Target |",
        "|:---|---:|---:|---:|---:|",
    ]
    lines += [f"| {a} | {b:.3f} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=10_000, help="files in the tree (10000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of the fast steps (5)")
    parser.add_argument("--stage-runs", type=int, default=1, help="timed cold stagings (1)")
    parser.add_argument("--seed", type=int, default=7, help="tree generator seed (7)")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    result = run(args)
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    targets = result["targets"]
    return 0 if targets["reuse_pass"] and targets["one_request_pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
