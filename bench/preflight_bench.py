"""Image preflight: checking 20 distinct images against 1, over a slow link.

Issue 6's budget: checking 20 distinct images must cost less than twice the
wall time of checking one. The checks run concurrently (a bounded thread
pool over one pooled ``RegistryClient``), so the 20 should wait for the
network about as long as the one; what is left is CPU.

The "remote side" runs in a child process (this script with ``--serve``), so
none of its Python work shares the measured client's GIL, as a remote
registry's would not:

* the upstream is the real registry (Debian's ``docker-registry``, CNCF
  distribution 2.8.2, from ``tests/support/registry``) with N images pushed
  over its API, in one of two modes:
  - ``plain``: HTTP, anonymous (a loopback registry: the client first tries
    TLS once, then speaks plain HTTP);
  - ``token``: HTTPS with the test CA and Bearer token auth; the images are
    private (``team/...``), so each check is the full flow a private cloud
    registry costs: manifest 401, an anonymous token, manifest 401, a token
    bought with the credential, manifest 200;
  ``--upstream stub`` (or no ``docker-registry``) uses a stdlib stub serving
  one manifest over plain HTTP instead;
* in front of every upstream endpoint (the registry and its token realm), a
  TCP delay line: each chunk is delivered ``latency/2`` after it was read, in
  each direction, and the first bytes of a connection wait one extra round
  trip for the TCP handshake. So every round trip, TCP, TLS and HTTP alike,
  costs ``--latency-ms`` as on a real link (netem-like; bandwidth is not
  limited).

Each run builds a fresh client (a cold connection pool and token cache, like
a ``preflight-images`` process) and calls ``preflight.images.check_images``
for 1 image, then for 20; ``--runs`` rounds are timed, round-robin, and the
medians compared. The output is a table (``--markdown`` for BENCHMARKS.md)
and, with ``--json``, every sample. Exit status: 0 when the ratio is under 2,
1 when it is not or a check is not ``ok``, 2 on a set-up problem.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from npa_infra.registry.client import RegistryClient  # noqa: E402  (after the path setup)
from npa_infra.registry.credentials import Credential  # noqa: E402
from preflight.images import check_images  # noqa: E402
from preflight.targets import ImageTarget  # noqa: E402

__all__ = ["main"]

TARGET_RATIO = 2.0
TAG = "v1"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's default of 5 drops a burst of 20 connections


def _stub_upstream() -> _Server:
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

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    ).start()
    return server


class DelayLine:
    """A TCP proxy that delays every chunk by ``one_way`` seconds in each direction.

    The listener is bound at construction (its port is known before the
    upstream exists, so a token realm can name it); ``connect_to`` sets the
    upstream. The first client bytes of each connection also wait one round
    trip, the TCP handshake a loopback ``connect`` does not pay.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, one_way: float) -> None:
        self.loop = loop
        self.one_way = one_way
        self.upstream: tuple[str, int] | None = None
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0, backlog=256), loop
        ).result()
        self.port = int(self.server.sockets[0].getsockname()[1])

    def connect_to(self, host: str, port: int) -> None:
        self.upstream = (host, port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.upstream is not None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            await asyncio.gather(
                self._pump(reader, up_writer, handshake=2 * self.one_way),
                self._pump(up_reader, writer, handshake=0.0),
                return_exceptions=True,
            )
            up_writer.close()
        except (asyncio.CancelledError, OSError):
            pass  # shutdown cancels open connections; asyncio would log a cancelled handler
        writer.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, handshake: float
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        delivery = asyncio.ensure_future(deliver())
        extra = handshake
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((self.loop.time() + self.one_way + extra, data))
                extra = 0.0
                if not data:
                    break
        except OSError:
            queue.put_nowait((self.loop.time(), b""))
        await delivery


@dataclass(frozen=True)
class Remote:
    """What the child serves: the registry's front address, its CA, and the images."""

    registry: str
    ca_path: str | None
    repositories: list[str]
    username: str | None
    password: str | None


def _serve_child(args: argparse.Namespace) -> int:
    """``--serve``: upstream plus delay lines; one JSON line on stdout; serve until stdin closes."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    one_way = args.latency_ms / 2000
    front = DelayLine(loop, one_way)
    realm = DelayLine(loop, one_way)
    with tempfile.TemporaryDirectory(prefix="npa-preflight-bench-") as tmp:
        registry: Any = None
        stub: _Server | None = None
        user: str | None = None
        password: str | None = None
        if args.upstream == "stub":
            stub = _stub_upstream()
            repositories = [f"bench/image{n}" for n in range(args.images)]
            front.connect_to("127.0.0.1", int(stub.server_address[1]))
            remote = Remote(f"127.0.0.1:{front.port}", None, repositories, None, None)
        else:
            from tests.support.registry import server
            from tests.support.registry.pki import Pki

            if args.mode == "token":
                pki = Pki.generate(Path(tmp) / "pki")
                registry = server.start_token(Path(tmp) / "registry", pki, realm_port=realm.port)
                assert registry.issuer is not None
                realm.connect_to("127.0.0.1", registry.issuer.port)
                repositories = [f"team/bench-image{n}" for n in range(args.images)]
                user, password = "alice", registry.users["alice"]
            else:
                registry = server.start_plain(Path(tmp) / "registry")
                repositories = [f"bench/image{n}" for n in range(args.images)]
            for repository in repositories:
                registry.push(repository, TAG, kind="oci-manifest")
            front.connect_to("127.0.0.1", registry.port)
            ca = str(registry.ca_path) if registry.ca_path else None
            remote = Remote(f"127.0.0.1:{front.port}", ca, repositories, user, password)
        sys.stdout.write(json.dumps(remote.__dict__) + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # serve until the parent closes our stdin
        if registry is not None:
            registry.stop()
        if stub is not None:
            stub.shutdown()
    asyncio.run_coroutine_threadsafe(_shutdown(front, realm), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    return 0


async def _shutdown(*lines: DelayLine) -> None:
    """Close the listeners and cancel every open connection's pumps (no pending-task noise)."""
    for line in lines:
        line.server.close()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _start_child(args: argparse.Namespace, upstream: str) -> tuple[subprocess.Popen[str], Remote]:
    argv = [sys.executable, __file__, "--serve", "--upstream", upstream]
    argv += [
        "--mode",
        args.mode,
        "--images",
        str(args.images),
        "--latency-ms",
        str(args.latency_ms),
    ]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        child.wait(timeout=30)
        raise RuntimeError(f"the serving child exited with {child.returncode}")
    return child, Remote(**json.loads(line))


def _client(remote: Remote) -> RegistryClient:
    credentials = []
    if remote.username and remote.password:
        server = remote.registry
        credentials.append(Credential(server, remote.username, SecretStr(remote.password), "bench"))
    return RegistryClient(credentials=credentials, verify=remote.ca_path or True)


def _timed(remote: Remote, targets: list[ImageTarget]) -> float:
    with _client(remote) as client:
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
    p.add_argument("--latency-ms", type=float, default=50.0, help="round-trip time added (50)")
    p.add_argument("--runs", type=int, default=7, help="timed rounds (7)")
    p.add_argument("--mode", choices=("plain", "token"), default="token", help="registry mode")
    p.add_argument("--upstream", choices=("auto", "real", "stub"), default="auto")
    p.add_argument("--json", type=Path, metavar="PATH", help="write every sample as JSON")
    p.add_argument("--markdown", action="store_true", help="also print a markdown table")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return p


def _measure(args: argparse.Namespace) -> tuple[str, list[float], list[float]]:
    """Start the remote side, warm up, then ``--runs`` rounds of (1 image, N images)."""
    kinds = {"auto": ["real", "stub"], "real": ["real"], "stub": ["stub"]}[args.upstream]
    failure = ""
    for kind in kinds:
        try:
            child, remote = _start_child(args, kind)
        except (RuntimeError, OSError, ValueError) as exc:
            failure = str(exc)
            continue
        try:
            one = [ImageTarget(f"{remote.registry}/{remote.repositories[0]}:{TAG}", ("s",))]
            many = [
                ImageTarget(f"{remote.registry}/{r}:{TAG}", ("s",)) for r in remote.repositories
            ]
            _timed(remote, one), _timed(remote, many)  # warm-up: imports, TLS, the first pool
            samples_one, samples_many = [], []
            for _ in range(args.runs):
                samples_one.append(_timed(remote, one))
                samples_many.append(_timed(remote, many))
            return kind, samples_one, samples_many
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
    raise RuntimeError(f"cannot start the remote side: {failure}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.serve:
        return _serve_child(args)
    if args.upstream == "stub" and args.mode == "token":
        sys.stderr.write("preflight_bench: the stub serves plain HTTP only; use --mode plain\n")
        return 2
    try:
        kind, samples_one, samples_many = _measure(args)
    except RuntimeError as exc:
        sys.stderr.write(f"preflight_bench: {exc}\n")
        return 2 if "remote side" in str(exc) else 1
    med_one, med_many = statistics.median(samples_one), statistics.median(samples_many)
    ratio = med_many / med_one
    verdict = "PASS" if ratio < TARGET_RATIO else "FAIL"
    mode = "plain" if kind == "stub" else args.mode
    label = f"{kind} registry, {mode}, {args.latency_ms:g} ms RTT"
    rows = [
        ("1 image", med_one, min(samples_one), max(samples_one)),
        (f"{args.images} distinct images", med_many, min(samples_many), max(samples_many)),
    ]
    print(f"upstream: {label}; {args.runs} runs")
    for name, med, lo, hi in rows:
        print(f"{name:<22} median {med:.3f} s  (min {lo:.3f}, max {hi:.3f})")
    print(f"ratio {ratio:.2f}x (target < {TARGET_RATIO:g}x): {verdict}")
    if args.markdown:
        print()
        print("| Benchmark | Median (s) | Min (s) | Max (s) | × 1 image | Target | Result |")
        print("|:---|---:|---:|---:|---:|---:|---:|")
        print(
            f"| {label}: 1 image | {med_one:.3f} | {rows[0][2]:.3f} | {rows[0][3]:.3f} | 1.00x | - | - |"
        )
        print(
            f"| {label}: {args.images} distinct images | {med_many:.3f} | {rows[1][2]:.3f} | "
            f"{rows[1][3]:.3f} | {ratio:.2f}x | < {TARGET_RATIO:g}x | **{verdict}** |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "upstream": kind,
                    "mode": mode,
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
