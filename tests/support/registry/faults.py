"""A fault-injecting loopback proxy in front of a real test registry.

The real registry cannot rate-limit, redirect or lie about digests, so this
proxy forwards every request to it unchanged (``Host`` kept, with
``X-Forwarded-Proto``, so upload ``Location``s point back at the proxy) unless
a ``Fault`` matches. It records every request it receives, with its
``Authorization``, so tests can see where credentials went.

It listens on three origins:

- ``base_url``: the front, ``127.0.0.1``, HTTPS when the upstream is;
- ``other_url``: the same scheme on ``localhost`` (another origin and host);
- ``downgrade_url``: plain HTTP on ``localhost`` (an HTTPS downgrade target).

Faults (first match wins; ``times`` bounds how often one fires, None: always):

- ``respond``: a canned status, headers and body, e.g. 429 with ``Retry-After``
  (``rate_limit``), 403 ``DENIED``, 5xx, malformed JSON;
- ``redirect``: 307 (or ``status``) to the same path and query on ``other`` or
  ``downgrade``;
- ``mismatch_digest``: forward, then break the manifest answer: ``header``
  replaces ``Docker-Content-Digest`` with another digest, ``body`` appends a
  byte to the body and keeps the header;
- ``drop``: close the connection without an answer;
- ``delay``: wait ``seconds`` before forwarding (a timeout test); ``stop()``
  cuts the wait short.

Faults match only on the origin they name (``front`` by default), by method
and a regular expression searched in the path.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from tests.support.registry.listener import LoopbackServer, server_tls_context
from tests.support.registry.push import digest_of

__all__ = ["Fault", "FaultKind", "FaultProxy", "Origin", "ProxyRequest"]

FaultKind = Literal["respond", "redirect", "mismatch_digest", "drop", "delay"]
Origin = Literal["front", "other", "downgrade"]
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
}


@dataclass
class Fault:
    """One injected behaviour; see the module docstring for the kinds."""

    kind: FaultKind
    path: str = ""  # regex searched in the request path ("" matches all)
    method: str | None = None  # None: any method
    origin: Origin = "front"
    times: int | None = None  # None: every match
    status: int = 307
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    target: Literal["other", "downgrade"] = "other"
    how: Literal["header", "body"] = "header"
    seconds: float = 0.0
    fired: int = 0

    def matches(self, origin: Origin, method: str, path: str) -> bool:
        if self.origin != origin or (self.method is not None and self.method != method):
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        return re.search(self.path, path) is not None


@dataclass(frozen=True)
class ProxyRequest:
    """A request as the proxy received it, and the status it answered (None: dropped)."""

    origin: Origin
    method: str
    path: str
    query: str
    authorization: str | None
    headers: dict[str, str]
    status: int | None
    fault: FaultKind | None


@dataclass
class FaultProxy:
    """A started proxy (``start``); add faults, read ``requests``, ``stop()`` at the end."""

    upstream_port: int
    upstream_tls: ssl.SSLContext | None = field(repr=False)
    faults: list[Fault] = field(default_factory=list)
    _requests: list[ProxyRequest] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _servers: dict[Origin, LoopbackServer] = field(default_factory=dict, repr=False)

    @classmethod
    def start(
        cls,
        upstream_port: int,
        *,
        upstream_ca: Path | None,
        cert_files: tuple[Path, Path] | None,
    ) -> FaultProxy:
        """Proxy ``127.0.0.1:<upstream_port>`` (HTTPS when ``upstream_ca`` is given).

        ``cert_files`` (certificate, key) serve the front and ``other`` over
        TLS; without them every origin is plain HTTP.
        """
        upstream_tls = None
        if upstream_ca is not None:
            upstream_tls = ssl.create_default_context(cafile=str(upstream_ca))
        proxy = cls(upstream_port=upstream_port, upstream_tls=upstream_tls)
        tls = server_tls_context(*cert_files) if cert_files is not None else None
        origins: dict[Origin, ssl.SSLContext | None] = {
            "front": tls,
            "other": tls,
            "downgrade": None,
        }
        for origin, context in origins.items():
            handler = type(f"_Proxy_{origin}", (_ProxyHandler,), {"proxy": proxy, "origin": origin})
            proxy._servers[origin] = LoopbackServer(handler, context)
        return proxy

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._servers['front'].port}"

    @property
    def base_url(self) -> str:
        return self._servers["front"].url()

    @property
    def other_url(self) -> str:
        return self._servers["other"].url("localhost")

    @property
    def downgrade_url(self) -> str:
        return self._servers["downgrade"].url("localhost")

    def url_of(self, origin: Origin) -> str:
        return {"front": self.base_url, "other": self.other_url, "downgrade": self.downgrade_url}[
            origin
        ]

    @property
    def requests(self) -> list[ProxyRequest]:
        """Every request received on any origin, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def rate_limit(
        self, path: str = "/manifests/", *, retry_after: str = "7", times: int | None = None
    ) -> Fault:
        """429 ``TOOMANYREQUESTS`` with ``Retry-After``."""
        body = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"rate limited"}]}'
        return self.add(
            Fault(
                "respond",
                path=path,
                times=times,
                status=429,
                headers={"Retry-After": retry_after, "Content-Type": "application/json"},
                body=body,
            )
        )

    def respond(
        self,
        path: str,
        status: int,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        times: int | None = None,
    ) -> Fault:
        return self.add(
            Fault(
                "respond", path=path, times=times, status=status, headers=headers or {}, body=body
            )
        )

    def redirect(
        self,
        path: str = "/manifests/",
        *,
        target: Literal["other", "downgrade"] = "other",
        status: int = 307,
        times: int | None = None,
    ) -> Fault:
        return self.add(Fault("redirect", path=path, times=times, status=status, target=target))

    def mismatch_digest(
        self, path: str = "/manifests/", *, how: Literal["header", "body"] = "header"
    ) -> Fault:
        return self.add(Fault("mismatch_digest", path=path, how=how))

    def drop(self, path: str = "", *, times: int | None = None) -> Fault:
        return self.add(Fault("drop", path=path, times=times))

    def delay(self, path: str = "", *, seconds: float, times: int | None = None) -> Fault:
        return self.add(Fault("delay", path=path, times=times, seconds=seconds))

    def clear(self) -> None:
        """Remove every fault and forget recorded requests."""
        with self._lock:
            self.faults.clear()
            self._requests.clear()

    def stop(self) -> None:
        self._stopping.set()
        for server in self._servers.values():
            server.stop()
        self._servers.clear()

    def _take(self, origin: Origin, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(origin, method, path):
                    fault.fired += 1
                    return fault
        return None

    def _record(self, record: ProxyRequest) -> None:
        with self._lock:
            self._requests.append(record)

    def _forward(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection: http.client.HTTPConnection
        if self.upstream_tls is None:
            connection = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        else:
            connection = http.client.HTTPSConnection(
                "127.0.0.1", self.upstream_port, timeout=30, context=self.upstream_tls
            )
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, response.getheaders(), data
        finally:
            connection.close()


class _ProxyHandler(BaseHTTPRequestHandler):
    proxy: FaultProxy  # bound per listener by ``FaultProxy.start``
    origin: Origin
    _fault: Fault | None = None
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: ``FaultProxy.requests`` is the log."""

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.proxy._take(self.origin, self.command, url.path)
        self._fault = fault
        if fault is not None and fault.kind == "drop":
            self._log(None)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif fault is not None and fault.kind == "respond":
            self._send(fault.status, list(fault.headers.items()), fault.body)
        elif fault is not None and fault.kind == "redirect":
            location = self.proxy.url_of(fault.target) + self.path
            self._send(fault.status, [("Location", location)], b"")
        else:
            if fault is not None and fault.kind == "delay":
                self.proxy._stopping.wait(fault.seconds)
            self._relay(body, fault)

    def _log(self, status: int | None) -> None:
        """Record the request before its answer leaves: a client that has the answer sees it."""
        url = urlsplit(self.path)
        fault = self._fault
        self.proxy._record(
            ProxyRequest(
                origin=self.origin,
                method=self.command,
                path=url.path,
                query=url.query,
                authorization=self.headers.get("Authorization"),
                headers={k: v for k, v in self.headers.items()},
                status=status,
                fault=fault.kind if fault is not None else None,
            )
        )

    def _relay(self, body: bytes, fault: Fault | None) -> int:
        server = self.server
        assert isinstance(server, LoopbackServer)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["X-Forwarded-Proto"] = server.scheme
        if body:
            headers["Content-Length"] = str(len(body))
        status, answer_headers, data = self.proxy._forward(self.command, self.path, headers, body)
        answer = [(k, v) for k, v in answer_headers if k.lower() not in _HOP_BY_HOP]
        length = next((v for k, v in answer_headers if k.lower() == "content-length"), None)
        if fault is not None and fault.kind == "mismatch_digest" and status == 200:
            if fault.how == "header":
                wrong = digest_of(b"not the manifest")
                answer = [
                    (k, wrong if k.lower() == "docker-content-digest" else v) for k, v in answer
                ]
            else:
                data += b" " if data else b""
                if length is not None:
                    length = str(int(length) + 1)
        if self.command == "HEAD":
            self._send(status, answer, b"", length=length)
        else:
            self._send(status, answer, data)
        return status

    def _send(
        self, status: int, headers: list[tuple[str, str]], body: bytes, length: str | None = None
    ) -> None:
        self._log(status)
        # send_response_only: no Server/Date of our own next to the relayed ones.
        self.send_response_only(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", length if length is not None else str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
