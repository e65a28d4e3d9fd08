"""``WWW-Authenticate`` parsing, token URLs and the trusted-realm rule (registry.md §2, §2.1)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import example, given

from npa_infra.registry import challenge
from tests.strategies import www_authenticate_texts

HUB = (
    'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
    'scope="repository:library/python:pull"'
)


def test_parse_docker_hub_challenge_reads_realm_service_scope() -> None:
    (found,) = challenge.parse(HUB)

    assert found.scheme == "bearer"
    assert found.realm == "https://auth.docker.io/token"
    assert found.service == "registry.docker.io"
    assert found.scope == "repository:library/python:pull"


CASES = {
    "basic": ('Basic realm="Registry Realm"', [("basic", {"realm": "Registry Realm"})]),
    "insufficient-scope": (
        'Bearer realm="https://r/t",service="s",error="insufficient_scope"',
        [("bearer", {"realm": "https://r/t", "service": "s", "error": "insufficient_scope"})],
    ),
    "two-challenges": (
        'Bearer realm="a", Basic realm="b"',
        [("bearer", {"realm": "a"}), ("basic", {"realm": "b"})],
    ),
    "unquoted-and-case": (
        "BEARER Realm=https://r/t , Service=s",
        [("bearer", {"realm": "https://r/t", "service": "s"})],
    ),
    "escaped-quote": (r'Bearer realm="a\"b"', [("bearer", {"realm": 'a"b'})]),
    "token68-then-bearer": (
        "Negotiate abc==, Bearer realm=x",
        [("negotiate", {}), ("bearer", {"realm": "x"})],
    ),
    "comma-in-quoted": (
        'Bearer scope="a,b",realm="r"',
        [("bearer", {"scope": "a,b", "realm": "r"})],
    ),
    "empty": ("", []),
    "only-commas": (",, ,", []),
    "unterminated": ('Bearer realm="x', [("bearer", {"realm": "x"})]),
}


@pytest.mark.parametrize(("header", "expected"), CASES.values(), ids=CASES.keys())
def test_parse_header_challenges_and_params(
    header: str, expected: list[tuple[str, dict[str, str]]]
) -> None:
    assert [(c.scheme, dict(c.params)) for c in challenge.parse(header)] == expected


def test_select_prefers_bearer_over_basic() -> None:
    found = challenge.parse('Basic realm="b", Bearer realm="a"')

    selected = challenge.select(found)

    assert selected is not None and selected.scheme == "bearer"
    assert challenge.select(challenge.parse("Negotiate abc")) is None


def test_token_url_merges_into_realm_query_never_replaces() -> None:
    url = challenge.token_url(
        "https://auth.example/token?account=npa-test", "svc", ["repository:a/b:pull"]
    )

    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "auth.example", "/token")
    assert parse_qsl(parts.query) == [
        ("account", "npa-test"),
        ("service", "svc"),
        ("scope", "repository:a/b:pull"),
    ]


def test_token_url_repeats_scope_and_skips_duplicate_service() -> None:
    url = challenge.token_url("https://a/t?service=svc", "svc", ["s1", "s2"])

    assert parse_qsl(urlsplit(url).query) == [("service", "svc"), ("scope", "s1"), ("scope", "s2")]


@pytest.mark.parametrize(
    "realm", ["/token", "ftp://a/t", "", "https:///t"], ids=["relative", "ftp", "empty", "no-host"]
)
def test_token_url_unusable_realm_value_error(realm: str) -> None:
    with pytest.raises(ValueError, match="not an absolute"):
        challenge.token_url(realm, "s", [])


TRUST = {
    "same-host": ("https://registry.example.com/token", "registry.example.com", (), True),
    "same-host-other-port": ("https://127.0.0.1:9443/token", "127.0.0.1:5000", (), True),
    "docker-pair": ("https://auth.docker.io/token", "registry-1.docker.io", (), True),
    "docker-pair-wrong-registry": ("https://auth.docker.io/token", "ghcr.io", (), False),
    "plain-http-same-host": (
        "http://registry.example.com/token",
        "registry.example.com",
        (),
        False,
    ),
    "foreign-host": ("https://evil.example/token", "registry.example.com", (), False),
    "configured-host": (
        "https://auth.corp.example/t",
        "cr.corp.example",
        ("auth.corp.example",),
        True,
    ),
    "configured-host-plain-http": (
        "http://auth.corp.example/t",
        "cr.corp.example",
        ("auth.corp.example",),
        False,
    ),
    "localhost-vs-127": ("https://localhost:1/t", "127.0.0.1:5000", (), False),
    "garbage": ("https://[::1/t", "x", (), False),
    "suffix-trick": ("https://registry.example.com.evil.io/t", "registry.example.com", (), False),
}


@pytest.mark.parametrize(
    ("realm", "registry", "configured", "trusted"), TRUST.values(), ids=TRUST.keys()
)
def test_realm_trusted_rule(
    realm: str, registry: str, configured: tuple[str, ...], trusted: bool
) -> None:
    assert challenge.realm_trusted(realm, registry, configured) is trusted


@given(www_authenticate_texts())
@example('Bearer realm="')
@example("=,=,=")
@example("\\")
def test_parse_arbitrary_header_never_raises(header: str) -> None:
    found = challenge.parse(header)

    assert all(c.scheme == c.scheme.lower() and c.scheme for c in found)
    challenge.select(found)
