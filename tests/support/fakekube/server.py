"""The double's listeners: threaded HTTP(S) servers on 127.0.0.1 sharing one ``Backend``.

Each accepted socket gets TCP_NODELAY (no Nagle stalls on keep-alive) and,
for HTTPS, its TLS handshake in the connection's own thread; ``stop()``
closes every open connection so no handler thread outlives the test.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.support.fakekube import system
from tests.support.fakekube.faults import Faults, ReadyzScript, RequestRecord
from tests.support.fakekube.handler import Handler
from tests.support.fakekube.store import Store

__all__ = ["Backend", "Server"]


@dataclass
class Backend:
    """Everything the handler reads; owned by ``FakeKube``."""

    store: Store
    faults: Faults = field(default_factory=Faults)
    readyz: ReadyzScript = field(default_factory=ReadyzScript)
    tokens: dict[str, str] = field(default_factory=dict)
    denials: list[tuple[str, str, str]] = field(default_factory=list)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: list[RequestRecord] = field(default_factory=list)
    version: dict[str, str] = field(default_factory=lambda: dict(system.VERSION))
    server_address: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)

    def denied(self, user: str, verb: str, resource: str) -> bool:
        return any(
            u in ("*", user) and v in ("*", verb) and r in ("*", resource)
            for u, v, r in self.denials
        )


class Server(ThreadingHTTPServer):
    """A threaded HTTP(S) server on 127.0.0.1 that can close every open connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, backend: Backend, tls: ssl.SSLContext | None = None) -> None:
        self.backend = backend
        self.tls = tls
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        # Headers and body go out in separate writes: without NODELAY, Nagle plus the
        # client's delayed ACK stalls every keep-alive response by ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(10)
                request.do_handshake()
                request.settimeout(None)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection errors are expected (resets, clients closing watches): stay quiet."""

    def stop(self) -> None:
        self.shutdown()
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.server_close()
        self._thread.join(timeout=5)
