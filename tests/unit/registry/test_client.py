"""``RegistryClient`` flows through ``httpx.MockTransport`` (registry.md §2-§3, style.md §1).

No network: every request reaches ``MockRegistry`` (tests/unit/registry/mockregistry.py),
which records it with its ``Authorization`` so each test can say where credentials went.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from npa_infra.errors import InvariantError
from npa_infra.registry import client as client_mod
from npa_infra.registry import reference
from npa_infra.registry.client import RegistryClient
from npa_infra.registry.contract import LabelsResult
from npa_infra.registry.credentials import Credential
from npa_infra.registry.models import (
    LINUX_AMD64,
    MANIFEST_ACCEPT,
    CheckStatus,
    ImageRef,
    ManifestCheck,
    Platform,
)
from tests.unit.registry import mockregistry as mock
from tests.unit.registry.mockregistry import MockRegistry

HOST = "registry.example.com"
ALICE = Credential(HOST, "alice", SecretStr("alicepw"), "test")
BAD = Credential(HOST, "alice", SecretStr("wrong"), "test")


def ref(text: str) -> ImageRef:
    parsed = reference.parse(text)
    assert isinstance(parsed, ImageRef), parsed
    return parsed


def make(registry: MockRegistry, **kwargs: object) -> RegistryClient:
    return RegistryClient(transport=registry.transport(), **kwargs)  # type: ignore[arg-type]


def check(registry: MockRegistry, text: str, **kwargs: object) -> ManifestCheck:
    with make(registry, **kwargs) as client:
        return client.check_manifest(ref(text), LINUX_AMD64)


# -- anonymous, no auth ---------------------------------------------------------------------


def test_check_public_manifest_ok_digest_of_exact_body_and_full_accept() -> None:
    registry = MockRegistry()
    body = mock.manifest_body("app")
    digest = registry.add("team/app", "1.0", body)

    result = check(registry, f"{HOST}/team/app:1.0")

    assert result.status is CheckStatus.OK
    assert result.digest == digest
    assert result.platform_digest is None
    (request,) = registry.requests
    assert request.method == "GET"
    assert str(request.url) == f"https://{HOST}/v2/team/app/manifests/1.0"
    assert request.headers["accept"] == MANIFEST_ACCEPT == mock.ACCEPT
    assert "authorization" not in request.headers


def test_check_by_digest_ok_digest_is_the_reference() -> None:
    registry = MockRegistry()
    digest = registry.add("team/app", "1.0", mock.manifest_body("app"))

    result = check(registry, f"{HOST}/team/app@{digest}")

    assert result.status is CheckStatus.OK
    assert result.digest == digest
    assert registry.requests[0].url.path == f"/v2/team/app/manifests/{digest}"


def test_check_missing_tag_not_found_with_registry_code() -> None:
    registry = MockRegistry()
    registry.add("team/app", "1.0", mock.manifest_body("app"))

    result = check(registry, f"{HOST}/team/app:2.0")

    assert result.status is CheckStatus.NOT_FOUND
    assert (result.http_status, result.error_code) == (404, "MANIFEST_UNKNOWN")
    assert result.digest is None


def test_check_never_asks_tags_list() -> None:
    registry = MockRegistry(auth="bearer", public={"team/app"})
    registry.add("team/app", "1.0", mock.manifest_body("app"))

    check(registry, f"{HOST}/team/app:1.0")
    check(registry, f"{HOST}/team/app:nope")

    assert not any("tags/list" in r.url.path for r in registry.requests)


# -- the Bearer token flow ----------------------------------------------------------------------


def test_bearer_public_repository_anonymous_token_suffices_credentials_unused() -> None:
    registry = MockRegistry(auth="bearer", public={"public/app"})
    registry.add("public/app", "1", mock.manifest_body("p"))

    result = check(registry, f"{HOST}/public/app:1", credentials=[ALICE])

    assert result.status is CheckStatus.OK
    (token,) = registry.token_requests()
    assert "authorization" not in token.headers  # anonymous first
    assert not any(a and a.startswith("Basic ") for a in registry.authorizations())


def test_bearer_private_repository_anonymous_then_credentials_ok() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/app"}})
    digest = registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/team/app:1", credentials=[ALICE])

    assert (result.status, result.digest) == (CheckStatus.OK, digest)
    anonymous, credentialed = registry.token_requests()
    assert "authorization" not in anonymous.headers
    assert credentialed.headers["authorization"].startswith("Basic ")
    manifests = registry.manifest_requests()
    assert [m.headers.get("authorization", "")[:7] for m in manifests] == ["", "Bearer ", "Bearer "]


def test_bearer_private_repository_without_credentials_no_credentials() -> None:
    registry = MockRegistry(auth="bearer")
    registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/team/app:1")

    assert result.status is CheckStatus.NO_CREDENTIALS
    assert result.error_code == "UNAUTHORIZED"
    assert len(registry.token_requests()) == 1


def test_bearer_wrong_password_unauthorized_from_token_endpoint() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/app"}})
    registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/team/app:1", credentials=[BAD])

    assert result.status is CheckStatus.UNAUTHORIZED
    assert "token endpoint" in result.detail
    assert "wrong" not in repr(result)


def test_bearer_credential_without_pull_grant_unauthorized() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/other"}})
    registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/team/app:1", credentials=[ALICE])

    assert result.status is CheckStatus.UNAUTHORIZED
    assert result.error_code == "UNAUTHORIZED"


def test_credential_for_another_host_never_offered() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/app"}})
    registry.add("team/app", "1", mock.manifest_body("t"))
    other = Credential("other.example.com", "alice", SecretStr("alicepw"), "test")

    result = check(registry, f"{HOST}/team/app:1", credentials=[other])

    assert result.status is CheckStatus.NO_CREDENTIALS
    assert not any(a and a.startswith("Basic ") for a in registry.authorizations())


def test_untrusted_https_realm_on_foreign_host_credentials_withheld() -> None:
    registry = MockRegistry(
        auth="bearer", realm="https://auth.elsewhere.example/token", grants={"alice": {"team/app"}}
    )
    registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/team/app:1", credentials=[ALICE])

    assert result.status is CheckStatus.UNTRUSTED_REALM
    assert "https://auth.elsewhere.example/token" in result.detail
    assert not any(a and a.startswith("Basic ") for a in registry.authorizations())
    assert len(registry.token_requests()) == 1  # the anonymous one only


def test_configured_trusted_realm_receives_credentials() -> None:
    registry = MockRegistry(
        auth="bearer", realm="https://auth.elsewhere.example/token", grants={"alice": {"team/app"}}
    )
    registry.add("team/app", "1", mock.manifest_body("t"))

    result = check(
        registry,
        f"{HOST}/team/app:1",
        credentials=[ALICE],
        trusted_realms=["auth.elsewhere.example"],
    )

    assert result.status is CheckStatus.OK


def test_plain_http_realm_on_remote_host_never_contacted() -> None:
    registry = MockRegistry(auth="bearer", realm=f"http://{HOST}/token", grants={"alice": {"a"}})
    registry.add("a", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/a:1", credentials=[ALICE])

    assert result.status is CheckStatus.UNTRUSTED_REALM
    assert registry.token_requests() == []


def test_plain_http_realm_on_loopback_gets_anonymous_request_only() -> None:
    registry = MockRegistry(
        host="127.0.0.1", auth="bearer", realm="http://localhost:9/token", grants={"alice": {"a"}}
    )
    registry.add("a", "1", mock.manifest_body("t"))
    local = Credential("127.0.0.1:5000", "alice", SecretStr("alicepw"), "test")

    result = check(registry, "127.0.0.1:5000/a:1", credentials=[local])

    assert result.status is CheckStatus.UNTRUSTED_REALM
    (token,) = registry.token_requests()
    assert "authorization" not in token.headers


def test_realm_query_is_merged_not_replaced() -> None:
    registry = MockRegistry(auth="bearer", realm=f"https://{HOST}/token?account=npa", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.OK
    (token,) = registry.token_requests()
    params = dict(token.url.params.multi_items())
    assert params == {"account": "npa", "service": HOST, "scope": "repository:a:pull"}


def test_basic_challenge_unauthorized_and_nothing_sent() -> None:
    registry = MockRegistry(auth="basic")
    registry.add("a", "1", mock.manifest_body("t"))

    result = check(registry, f"{HOST}/a:1", credentials=[ALICE])

    assert result.status is CheckStatus.UNAUTHORIZED
    assert result.detail.startswith("registry requests Basic auth")
    assert registry.authorizations() == [None]


def test_401_without_challenge_is_error_not_permission() -> None:
    registry = MockRegistry()
    registry.faults.append(lambda r: httpx.Response(401, content=b"no"))

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.ERROR


# -- token cache -------------------------------------------------------------------------


def test_token_cached_per_repository_and_shared_across_threads() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    for tag in range(8):
        registry.add("a", str(tag), mock.manifest_body(str(tag)))
    with make(registry) as client:
        threads = [
            threading.Thread(target=client.check_manifest, args=(ref(f"{HOST}/a:{t}"), LINUX_AMD64))
            for t in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len(registry.token_requests()) == 1


def test_token_refetched_after_expiry() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    now = [1000.0]
    with make(registry, monotonic=lambda: now[0]) as client:
        client.check_manifest(ref(f"{HOST}/a:1"), LINUX_AMD64)
        now[0] += 1000
        client.check_manifest(ref(f"{HOST}/a:1"), LINUX_AMD64)

    assert len(registry.token_requests()) == 2


def test_token_endpoint_without_token_field_error() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(
        lambda r: httpx.Response(200, json={"nope": 1}) if r.url.path == "/token" else None
    )

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR


def test_token_endpoint_html_page_error_no_traceback() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(
        lambda r: (
            httpx.Response(200, content=b"<html>login</html>") if r.url.path == "/token" else None
        )
    )

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR


def test_access_token_field_accepted() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(
        lambda r: (
            httpx.Response(200, json={"access_token": "tok.anon.a.pull"})
            if r.url.path == "/token"
            else None
        )
    )

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.OK


# -- digests --------------------------------------------------------------------------------


def test_digest_header_mismatch_error() -> None:
    registry = MockRegistry()
    body = mock.manifest_body("t")
    registry.faults.append(
        lambda r: httpx.Response(
            200,
            content=body,
            headers={
                "Content-Type": mock.OCI_MANIFEST,
                "Docker-Content-Digest": "sha256:" + "0" * 64,
            },
        )
    )

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.ERROR
    assert result.error_code == "DIGEST_MISMATCH"
    assert result.digest is None


def test_digest_reference_mismatch_error() -> None:
    registry = MockRegistry()
    body = mock.manifest_body("t")
    other = "sha256:" + "1" * 64
    registry.faults.append(
        lambda r: httpx.Response(200, content=body, headers={"Content-Type": mock.OCI_MANIFEST})
    )

    result = check(registry, f"{HOST}/a@{other}")

    assert result.status is CheckStatus.ERROR
    assert other in result.detail


def test_digest_hashed_over_exact_bytes_not_reserialised_json() -> None:
    registry = MockRegistry()
    body = mock.manifest_body("t")  # indented, trailing newline
    registry.add("a", "1", body)

    result = check(registry, f"{HOST}/a:1")

    assert result.digest == mock.digest(body)
    assert result.digest != mock.digest(json.dumps(json.loads(body)).encode())


@pytest.mark.parametrize(
    "body",
    [b"<html>502</html>", b"not json", b"[]", b'{"mediaType": "application/weird"}'],
    ids=["html", "text", "array", "unknown-media-type"],
)
def test_malformed_manifest_body_error(body: bytes) -> None:
    registry = MockRegistry()
    registry.faults.append(lambda r: httpx.Response(200, content=body))

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR


# -- index platform selection ---------------------------------------------------------------


def _index(registry: MockRegistry, platforms: dict[str, str]) -> str:
    return registry.add("a", "1", mock.index_body(platforms), mock.OCI_INDEX)


def test_index_resolves_linux_amd64_child_and_pins_index_digest() -> None:
    registry = MockRegistry()
    amd64, arm64 = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    att = "sha256:" + "c" * 64
    digest = _index(registry, {"unknown/unknown": att, "linux/arm64": arm64, "linux/amd64": amd64})

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.OK
    assert (result.digest, result.platform_digest) == (digest, amd64)


def test_index_without_platform_not_found_names_platforms() -> None:
    registry = MockRegistry()
    _index(registry, {"linux/arm64": "sha256:" + "b" * 64, "unknown/unknown": "sha256:" + "c" * 64})

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.NOT_FOUND
    assert "linux/amd64" in result.detail and "linux/arm64" in result.detail
    assert "unknown" not in result.detail
    assert result.error_code == "PLATFORM_NOT_FOUND"


def test_index_other_platform_requested_resolves_it() -> None:
    registry = MockRegistry()
    arm = "sha256:" + "b" * 64
    _index(registry, {"linux/amd64": "sha256:" + "a" * 64, "linux/arm64/v8": arm})
    with make(registry) as client:
        result = client.check_manifest(ref(f"{HOST}/a:1"), Platform("linux", "arm64", "v8"))

    assert result.platform_digest == arm


def test_index_entry_with_malformed_digest_error() -> None:
    registry = MockRegistry()
    _index(registry, {"linux/amd64": "sha256:short"})

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR


# -- redirects --------------------------------------------------------------------------------


def _redirect_once(target: str) -> Callable[[httpx.Request], httpx.Response | None]:
    fired: list[bool] = []

    def fault(request: httpx.Request) -> httpx.Response | None:
        manifest = "/manifests/" in request.url.path and request.url.host == HOST
        if manifest and not fired and request.headers.get("authorization"):
            fired.append(True)
            return httpx.Response(307, headers={"Location": target})
        return None

    return fault


def test_redirect_to_other_origin_drops_authorization() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    mirror = MockRegistry(host="mirror.example.net")
    mirror.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(_redirect_once("https://mirror.example.net/v2/a/manifests/1"))
    registry.faults.append(
        lambda r: mirror.handle(r) if r.url.host == "mirror.example.net" else None
    )

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.OK
    (at_mirror,) = mirror.requests
    assert "authorization" not in at_mirror.headers


def test_redirect_same_origin_keeps_authorization() -> None:
    registry = MockRegistry(auth="bearer", public={"a"})
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(_redirect_once(f"https://{HOST}/v2/a/manifests/1"))

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.OK
    assert registry.manifest_requests()[-1].headers["authorization"].startswith("Bearer ")


def test_redirect_downgrade_to_plain_http_refused() -> None:
    registry = MockRegistry()
    registry.faults.append(
        lambda r: httpx.Response(302, headers={"Location": f"http://{HOST}/v2/a/manifests/1"})
    )

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.ERROR
    assert "plain HTTP" in result.detail
    assert len(registry.requests) == 1


def test_redirect_loop_bounded_error() -> None:
    registry = MockRegistry()
    registry.faults.append(
        lambda r: httpx.Response(302, headers={"Location": f"https://{HOST}/v2/a/manifests/1"})
    )

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR
    assert len(registry.requests) == client_mod.MAX_REDIRECTS + 1


# -- 429 and server errors ---------------------------------------------------------------------


def _rate_limited(times: int, retry_after: str) -> Callable[[httpx.Request], httpx.Response | None]:
    count = [0]

    def fault(request: httpx.Request) -> httpx.Response | None:
        if count[0] < times:
            count[0] += 1
            return httpx.Response(
                429,
                content=mock.errors("TOOMANYREQUESTS", "slow down"),
                headers={"Retry-After": retry_after},
            )
        return None

    return fault


def test_429_short_retry_after_waits_once_then_ok() -> None:
    registry = MockRegistry()
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(_rate_limited(1, "2"))
    slept: list[float] = []

    result = check(registry, f"{HOST}/a:1", sleep=slept.append)

    assert result.status is CheckStatus.OK
    assert slept == [2.0]


def test_429_twice_error_with_retry_after_after_one_wait() -> None:
    registry = MockRegistry()
    registry.add("a", "1", mock.manifest_body("t"))
    registry.faults.append(_rate_limited(5, "3"))
    slept: list[float] = []

    result = check(registry, f"{HOST}/a:1", sleep=slept.append)

    assert result.status is CheckStatus.ERROR
    assert "Retry-After: 3" in result.detail
    assert result.error_code == "TOOMANYREQUESTS"
    assert slept == [3.0]


def test_429_long_retry_after_reported_without_waiting() -> None:
    registry = MockRegistry()
    registry.faults.append(_rate_limited(5, "3600"))
    slept: list[float] = []

    result = check(registry, f"{HOST}/a:1", sleep=slept.append)

    assert result.status is CheckStatus.ERROR
    assert "Retry-After: 3600" in result.detail
    assert slept == []


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (403, mock.errors("DENIED", "denied"), CheckStatus.FORBIDDEN),
        (500, b"<html>oops</html>", CheckStatus.ERROR),
        (502, b"", CheckStatus.ERROR),
        (400, mock.errors("MANIFEST_INVALID"), CheckStatus.ERROR),
    ],
    ids=["403-denied", "500-html", "502-empty", "400"],
)
def test_error_statuses_classified(status: int, body: bytes, expected: CheckStatus) -> None:
    registry = MockRegistry()
    registry.faults.append(lambda r: httpx.Response(status, content=body))

    result = check(registry, f"{HOST}/a:1")

    assert result.status is expected
    assert result.http_status == status


def test_oversized_answer_error() -> None:
    registry = MockRegistry()
    registry.faults.append(lambda r: httpx.Response(200, content=b"x" * (client_mod.MAX_BODY + 1)))

    assert check(registry, f"{HOST}/a:1").status is CheckStatus.ERROR


# -- transport failures --------------------------------------------------------------------------


def _raising(exc: Exception) -> MockRegistry:
    registry = MockRegistry()

    def fault(request: httpx.Request) -> httpx.Response | None:
        raise exc

    registry.faults.append(fault)
    return registry


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("[Errno -2] Name or service not known"),
        httpx.ConnectTimeout("timed out"),
        httpx.ReadTimeout("timed out"),
        httpx.ReadError("reset"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
    ],
    ids=["dns", "connect-timeout", "read-timeout", "reset", "disconnect"],
)
def test_no_answer_is_unreachable_never_permission(exc: Exception) -> None:
    result = check(_raising(exc), f"{HOST}/a:1")

    assert result.status is CheckStatus.UNREACHABLE
    assert HOST in result.detail


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


@pytest.mark.parametrize(
    "cls",
    [httpx.TransportError, *_all_subclasses(httpx.TransportError), httpx.DecodingError],
    ids=lambda c: c.__name__,
)
def test_translate_maps_every_httpx_transport_error(cls: type[Exception]) -> None:
    result = client_mod.translate(cls("boom"), HOST)

    assert result.status in (CheckStatus.UNREACHABLE, CheckStatus.ERROR)
    network = (httpx.TimeoutException, httpx.NetworkError, httpx.ConnectError, httpx.ProxyError)
    if issubclass(cls, network):
        assert result.status is CheckStatus.UNREACHABLE


def _tls_error(message: str, cls: type[ssl.SSLError] = ssl.SSLError) -> httpx.ConnectError:
    try:
        try:
            raise cls(1, message)
        except ssl.SSLError as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        return outer


def test_loopback_registry_falls_back_to_plain_http_when_it_does_not_speak_tls() -> None:
    registry = MockRegistry(host="127.0.0.1")
    registry.add("a", "1", mock.manifest_body("t"))
    error = _tls_error("[SSL: WRONG_VERSION_NUMBER] wrong version number")
    registry.faults.append(
        lambda r: (_ for _ in ()).throw(error) if r.url.scheme == "https" else None
    )

    with make(registry) as client:
        first = client.check_manifest(ref("127.0.0.1:5000/a:1"), LINUX_AMD64)
        second = client.check_manifest(ref("127.0.0.1:5000/a:1"), LINUX_AMD64)

    assert (first.status, second.status) == (CheckStatus.OK, CheckStatus.OK)
    assert [r.url.scheme for r in registry.requests] == ["https", "http", "http"]


def test_loopback_certificate_failure_unreachable_no_plain_fallback() -> None:
    registry = MockRegistry(host="127.0.0.1")
    error = _tls_error("certificate verify failed", ssl.SSLCertVerificationError)
    registry.faults.append(lambda r: (_ for _ in ()).throw(error))

    result = check(registry, "127.0.0.1:5000/a:1")

    assert result.status is CheckStatus.UNREACHABLE
    assert "TLS" in result.detail
    assert [r.url.scheme for r in registry.requests] == ["https"]


def test_remote_registry_never_plain_http() -> None:
    error = _tls_error("[SSL: WRONG_VERSION_NUMBER] wrong version number")
    registry = _raising(error)

    result = check(registry, f"{HOST}/a:1")

    assert result.status is CheckStatus.UNREACHABLE
    assert [r.url.scheme for r in registry.requests] == ["https"]


def test_insecure_registry_host_may_fall_back_to_plain_http() -> None:
    registry = MockRegistry()
    registry.add("a", "1", mock.manifest_body("t"))
    error = _tls_error("[SSL: WRONG_VERSION_NUMBER] wrong version number")
    registry.faults.append(
        lambda r: (_ for _ in ()).throw(error) if r.url.scheme == "https" else None
    )

    result = check(registry, f"{HOST}/a:1", insecure_hosts=[HOST])

    assert result.status is CheckStatus.OK


# -- Docker Hub -------------------------------------------------------------------------------


def test_docker_hub_official_image_library_path_and_auth_docker_io_trusted() -> None:
    hub = MockRegistry(
        host="registry-1.docker.io",
        auth="bearer",
        realm="https://auth.docker.io/token",
        service="registry.docker.io",
        grants={"alice": {"library/python"}},
    )
    hub.add("library/python", "3.11-slim", mock.manifest_body("py"))
    docker = Credential("registry-1.docker.io", "alice", SecretStr("alicepw"), "test")

    result = check(hub, "python:3.11-slim", credentials=[docker])

    assert result.status is CheckStatus.OK
    assert hub.manifest_requests()[0].url.path == "/v2/library/python/manifests/3.11-slim"
    assert hub.token_requests()[-1].headers["authorization"].startswith("Basic ")


# -- construction and secrets -----------------------------------------------------------------


def test_constructor_does_no_io_and_close_is_idempotent() -> None:
    registry = MockRegistry()

    client = make(registry, credentials=[ALICE])
    client.close()
    client.close()

    assert registry.requests == []


def test_repr_never_shows_password() -> None:
    client = RegistryClient(credentials=[ALICE])

    assert "alicepw" not in repr(client)


def test_importing_client_module_does_not_import_httpx() -> None:
    code = "import sys, npa_infra.registry.client; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "False"


# -- image_labels: the config of the manifest the cluster pulls (registry.md §3) ----------------


def labels_of(
    registry: MockRegistry, text: str, **kwargs: object
) -> tuple[ManifestCheck, LabelsResult]:
    with make(registry, **kwargs) as client:
        checked = client.check_manifest(ref(text), LINUX_AMD64)
        assert checked.status is CheckStatus.OK, checked.detail
        return checked, client.image_labels(ref(text), checked)


def test_labels_single_manifest_read_with_two_more_requests() -> None:
    registry = MockRegistry()
    top, child, config = registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL)

    checked, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert top == child == checked.digest
    assert (read.labels, read.config_digest, read.failure) == (mock.CONTRACT_LABEL, config, None)
    paths = [r.url.path for r in registry.requests]
    assert paths == [
        "/v2/team/npa-app/manifests/1",
        f"/v2/team/npa-app/manifests/{child}",
        f"/v2/team/npa-app/blobs/{config}",
    ]
    assert registry.requests[1].headers["accept"] == MANIFEST_ACCEPT


def test_labels_index_reads_the_linux_amd64_child_config() -> None:
    registry = MockRegistry()
    top, child, config = registry.add_image("team/npa-app", "1", {"k": "amd64"}, index=True)

    checked, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert (checked.digest, checked.platform_digest) == (top, child)
    assert (read.labels, read.config_digest) == ({"k": "amd64"}, config)
    assert [r.url.path.rsplit("/", 1)[-1] for r in registry.requests[1:]] == [child, config]


def test_labels_reuse_the_checks_token_no_new_token_no_anonymous_request() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/npa-app"}})
    registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL, index=True)

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1", credentials=[ALICE])

    assert read.labels == mock.CONTRACT_LABEL
    assert len(registry.token_requests()) == 2  # the check's anonymous and credentialed tokens
    later = registry.requests[-2:]
    assert ["/manifests/" in later[0].url.path, "/blobs/" in later[1].url.path] == [True, True]
    assert all(r.headers["authorization"].startswith("Bearer tok.alice.") for r in later)


def test_labels_expired_token_rebought_with_the_same_credential_once() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/npa-app"}})
    registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL)
    now = [1000.0]
    with make(registry, credentials=[ALICE], monotonic=lambda: now[0]) as client:
        checked = client.check_manifest(ref(f"{HOST}/team/npa-app:1"), LINUX_AMD64)
        now[0] += 1000
        read = client.image_labels(ref(f"{HOST}/team/npa-app:1"), checked)

    assert read.labels == mock.CONTRACT_LABEL
    tokens = registry.token_requests()
    assert len(tokens) == 3
    assert tokens[-1].headers["authorization"].startswith("Basic ")


def test_labels_refused_token_falls_back_to_the_full_flow() -> None:
    registry = MockRegistry(auth="bearer", grants={"alice": {"team/npa-app"}})
    registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL)
    refused: list[bool] = []
    challenge = f'Bearer realm="{registry.realm}",service="{registry.service}"'

    def revoke_once(request: httpx.Request) -> httpx.Response | None:
        if "/blobs/" in request.url.path and not refused:
            refused.append(True)
            return httpx.Response(401, headers={"WWW-Authenticate": challenge + ',error="x"'})
        return None

    registry.faults.append(revoke_once)

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1", credentials=[ALICE])

    assert read.labels == mock.CONTRACT_LABEL
    blobs = registry.blob_requests()
    assert [b.headers.get("authorization", "")[:7] for b in blobs] == [
        "Bearer ",
        "",
        "Bearer ",
        "Bearer ",
    ]


def test_labels_blob_redirected_to_another_origin_drops_authorization() -> None:
    registry = MockRegistry(auth="bearer", public={"team/npa-app"})
    _, _, config = registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL)
    store = "https://bucket.s3.example.net/blob?X-Amz-Signature=abc"
    at_store: list[httpx.Request] = []

    def s3(request: httpx.Request) -> httpx.Response | None:
        if request.url.host == "bucket.s3.example.net":
            at_store.append(request)
            return httpx.Response(200, content=registry.blobs[("team/npa-app", config)])
        if "/blobs/" in request.url.path:
            return httpx.Response(307, headers={"Location": store})
        return None

    registry.faults.append(s3)

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert read.labels == mock.CONTRACT_LABEL
    (redirected,) = registry.blob_requests()
    assert redirected.headers["authorization"].startswith("Bearer ")
    (fetched,) = at_store
    assert "authorization" not in fetched.headers
    assert fetched.url.params["X-Amz-Signature"] == "abc"


def _tamper(path: str, body: bytes) -> Callable[[httpx.Request], httpx.Response | None]:
    return lambda r: httpx.Response(200, content=body) if path in r.url.path else None


@pytest.mark.parametrize(
    ("where", "body", "code"),
    [
        ("/blobs/", b'{"config": {"Labels": {}}}', "DIGEST_MISMATCH"),
        ("/manifests/sha256:", b'{"config": {}}', "DIGEST_MISMATCH"),
    ],
    ids=["config-blob", "platform-manifest"],
)
def test_labels_body_not_matching_its_digest_error(where: str, body: bytes, code: str) -> None:
    registry = MockRegistry()
    registry.add_image("team/npa-app", "1", mock.CONTRACT_LABEL, index=True)
    registry.faults.append(_tamper(where, body))

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert read.failure is not None and not read.labels
    assert (read.failure.status, read.failure.error_code) == (CheckStatus.ERROR, code)


def test_labels_malformed_config_json_error() -> None:
    registry = MockRegistry()
    registry.blobs[("team/npa-app", mock.digest(b"not json"))] = b"not json"
    registry.add("team/npa-app", "1", mock.image_manifest_body(b"not json"))

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert read.failure is not None
    assert (read.failure.status, read.failure.error_code) == (CheckStatus.ERROR, None)
    assert "not a JSON object" in read.failure.detail


def test_labels_missing_blob_classified_failure() -> None:
    registry = MockRegistry()
    _, _, config = registry.add_image("team/npa-app", "1", None)
    del registry.blobs[("team/npa-app", config)]

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert read.failure is not None
    assert (read.failure.http_status, read.failure.error_code) == (404, "BLOB_UNKNOWN")


def test_labels_transport_failure_unreachable() -> None:
    registry = MockRegistry()
    registry.add_image("team/npa-app", "1", None)

    def drop(request: httpx.Request) -> httpx.Response | None:
        if "/blobs/" in request.url.path:
            raise httpx.ReadTimeout("read timed out", request=request)
        return None

    registry.faults.append(drop)

    _, read = labels_of(registry, f"{HOST}/team/npa-app:1")

    assert read.failure is not None
    assert read.failure.status is CheckStatus.UNREACHABLE


def test_labels_of_a_failed_check_is_a_bug() -> None:
    with (
        make(MockRegistry()) as client,
        pytest.raises(InvariantError, match="ok manifest check"),
    ):
        client.image_labels(ref(f"{HOST}/a:1"), ManifestCheck(CheckStatus.NOT_FOUND))
