"""A threaded HTTP(S) listener on loopback for the in-process test servers (issuer, fault proxy).

Each accepted socket gets TCP_NODELAY (keep-alive responses would otherwise
stall ~40 ms on Nagle plus delayed ACK) and, for HTTPS, its TLS handshake in
the connection's own thread, so one slow client never blocks ``accept``.
``stop()`` closes every open connection: no handler thread outlives its test.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["LoopbackServer", "server_tls_context"]


def server_tls_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """A server-side TLS context for the test certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert_path), str(key_path))
    return context


class LoopbackServer(ThreadingHTTPServer):
    """Serves ``handler`` on an ephemeral port of 127.0.0.1, over TLS when given a context."""

    daemon_threads = True

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
    ) -> None:
        self.tls = tls
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def url(self, host: str = "127.0.0.1") -> str:
        """``<scheme>://<host>:<port>``; ``host`` may be ``localhost`` to name another origin."""
        return f"{self.scheme}://{host}:{self.port}"

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
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
                return  # a client that rejects our certificate, or plain HTTP on the TLS port
        super().finish_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Resets and clients closing early are expected: stay quiet."""

    def stop(self) -> None:
        self.shutdown()
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.server_close()
        self._thread.join(timeout=5)
