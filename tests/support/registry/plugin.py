"""Pytest fixtures for the real test registry (registry.md §5).

The root ``tests/conftest.py`` registers this module with ``pytest_plugins``,
so every test can request these fixtures by name.

Each registry process is session-scoped and started on first use; the public
fixtures are function-scoped views of it that ``reset()`` the issuer first
(records and switches). Pushed images persist for the session: content is
deterministic per (repository, tag, kind, platforms, labels), so pushing again
is harmless. A missing ``docker-registry``/``htpasswd`` fails the test with the
install command; it never skips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.registry import server
from tests.support.registry.faults import FaultProxy
from tests.support.registry.pki import Pki
from tests.support.registry.process import RegistryStartError, RegistryToolMissing
from tests.support.registry.server import Registry

__all__ = [
    "fault_proxy",
    "registry_foreign_realm",
    "registry_foreign_realm_server",
    "registry_hostile_realm",
    "registry_hostile_realm_server",
    "registry_htpasswd",
    "registry_htpasswd_server",
    "registry_pki",
    "registry_plain",
    "registry_plain_server",
    "registry_token",
    "registry_token_kid",
    "registry_token_kid_server",
    "registry_token_server",
]

# The token registries' realm carries its own query: clients must merge into it (registry.md §2).
REALM_QUERY = "account=npa-test"


@pytest.fixture(scope="session")
def registry_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The session's test CA, localhost certificate, issuer and rogue signing keys."""
    return Pki.generate(tmp_path_factory.mktemp("registry-pki"))


def _serve(start: Callable[[], Registry]) -> Iterator[Registry]:
    failure = ""
    try:
        registry = start()
    except (RegistryToolMissing, RegistryStartError) as error:
        failure = str(error)
    if failure:  # outside the except: no chained traceback, just the message
        pytest.fail(failure, pytrace=False)
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def registry_plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """Mode A, one per session."""
    yield from _serve(lambda: server.start_plain(tmp_path_factory.mktemp("registry-plain")))


@pytest.fixture(scope="session")
def registry_token_server(
    tmp_path_factory: pytest.TempPathFactory, registry_pki: Pki
) -> Iterator[Registry]:
    """Mode B with an HTTPS realm on 127.0.0.1 whose tokens name their key by ``x5c``."""
    yield from _serve(
        lambda: server.start_token(
            tmp_path_factory.mktemp("registry-token"), registry_pki, realm_query=REALM_QUERY
        )
    )


@pytest.fixture(scope="session")
def registry_token_kid_server(
    tmp_path_factory: pytest.TempPathFactory, registry_pki: Pki
) -> Iterator[Registry]:
    """Mode B whose tokens name their key by libtrust ``kid``."""
    yield from _serve(
        lambda: server.start_token(
            tmp_path_factory.mktemp("registry-token-kid"),
            registry_pki,
            header="kid",
            realm_query=REALM_QUERY,
        )
    )


@pytest.fixture(scope="session")
def registry_hostile_realm_server(
    tmp_path_factory: pytest.TempPathFactory, registry_pki: Pki
) -> Iterator[Registry]:
    """Mode B whose challenge names a plain-HTTP realm on another host (``localhost``)."""
    yield from _serve(
        lambda: server.start_token(
            tmp_path_factory.mktemp("registry-hostile"),
            registry_pki,
            realm_scheme="http",
            realm_host="localhost",
        )
    )


@pytest.fixture(scope="session")
def registry_foreign_realm_server(
    tmp_path_factory: pytest.TempPathFactory, registry_pki: Pki
) -> Iterator[Registry]:
    """Mode B whose challenge names an HTTPS realm on another host (``localhost``)."""
    yield from _serve(
        lambda: server.start_token(
            tmp_path_factory.mktemp("registry-foreign"), registry_pki, realm_host="localhost"
        )
    )


@pytest.fixture(scope="session")
def registry_htpasswd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """Mode C, one per session."""
    yield from _serve(lambda: server.start_htpasswd(tmp_path_factory.mktemp("registry-htpasswd")))


def _fresh(registry: Registry) -> Registry:
    registry.reset()
    return registry


@pytest.fixture
def registry_plain(registry_plain_server: Registry) -> Registry:
    """Mode A: ``http://127.0.0.1:<port>``, no auth (registry.md §5.2)."""
    return _fresh(registry_plain_server)


@pytest.fixture
def registry_token(registry_token_server: Registry) -> Registry:
    """Mode B: TLS, token auth, HTTPS issuer on the registry's host, ``x5c`` tokens (§5.3)."""
    return _fresh(registry_token_server)


@pytest.fixture
def registry_token_kid(registry_token_kid_server: Registry) -> Registry:
    """Mode B with libtrust ``kid`` tokens (§5.3)."""
    return _fresh(registry_token_kid_server)


@pytest.fixture
def registry_hostile_realm(registry_hostile_realm_server: Registry) -> Registry:
    """Mode B with realm ``http://localhost:<port>/token``: credentials must never go there."""
    return _fresh(registry_hostile_realm_server)


@pytest.fixture
def registry_foreign_realm(registry_foreign_realm_server: Registry) -> Registry:
    """Mode B with realm ``https://localhost:<port>/token``: untrusted unless configured."""
    return _fresh(registry_foreign_realm_server)


@pytest.fixture
def registry_htpasswd(registry_htpasswd_server: Registry) -> Registry:
    """Mode C: plain HTTP, bcrypt htpasswd, ``Basic realm="npa-test-basic"`` (§5.4)."""
    return _fresh(registry_htpasswd_server)


@pytest.fixture
def fault_proxy(registry_pki: Pki) -> Iterator[Callable[[Registry], FaultProxy]]:
    """A factory: ``fault_proxy(registry)`` starts a ``FaultProxy`` in front of it.

    HTTPS (test CA) when the registry is; every proxy stops at teardown.
    """
    started: list[FaultProxy] = []

    def start(upstream: Registry) -> FaultProxy:
        tls = upstream.ca_path is not None
        proxy = FaultProxy.start(
            upstream.port,
            upstream_ca=upstream.ca_path,
            cert_files=(registry_pki.server_cert_path, registry_pki.server_key_path)
            if tls
            else None,
        )
        started.append(proxy)
        return proxy

    try:
        yield start
    finally:
        for proxy in started:
            proxy.stop()
