"""The ``docker-registry`` process (CNCF distribution 2.8.2, Debian's package; registry.md §5.1).

``RegistryProcess.start`` writes a config into a fresh directory, picks a free
loopback port (the registry never reports an OS-chosen port, so we bind port
0, read it, close, and write it into the config), starts ``docker-registry
serve`` in its own process group and waits until ``GET /v2/`` answers 200 or
401. The wait is event-style with a bounded deadline: between probes it waits
on the process itself, so an early exit (a port lost to a race, a bad config)
is seen at once and, for a lost port, retried on a new one. ``stop()`` kills
the whole group.

A missing binary raises ``RegistryToolMissing`` with the install command; the
fixtures turn it into a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "BINARY_ENV",
    "INSTALL_HINT",
    "RegistryProcess",
    "RegistryStartError",
    "RegistryToolMissing",
    "htpasswd_file",
    "registry_binary",
]

BINARY_ENV = "NPA_TEST_DOCKER_REGISTRY"
INSTALL_HINT = "install it with `apt-get install -y docker-registry apache2-utils openssl` (or `make registry-tools`)"
_READY_TIMEOUT = 15.0
_PORT_ATTEMPTS = 5


class RegistryToolMissing(RuntimeError):
    """``docker-registry`` or ``htpasswd`` is not installed."""


class RegistryStartError(RuntimeError):
    """The registry exited or did not become ready in time."""


def registry_binary(env: dict[str, str] | None = None) -> str:
    """``$NPA_TEST_DOCKER_REGISTRY``, else ``docker-registry`` on PATH, else ``/usr/bin``'s.

    Raises:
        RegistryToolMissing: none of them is an executable file.
    """
    environ = os.environ if env is None else env
    override = environ.get(BINARY_ENV)
    candidates = (
        [override] if override else [shutil.which("docker-registry"), "/usr/bin/docker-registry"]
    )
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    named = f"{BINARY_ENV}={override}" if override else "docker-registry"
    raise RegistryToolMissing(
        f"the registry integration tests need a real registry, but {named} is not an executable; "
        + INSTALL_HINT
    )


def htpasswd_file(path: Path, users: dict[str, str], md5_users: dict[str, str]) -> Path:
    """Write an htpasswd file: bcrypt (``-B``) entries for ``users``, ``$apr1$`` for ``md5_users``.

    Raises:
        RegistryToolMissing: ``htpasswd`` (apache2-utils) is not installed.
    """
    binary = shutil.which("htpasswd")
    if binary is None:
        raise RegistryToolMissing("htpasswd (apache2-utils) is not installed; " + INSTALL_HINT)
    lines = []
    entries = [("-Bbn", u, p) for u, p in users.items()] + [
        ("-mbn", u, p) for u, p in md5_users.items()
    ]
    for flags, user, password in entries:
        done = subprocess.run(
            [binary, flags, user, password], capture_output=True, text=True, check=True
        )
        lines.append(done.stdout.strip())
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class RegistryProcess:
    """A ready ``docker-registry serve`` on ``127.0.0.1:<port>``."""

    root: Path
    config_path: Path
    log_path: Path
    port: int
    probe_tls: ssl.SSLContext | None = field(repr=False)  # verifies the registry while probing
    startup_seconds: float
    _process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        auth: dict[str, Any] | None = None,
        tls_files: tuple[Path, Path] | None = None,
        ca_path: Path | None = None,
    ) -> RegistryProcess:
        """Start in ``root`` (config, log, ``data/``) and wait until ready.

        ``tls_files`` is (certificate, key); ``ca_path`` verifies it while probing.

        Raises:
            RegistryToolMissing: no binary.
            RegistryStartError: it exited, or was not ready within the deadline.
        """
        binary = registry_binary()
        root.mkdir(parents=True, exist_ok=True)
        client_tls = None
        if tls_files is not None:
            client_tls = ssl.create_default_context(cafile=str(ca_path) if ca_path else None)
        last_log = ""
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port()
            config_path = root / "config.yml"
            config_path.write_text(yaml.safe_dump(_config(root, port, auth, tls_files)))
            log_path = root / f"registry-{attempt}.log"
            began = time.monotonic()
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [binary, "serve", str(config_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=root,
                    start_new_session=True,  # its own group: stop() kills everything it spawned
                )
            ready = _wait_ready(process, port, client_tls)
            if ready:
                return cls(
                    root=root,
                    config_path=config_path,
                    log_path=log_path,
                    port=port,
                    probe_tls=client_tls,
                    startup_seconds=time.monotonic() - began,
                    _process=process,
                )
            _kill_group(process)
            last_log = log_path.read_text(errors="replace")[-2000:]
            if "address already in use" not in last_log:
                break  # not a port race: retrying would fail the same way
        raise RegistryStartError(
            f"docker-registry did not become ready (config {root / 'config.yml'}):\n{last_log}"
        )

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def stop(self) -> None:
        """Kill the registry's process group and reap it (idempotent)."""
        _kill_group(self._process)


def _config(
    root: Path, port: int, auth: dict[str, Any] | None, tls_files: tuple[Path, Path] | None
) -> dict[str, Any]:
    # registry.md §5.2; the packaged /etc/docker/registry/config.yml is never used.
    http: dict[str, Any] = {"addr": f"127.0.0.1:{port}", "secret": "fixture-only"}
    if tls_files is not None:
        http["tls"] = {"certificate": str(tls_files[0]), "key": str(tls_files[1])}
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(root / "data")},
            "delete": {"enabled": True},
        },
        "http": http,
    }
    if auth is not None:
        config["auth"] = auth
    return config


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], port: int, tls: ssl.SSLContext | None) -> bool:
    """Probe ``GET /v2/`` until 200/401; False when the process exits or the deadline passes."""
    deadline = time.monotonic() + _READY_TIMEOUT
    pause = 0.002
    while time.monotonic() < deadline:
        if _probe(port, tls) in (200, 401):
            return True
        # Wait on the process, not a clock: an exit ends the wait at once.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=pause)
            return False
        pause = min(pause * 2, 0.05)
    return False


def _probe(port: int, tls: ssl.SSLContext | None) -> int | None:
    connection: http.client.HTTPConnection
    if tls is None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=tls)
    try:
        connection.request("GET", "/v2/")
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
