"""Image preflight: checking 20 distinct images against 1, with network latency.

Issue 6's budget: checking 20 distinct images must cost less than twice the
wall time of checking one. The checks run concurrently (a bounded thread
pool over one pooled ``RegistryClient``), so with a per-request latency the
20 should take about as long as the one.

Set-up, all on loopback:

* the upstream is the real registry (Debian's ``docker-registry``, CNCF
  distribution 2.8.2, started with ``tests/support/registry``) with N images
  pushed over its API; ``--upstream stub`` (or no binary) uses a tiny stdlib
  stub that serves a fixed manifest with its correct digest instead;
* in front of it, a latency proxy (stdlib, threaded, listen backlog 128) that
  waits ``--latency-ms`` before forwarding each request: a slow link. The
  proxy and the stub run in a child process (this script with ``--serve``), so
  their Python work does not share the measured client's GIL, as a remote
  registry would not.

Each run builds a fresh client (a cold connection pool and token cache, like a
``preflight-images`` process) and calls ``preflight.images.check_images`` for
1 image, then for 20; ``--runs`` rounds are timed and the medians compared.
The output is a table (``--markdown`` for BENCHMARKS.md) and, with ``--json``,
every sample. Exit status: 0 when the ratio is under 2, 1 when it is not or a
check is not ``ok``, 2 on a set-up problem.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from npa_infra.registry.client import RegistryClient  # noqa: E402  (after the path setup)
from preflight.images import check_images  # noqa: E402
from preflight.targets import ImageTarget  # noqa: E402

__all__ = ["main"]

TARGET_RATIO = 2.0
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's default of 5 drops a burst of 20 connections


def _serve(handler: type[BaseHTTPRequestHandler]) -> _Server:
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    ).start()
    return server


def _stub_upstream() -> tuple[_Server, Callable[[str], None]]:
    """A registry stub: any ``/v2/<repo>/manifests/<tag>`` is one OCI manifest."""
    body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": "sha256:" + "0" * 64,
                "size": 2,
            },
            "layers": [],
        },
        indent=2,
    ).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # no 40 ms Nagle + delayed-ACK stall on keep-alive

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Docker-Content-Digest", digest)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return _serve(Handler), lambda repository: None


def _real_upstream(tmp: Path) -> tuple[Any, Callable[[str], None]]:
    """The real registry (``tests/support/registry``) and a function pushing ``<repo>:v1``."""
    from tests.support.registry import server

    registry = server.start_plain(tmp / "registry")

    def push(repository: str) -> None:
        registry.push(repository, "v1")

    return registry, push


def _latency_proxy(upstream_port: int, latency: float) -> _Server:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # no 40 ms Nagle + delayed-ACK stall on keep-alive

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            time.sleep(latency)
            connection = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                connection.request("GET", self.path, headers=headers)
                response = connection.getresponse()
                data = response.read()
            finally:
                connection.close()
            self.send_response_only(response.status)
            for name, value in response.getheaders():
                if name.lower() not in _HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return _serve(Handler)


def _timed(targets: list[ImageTarget]) -> float:
    with RegistryClient() as client:
        start = time.perf_counter()
        report = check_images(targets, client)
        elapsed = time.perf_counter() - start
    bad = [row for row in report.rows if row.status != "ok"]
    if bad:
        raise RuntimeError(f"{bad[0].image}: {bad[0].status} {bad[0].detail}")
    return elapsed


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--images", type=int, default=20, help="distinct images in the many case (20)")
    p.add_argument("--latency-ms", type=float, default=50.0, help="added per request (50)")
    p.add_argument("--runs", type=int, default=7, help="timed rounds (7)")
    p.add_argument("--upstream", choices=("auto", "real", "stub"), default="auto")
    p.add_argument("--json", type=Path, metavar="PATH", help="write every sample as JSON")
    p.add_argument("--markdown", action="store_true", help="also print a markdown table")
    p.add_argument("--serve", type=int, metavar="UPSTREAM_PORT", help=argparse.SUPPRESS)
    return p


def _serve_child(upstream_port: int, latency_ms: float) -> int:
    """``--serve``: a stub upstream when the port is 0, the latency proxy; port on stdout."""
    stub = None
    if upstream_port == 0:
        stub, _ = _stub_upstream()
        upstream_port = int(stub.server_address[1])
    proxy = _latency_proxy(upstream_port, latency_ms / 1000)
    sys.stdout.write(f"{proxy.server_address[1]}\n")
    sys.stdout.flush()
    sys.stdin.read()  # serve until the parent closes our stdin
    proxy.shutdown()
    if stub is not None:
        stub.shutdown()
    return 0


def _start_child(upstream_port: int, latency_ms: float) -> tuple[subprocess.Popen[str], int]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(upstream_port), "--latency-ms", str(latency_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, int(child.stdout.readline())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.serve is not None:
        return _serve_child(args.serve, args.latency_ms)
    with tempfile.TemporaryDirectory(prefix="npa-preflight-bench-") as tmp:
        registry: Any = None
        kind = args.upstream
        if kind in ("auto", "real"):
            try:
                registry, push = _real_upstream(Path(tmp))
                kind = "real"
            except Exception as exc:  # a missing docker-registry: fall back unless forced
                if kind == "real":
                    sys.stderr.write(f"preflight_bench: cannot start the registry: {exc}\n")
                    return 2
                kind = "stub"
        repositories = [f"bench/image{n}" for n in range(args.images)]
        if registry is not None:
            for repository in repositories:
                push(repository)
        child, port = _start_child(registry.port if registry is not None else 0, args.latency_ms)
        front = f"127.0.0.1:{port}"
        one = [ImageTarget(f"{front}/{repositories[0]}:v1", ("s",))]
        many = [ImageTarget(f"{front}/{r}:v1", ("s",)) for r in repositories]
        try:
            _timed(one), _timed(many)  # warm-up: imports, the plain-HTTP fallback path
            samples_one, samples_many = [], []
            for _ in range(args.runs):
                samples_one.append(_timed(one))
                samples_many.append(_timed(many))
        except RuntimeError as exc:
            sys.stderr.write(f"preflight_bench: a check failed: {exc}\n")
            return 1
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=10)
            if registry is not None:
                registry.stop()
    med_one, med_many = statistics.median(samples_one), statistics.median(samples_many)
    ratio = med_many / med_one
    verdict = "PASS" if ratio < TARGET_RATIO else "FAIL"
    rows = [
        ("1 image", med_one, min(samples_one), max(samples_one)),
        (f"{args.images} distinct images", med_many, min(samples_many), max(samples_many)),
    ]
    print(f"upstream: {kind}; latency {args.latency_ms:g} ms per request; {args.runs} runs")
    for name, med, lo, hi in rows:
        print(f"{name:<22} median {med:.3f} s  (min {lo:.3f}, max {hi:.3f})")
    print(f"ratio {ratio:.2f}x (target < {TARGET_RATIO:g}x): {verdict}")
    if args.markdown:
        print()
        print("| Benchmark | Median (s) | Min (s) | Max (s) | × 1 image | Target | Result |")
        print("|:---|---:|---:|---:|---:|---:|---:|")
        print(
            f"| preflight, 1 image | {med_one:.3f} | {rows[0][2]:.3f} | {rows[0][3]:.3f} | 1.00x | - | - |"
        )
        print(
            f"| preflight, {args.images} distinct images | {med_many:.3f} | {rows[1][2]:.3f} | "
            f"{rows[1][3]:.3f} | {ratio:.2f}x | < {TARGET_RATIO:g}x | **{verdict}** |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "upstream": kind,
                    "latency_ms": args.latency_ms,
                    "images": args.images,
                    "one": samples_one,
                    "many": samples_many,
                    "ratio": ratio,
                    "verdict": verdict,
                    "python": platform.python_version(),
                },
                indent=2,
            )
            + "\n"
        )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
