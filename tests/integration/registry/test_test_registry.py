"""The test registry behaves as registry.md §5 says, checked with plain httpx (not the product).

Mode A content negotiation and digests (§3, §5.2), the mode B access matrix
with ``x5c`` and ``kid`` tokens and the issuer's fault switches (§2, §5.3),
mode C bcrypt htpasswd (§5.4), the foreign and plain-HTTP realms (§2.1), and
the fault proxy.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Literal

import httpx
import pytest

from tests.support.registry.faults import FaultProxy
from tests.support.registry.issuer import IssuerSwitches, TokenIssuer, parse_scopes
from tests.support.registry.pki import Pki, libtrust_kid
from tests.support.registry.process import RegistryToolMissing, registry_binary
from tests.support.registry.push import (
    BOOTSTRAP_LABEL,
    DOCKER_MANIFEST,
    MANIFEST_ACCEPT,
    OCI_MANIFEST,
    ImageKind,
    digest_of,
    push_image,
)
from tests.support.registry.server import Registry

ACCEPT = {"Accept": MANIFEST_ACCEPT}
TWO_PLATFORMS = ("linux/amd64", "linux/arm64")


def _challenge(response: httpx.Response) -> tuple[str, dict[str, str]]:
    scheme, _, rest = response.headers["WWW-Authenticate"].partition(" ")
    return scheme, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def _error_code(response: httpx.Response) -> str:
    return str(response.json()["errors"][0]["code"])


def _token_response(
    registry: Registry, scopes: list[str], auth: tuple[str, str] | None = None
) -> httpx.Response:
    """GET the realm with service and scopes merged into its own query (registry.md §2)."""
    assert registry.realm is not None and registry.service is not None
    params = {"service": registry.service, "scope": scopes}
    url = httpx.URL(registry.realm).copy_merge_params(params)
    with registry.client() as client:
        return client.get(url, auth=auth)


def _bearer(registry: Registry, scopes: list[str], auth: tuple[str, str] | None = None) -> str:
    response = _token_response(registry, scopes, auth)
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def _issuer(registry: Registry) -> TokenIssuer:
    assert registry.issuer is not None, "token mode only"
    return registry.issuer


def _head(registry: Registry, path: str, token: str | None = None) -> httpx.Response:
    headers = dict(ACCEPT)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with registry.client() as client:
        return client.head(path, headers=headers)


@pytest.fixture(params=["registry_token", "registry_token_kid"])
def token_registry(request: pytest.FixtureRequest) -> Registry:
    """Mode B with ``x5c`` tokens, then with ``kid`` tokens (the §5.3 matrix runs on both)."""
    registry: Registry = request.getfixturevalue(request.param)
    registry.push("team/app", "v1")
    registry.push("team/other", "v1")
    registry.push("public/base", "v1")  # pushes mint tokens in-process: nothing recorded
    return registry


# ---- mode A: digests and content negotiation (registry.md §3, §5.2) ----


@pytest.mark.parametrize("by", ["tag", "digest"], ids=["by-tag", "by-digest"])
def test_plain_index_head_and_get_match_local_digest(registry_plain: Registry, by: str) -> None:
    image = registry_plain.push("team/app", "idx", platforms=TWO_PLATFORMS)
    reference = "idx" if by == "tag" else image.digest
    with registry_plain.client() as client:
        head = client.head(f"/v2/team/app/manifests/{reference}", headers=ACCEPT)
        get = client.get(f"/v2/team/app/manifests/{reference}", headers=ACCEPT)
    assert head.status_code == get.status_code == 200
    assert head.headers["Docker-Content-Digest"] == get.headers["Docker-Content-Digest"]
    assert get.headers["Docker-Content-Digest"] == image.digest == digest_of(get.content)
    assert int(head.headers["Content-Length"]) == len(image.body)
    assert get.content == image.body
    platforms = [m["platform"]["architecture"] for m in get.json()["manifests"]]
    assert platforms == ["amd64", "arm64"]


def test_plain_index_children_and_config_labels_are_served(registry_plain: Registry) -> None:
    label, value = BOOTSTRAP_LABEL
    image = registry_plain.push(
        "team/labelled", "v1", platforms=TWO_PLATFORMS, labels={label: value}
    )
    child = image.child("linux/amd64")
    assert child.digest != image.child("linux/arm64").digest
    with registry_plain.client() as client:
        manifest = client.get(f"/v2/team/labelled/manifests/{child.digest}", headers=ACCEPT)
        config = client.get(f"/v2/team/labelled/blobs/{child.config.digest}")
    assert manifest.content == child.body
    assert manifest.headers["Docker-Content-Digest"] == child.digest
    assert config.json()["config"]["Labels"] == {label: value}
    assert digest_of(config.content) == child.config.digest


@pytest.mark.parametrize(
    "accept",
    [None, "*/*", DOCKER_MANIFEST, OCI_MANIFEST],
    ids=["no-accept", "any", "docker-v2-only", "oci-manifest-only"],
)
def test_plain_index_without_index_accept_is_manifest_unknown(
    registry_plain: Registry, accept: str | None
) -> None:
    registry_plain.push("team/app", "idx", platforms=TWO_PLATFORMS)
    headers = {"Accept": accept} if accept else {}
    with registry_plain.client() as client:
        response = client.get("/v2/team/app/manifests/idx", headers=headers)
    assert response.status_code == 404
    assert _error_code(response) == "MANIFEST_UNKNOWN"
    assert "OCI index found" in response.text


def test_plain_docker_list_with_schema2_accept_only_returns_amd64_child(
    registry_plain: Registry,
) -> None:
    image = registry_plain.push("team/app", "list", kind="docker-list", platforms=TWO_PLATFORMS)
    with registry_plain.client() as client:
        full = client.get("/v2/team/app/manifests/list", headers=ACCEPT)
        narrow = client.get("/v2/team/app/manifests/list", headers={"Accept": DOCKER_MANIFEST})
    assert full.headers["Docker-Content-Digest"] == image.digest
    assert narrow.status_code == 200
    assert narrow.headers["Docker-Content-Digest"] == image.child("linux/amd64").digest
    assert narrow.content == image.child("linux/amd64").body


@pytest.mark.parametrize(
    "kind", ["oci-manifest", "docker-manifest"], ids=["oci-manifest", "docker-manifest"]
)
def test_plain_single_manifest_digest_matches(registry_plain: Registry, kind: ImageKind) -> None:
    image = registry_plain.push("team/single", kind, kind=kind)
    response = _head(registry_plain, f"/v2/team/single/manifests/{kind}")
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] == image.digest == image.child().digest


def test_plain_unknown_repository_and_tags_list_errors(registry_plain: Registry) -> None:
    registry_plain.push("team/app", "v1")
    with registry_plain.client() as client:
        manifest = client.get("/v2/team/nothing/manifests/v1", headers=ACCEPT)
        tags = client.get("/v2/team/nothing/tags/list")
        head_tags = client.head("/v2/team/app/tags/list")
        missing_tag = client.get("/v2/team/app/manifests/nope", headers=ACCEPT)
    assert (manifest.status_code, _error_code(manifest)) == (404, "MANIFEST_UNKNOWN")
    assert (tags.status_code, _error_code(tags)) == (404, "NAME_UNKNOWN")
    assert head_tags.status_code == 405
    assert (missing_tag.status_code, _error_code(missing_tag)) == (404, "MANIFEST_UNKNOWN")


# ---- mode B: the token flow and the access matrix (registry.md §2, §5.3) ----


def test_token_challenge_names_realm_service_and_scope(token_registry: Registry) -> None:
    manifest = _head(token_registry, "/v2/team/app/manifests/v1")
    base = _head(token_registry, "/v2/")
    assert manifest.status_code == base.status_code == 401
    scheme, params = _challenge(manifest)
    assert scheme == "Bearer"
    assert params == {
        "realm": token_registry.realm,
        "service": "npa-test-registry",
        "scope": "repository:team/app:pull",
    }
    assert "scope" not in _challenge(base)[1]
    assert token_registry.realm is not None and token_registry.realm.startswith(
        "https://127.0.0.1:"
    )


def test_token_alice_pushes_and_pulls_through_the_realm(token_registry: Registry) -> None:
    token = _bearer(token_registry, ["repository:team/pushed:pull,push"], ("alice", "alicepw"))
    with token_registry.client(headers={"Authorization": f"Bearer {token}"}) as client:
        image = push_image(client, "team/pushed", "v1", platforms=TWO_PLATFORMS)
        pulled = client.get("/v2/team/pushed/manifests/v1", headers=ACCEPT)
    assert pulled.status_code == 200
    assert pulled.content == image.body
    (request,) = _issuer(token_registry).requests
    assert request.subject == "alice"
    assert request.granted[0].actions == ("pull", "push")


def test_token_bob_pulls_team_app_and_lists_its_tags(token_registry: Registry) -> None:
    token = _bearer(token_registry, ["repository:team/app:pull"], ("bob", "bobpw"))
    manifest = _head(token_registry, "/v2/team/app/manifests/v1", token)
    with token_registry.client(headers={"Authorization": f"Bearer {token}"}) as client:
        tags = client.get("/v2/team/app/tags/list")
    assert manifest.status_code == 200
    assert tags.status_code == 200
    assert tags.json()["tags"] == ["v1"]


def test_token_bob_on_team_other_is_insufficient_scope(token_registry: Registry) -> None:
    token = _bearer(token_registry, ["repository:team/other:pull"], ("bob", "bobpw"))
    response = _head(token_registry, "/v2/team/other/manifests/v1", token)
    assert response.status_code == 401
    assert _challenge(response)[1]["error"] == "insufficient_scope"
    granted = _issuer(token_registry).requests[-1].granted
    assert [(g.name, g.actions) for g in granted] == [("team/other", ())]


def test_token_bob_catalog_is_unauthorized(token_registry: Registry) -> None:
    token = _bearer(token_registry, ["registry:catalog:*"], ("bob", "bobpw"))
    with token_registry.client(headers={"Authorization": f"Bearer {token}"}) as client:
        response = client.get("/v2/_catalog")
    assert response.status_code == 401
    assert _challenge(response)[1]["scope"] == "registry:catalog:*"


def test_token_anonymous_private_is_insufficient_scope_public_is_ok(
    token_registry: Registry,
) -> None:
    private = _head(
        token_registry,
        "/v2/team/app/manifests/v1",
        _bearer(token_registry, ["repository:team/app:pull"]),
    )
    public = _head(
        token_registry,
        "/v2/public/base/manifests/v1",
        _bearer(token_registry, ["repository:public/base:pull"]),
    )
    assert private.status_code == 401
    assert _challenge(private)[1]["error"] == "insufficient_scope"
    assert public.status_code == 200
    requests = _issuer(token_registry).requests
    assert [r.authorization for r in requests] == [None, None]
    assert [r.granted[0].actions for r in requests] == [(), ("pull",)]


def test_token_wrong_password_is_refused_by_the_token_server(token_registry: Registry) -> None:
    response = _token_response(token_registry, ["repository:team/app:pull"], ("bob", "nope"))
    assert response.status_code == 401
    assert _challenge(response)[0] == "Basic"
    (request,) = _issuer(token_registry).requests
    assert request.authorization == "Basic " + base64.b64encode(b"bob:nope").decode()
    assert request.status == 401


@pytest.mark.parametrize(
    "switches",
    [
        IssuerSwitches(rogue_key=True),
        IssuerSwitches(audience="someone-else"),
        IssuerSwitches(audience=["npa-test-registry"]),
        IssuerSwitches(expired=True),
        IssuerSwitches(issuer_name="someone-else"),
    ],
    ids=["rogue-key", "wrong-aud", "aud-list", "expired", "wrong-iss"],
)
def test_token_broken_token_is_invalid_token(
    token_registry: Registry, switches: IssuerSwitches
) -> None:
    issuer = _issuer(token_registry)
    issuer.switches = dataclasses.replace(switches, header=issuer.default_header)
    token = _bearer(token_registry, ["repository:team/app:pull"], ("bob", "bobpw"))
    response = _head(token_registry, "/v2/team/app/manifests/v1", token)
    assert response.status_code == 401
    assert _challenge(response)[1]["error"] == "invalid_token"


def test_token_kid_header_names_the_libtrust_fingerprint(
    registry_token_kid: Registry, registry_pki: Pki
) -> None:
    token = _bearer(registry_token_kid, ["repository:team/app:pull"], ("bob", "bobpw"))
    header = token.split(".")[0]
    decoded = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    kid = libtrust_kid(registry_pki.signer.key.public_key())
    assert f'"kid":"{kid}"'.encode() in decoded
    assert re.fullmatch(r"([A-Z2-7]{4}:){11}[A-Z2-7]{4}", kid)


def test_token_response_shape_and_offline_refresh_token(registry_token: Registry) -> None:
    plain = _token_response(registry_token, ["repository:team/app:pull"], ("bob", "bobpw"))
    assert set(plain.json()) == {"token", "access_token", "expires_in", "issued_at"}
    assert plain.json()["token"] == plain.json()["access_token"]
    assert registry_token.realm is not None
    url = httpx.URL(registry_token.realm).copy_merge_params(
        {"service": "npa-test-registry", "offline_token": "true", "client_id": "t"}
    )
    with registry_token.client() as client:
        offline = client.get(url, auth=("bob", "bobpw"))
    assert "refresh_token" in offline.json()


def test_token_issuer_rejects_a_replaced_realm_query(registry_token: Registry) -> None:
    assert registry_token.issuer is not None
    with registry_token.client() as client:
        # httpx's params= replaces the URL's query: the realm's own parameter is lost.
        replaced = client.get(registry_token.realm or "", params={"service": "npa-test-registry"})
    merged = _token_response(registry_token, [])
    assert replaced.status_code == 400
    assert "realm's own query" in replaced.text
    assert merged.status_code == 200
    assert _issuer(registry_token).requests[-1].params["account"] == ["npa-test"]


def test_token_issuer_status_switch_answers_every_request(registry_token: Registry) -> None:
    assert registry_token.issuer is not None
    registry_token.issuer.switches.status = 403
    response = _token_response(registry_token, ["repository:public/base:pull"])
    assert response.status_code == 403


def test_token_issuer_records_path_query_and_authorization(registry_token: Registry) -> None:
    _token_response(registry_token, ["repository:team/app:pull"], ("bob", "bobpw"))
    _token_response(registry_token, ["repository:team/app:pull", "repository:team/x:pull"])
    first, second = _issuer(registry_token).requests
    assert (first.path, first.scheme, first.subject) == ("/token", "https", "bob")
    assert first.authorization is not None and first.authorization.startswith("Basic ")
    assert "scope=repository%3Ateam%2Fapp%3Apull" in first.query
    assert second.authorization is None
    assert second.params["scope"] == ["repository:team/app:pull", "repository:team/x:pull"]


def test_token_parse_scopes_splits_repeated_and_space_separated() -> None:
    entries = parse_scopes(["repository:team/app:pull,push registry:catalog:*", "x"])
    assert [(e.type, e.name, e.actions) for e in entries] == [
        ("repository", "team/app", ("pull", "push")),
        ("registry", "catalog", ("*",)),
    ]


# ---- foreign and plain-HTTP realms (registry.md §2.1) ----


def test_hostile_realm_is_plain_http_on_another_host(registry_hostile_realm: Registry) -> None:
    registry_hostile_realm.push("public/base", "v1")
    registry_hostile_realm.push("team/app", "v1")
    challenge = _challenge(_head(registry_hostile_realm, "/v2/public/base/manifests/v1"))[1]
    assert challenge["realm"].startswith("http://localhost:")
    public = _bearer(registry_hostile_realm, ["repository:public/base:pull"])
    private = _bearer(registry_hostile_realm, ["repository:team/app:pull"])
    assert _head(registry_hostile_realm, "/v2/public/base/manifests/v1", public).status_code == 200
    assert _head(registry_hostile_realm, "/v2/team/app/manifests/v1", private).status_code == 401
    requests = _issuer(registry_hostile_realm).requests
    assert [(r.scheme, r.authorization) for r in requests] == [("http", None), ("http", None)]
    assert requests[0].host.startswith("localhost:")


def test_foreign_realm_is_https_on_another_host(registry_foreign_realm: Registry) -> None:
    registry_foreign_realm.push("team/app", "v1")
    challenge = _challenge(_head(registry_foreign_realm, "/v2/team/app/manifests/v1"))[1]
    assert challenge["realm"].startswith("https://localhost:")
    token = _bearer(registry_foreign_realm, ["repository:team/app:pull"], ("bob", "bobpw"))
    assert _head(registry_foreign_realm, "/v2/team/app/manifests/v1", token).status_code == 200


# ---- mode C: htpasswd (registry.md §5.4) ----


def test_htpasswd_bcrypt_user_pushes_and_pulls(registry_htpasswd: Registry) -> None:
    image = registry_htpasswd.push("team/app", "v1")
    with registry_htpasswd.client(auth=("bob", "bobpw")) as client:
        response = client.get("/v2/team/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 200
    assert response.content == image.body
    entries = (registry_htpasswd.process.root / "htpasswd").read_text().splitlines()
    assert [line.split(":")[1][:4] for line in entries] == ["$2y$", "$2y$", "$apr"]


@pytest.mark.parametrize(
    "auth",
    [None, ("alice", "wrong"), ("legacy", "legacypw")],
    ids=["anonymous", "wrong-password", "apr1-entry"],
)
def test_htpasswd_refuses_with_basic_challenge(
    registry_htpasswd: Registry, auth: tuple[str, str] | None
) -> None:
    with registry_htpasswd.client(auth=auth) as client:
        response = client.get("/v2/team/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 401
    assert _challenge(response) == ("Basic", {"realm": "npa-test-basic"})


# ---- the fault proxy ----


@pytest.fixture
def plain_proxy(
    registry_plain: Registry, fault_proxy: Callable[[Registry], FaultProxy]
) -> Iterator[FaultProxy]:
    registry_plain.push("team/app", "v1")
    yield fault_proxy(registry_plain)


def test_proxy_passes_through_pushes_and_pulls(plain_proxy: FaultProxy) -> None:
    with httpx.Client(base_url=plain_proxy.base_url) as client:
        image = push_image(client, "team/proxied", "v1")
        response = client.get("/v2/team/proxied/manifests/v1", headers=ACCEPT)
    assert response.content == image.body
    assert all(r.origin == "front" and r.fault is None for r in plain_proxy.requests)


def test_proxy_rate_limit_answers_429_with_retry_after(plain_proxy: FaultProxy) -> None:
    plain_proxy.rate_limit(retry_after="7", times=1)
    with httpx.Client(base_url=plain_proxy.base_url) as client:
        limited = client.head("/v2/team/app/manifests/v1", headers=ACCEPT)
        after = client.head("/v2/team/app/manifests/v1", headers=ACCEPT)
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "7")
    assert after.status_code == 200


@pytest.mark.parametrize("how", ["header", "body"], ids=["header", "body"])
def test_proxy_mismatch_digest_breaks_header_or_body(
    plain_proxy: FaultProxy, how: Literal["header", "body"]
) -> None:
    plain_proxy.mismatch_digest(how=how)
    with httpx.Client(base_url=plain_proxy.base_url) as client:
        response = client.get("/v2/team/app/manifests/v1", headers=ACCEPT)
        head = client.head("/v2/team/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] != digest_of(response.content)
    assert int(head.headers["Content-Length"]) == len(response.content)


def test_proxy_drop_and_delay_fail_the_client(plain_proxy: FaultProxy) -> None:
    plain_proxy.drop("/manifests/", times=1)
    plain_proxy.delay("/tags/", seconds=5)
    with httpx.Client(base_url=plain_proxy.base_url, timeout=0.2) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.head("/v2/team/app/manifests/v1", headers=ACCEPT)
        with pytest.raises(httpx.ReadTimeout):
            client.get("/v2/team/app/tags/list")


@pytest.mark.parametrize("target", ["other", "downgrade"], ids=["other-origin", "https-to-http"])
def test_proxy_redirect_to_other_origin_records_dropped_authorization(
    registry_token: Registry,
    fault_proxy: Callable[[Registry], FaultProxy],
    target: Literal["other", "downgrade"],
) -> None:
    token_registry = registry_token
    token_registry.push("team/app", "v1")
    proxy = fault_proxy(token_registry)
    proxy.redirect(target=target)
    token = _bearer(token_registry, ["repository:team/app:pull"], ("bob", "bobpw"))
    context = token_registry.ssl_context()
    assert context is not None
    with httpx.Client(base_url=proxy.base_url, verify=context, follow_redirects=True) as client:
        response = client.get(
            "/v2/team/app/manifests/v1", headers={**ACCEPT, "Authorization": f"Bearer {token}"}
        )
    front, other = proxy.requests
    assert (front.origin, front.status, front.authorization) == ("front", 307, f"Bearer {token}")
    assert (other.origin, other.authorization) == (target, None)
    assert proxy.url_of(target).startswith(
        "https://localhost:" if target == "other" else "http://localhost:"
    )
    assert response.status_code == 401  # httpx dropped the credentials across origins


# ---- tool discovery ----


def test_registry_binary_missing_names_the_install_command() -> None:
    with pytest.raises(RegistryToolMissing, match="apt-get install -y docker-registry"):
        registry_binary({"NPA_TEST_DOCKER_REGISTRY": "/nonexistent/docker-registry"})


def test_registry_fixtures_start_fast(
    registry_plain: Registry, registry_token: Registry, registry_htpasswd: Registry
) -> None:
    # registry.md §5.1: ~25 ms plain, ~0.1 s with TLS; a generous bound catches a fixed sleep.
    for registry in (registry_plain, registry_token, registry_htpasswd):
        assert registry.process.running
        assert registry.process.startup_seconds < 3.0
