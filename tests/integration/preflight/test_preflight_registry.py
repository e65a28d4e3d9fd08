"""Image preflight against the real registry (distribution 2.8.2) in every mode (registry.md §5).

``RegistryClient`` talks to the session's registries exactly as it talks to
ghcr.io: plain HTTP on loopback (mode A), TLS plus token auth with a recording
issuer (mode B, ``x5c`` and ``kid``), htpasswd Basic (mode C), hostile and
foreign realms, and the fault proxy for what a real registry cannot do (429,
digest lies, redirects). Where credentials went is asserted on what the
issuer and the proxy recorded.
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from npa_infra.registry import credentials, reference
from npa_infra.registry.classify import BASIC_DETAIL
from npa_infra.registry.client import RegistryClient
from npa_infra.registry.models import LINUX_AMD64, CheckStatus, ImageRef, ManifestCheck
from npa_infra.workflow.planning import api
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.target.services import Services
from preflight import images as preflight_images
from preflight.targets import ImageTarget
from tests.support.registry.faults import FaultProxy
from tests.support.registry.server import Registry

ProxyFactory = Callable[[Registry], FaultProxy]


def _ref(text: str) -> ImageRef:
    parsed = reference.parse(text)
    assert isinstance(parsed, ImageRef), parsed
    return parsed


def _client(
    registry: Registry,
    *,
    user: str | None = None,
    password: str | None = None,
    host: str | None = None,
    **kwargs: object,
) -> RegistryClient:
    env = {}
    if password is not None:
        env = {
            "NPA_REGISTRY_SERVER": host or registry.host,
            "NPA_REGISTRY_USERNAME": user or "",
            "NPA_REGISTRY_PASSWORD": password,
        }
    verify = str(registry.ca_path) if registry.ca_path is not None else True
    return RegistryClient(
        credentials=credentials.from_environment(env),
        verify=verify,
        **kwargs,  # type: ignore[arg-type]  # the remaining RegistryClient keywords
    )


def _check(registry: Registry, text: str, **kwargs: object) -> ManifestCheck:
    with _client(registry, **kwargs) as client:  # type: ignore[arg-type]  # keyword pass-through
        return client.check_manifest(_ref(text), LINUX_AMD64)


# -- mode A: plain HTTP on loopback -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["oci-index", "docker-list", "oci-manifest", "docker-manifest"])
def test_plain_ok_by_tag_digest_of_exact_bytes(registry_plain: Registry, kind: str) -> None:
    pushed = registry_plain.push("public/app", f"k-{kind}", kind=kind)  # type: ignore[arg-type]  # ImageKind literal

    result = _check(registry_plain, registry_plain.ref("public/app", f"k-{kind}"))

    assert result.status is CheckStatus.OK, result.detail
    assert result.digest == pushed.digest
    if kind in ("oci-index", "docker-list"):
        assert result.platform_digest == pushed.child("linux/amd64").digest
    else:
        assert result.platform_digest is None


def test_plain_ok_by_digest(registry_plain: Registry) -> None:
    pushed = registry_plain.push("public/app", "by-digest")

    result = _check(registry_plain, registry_plain.ref("public/app", digest=pushed.digest))

    assert (result.status, result.digest) == (CheckStatus.OK, pushed.digest)


def test_plain_missing_tag_not_found(registry_plain: Registry) -> None:
    registry_plain.push("public/app", "v1")

    result = _check(registry_plain, registry_plain.ref("public/app", "no-such-tag"))

    assert result.status is CheckStatus.NOT_FOUND
    assert (result.http_status, result.error_code) == (404, "MANIFEST_UNKNOWN")


def test_plain_missing_repository_not_found(registry_plain: Registry) -> None:
    result = _check(registry_plain, registry_plain.ref("nobody/never", "v1"))

    assert result.status is CheckStatus.NOT_FOUND
    assert result.http_status == 404


def test_plain_index_without_amd64_not_found_names_platforms(registry_plain: Registry) -> None:
    registry_plain.push("public/arm-only", "v1", platforms=("linux/arm64",))

    result = _check(registry_plain, registry_plain.ref("public/arm-only", "v1"))

    assert result.status is CheckStatus.NOT_FOUND
    assert result.error_code == "PLATFORM_NOT_FOUND"
    assert "linux/arm64" in result.detail


def test_plain_index_two_platforms_amd64_child(registry_plain: Registry) -> None:
    pushed = registry_plain.push("public/multi", "v1", platforms=("linux/arm64", "linux/amd64"))

    result = _check(registry_plain, registry_plain.ref("public/multi", "v1"))

    assert result.platform_digest == pushed.child("linux/amd64").digest
    assert result.digest == pushed.digest


def test_unreachable_closed_port_and_unknown_host(registry_plain: Registry) -> None:
    closed = _check(registry_plain, "127.0.0.1:1/public/app:v1")
    unknown = _check(registry_plain, "registry.example.invalid/openpi@sha256:" + "0" * 64)

    assert closed.status is CheckStatus.UNREACHABLE
    assert unknown.status is CheckStatus.UNREACHABLE
    assert closed.http_status is None and unknown.http_status is None


# -- mode B: TLS + token --------------------------------------------------------------------


@pytest.fixture(params=["registry_token", "registry_token_kid"])
def token_registry(request: pytest.FixtureRequest) -> Registry:
    registry: Registry = request.getfixturevalue(request.param)
    registry.push("team/app", "v1")
    registry.push("team/other", "v1")
    registry.push("public/base", "v1")
    registry.reset()  # forget the pushes' (unrecorded) noise
    return registry


def _issued(registry: Registry) -> list[tuple[str | None, int]]:
    assert registry.issuer is not None
    return [
        (r.authorization and r.authorization.split()[0], r.status) for r in registry.issuer.requests
    ]


def test_token_public_repository_anonymous_token_ok(token_registry: Registry) -> None:
    result = _check(token_registry, token_registry.ref("public/base", "v1"))

    assert result.status is CheckStatus.OK, result.detail
    assert _issued(token_registry) == [(None, 200)]


def test_token_private_anonymous_no_credentials(token_registry: Registry) -> None:
    result = _check(token_registry, token_registry.ref("team/app", "v1"))

    assert result.status is CheckStatus.NO_CREDENTIALS
    assert result.error_code in ("UNAUTHORIZED", "insufficient_scope")
    assert _issued(token_registry) == [(None, 200)]


def test_token_private_with_credentials_anonymous_first_then_basic(
    token_registry: Registry,
) -> None:
    pushed = token_registry.push("team/app", "v1")
    token_registry.reset()

    result = _check(
        token_registry, token_registry.ref("team/app", "v1"), user="bob", password="bobpw"
    )

    assert (result.status, result.digest) == (CheckStatus.OK, pushed.digest)
    assert _issued(token_registry) == [(None, 200), ("Basic", 200)]
    assert token_registry.issuer is not None
    assert all(r.params["account"] == ["npa-test"] for r in token_registry.issuer.requests)


def test_token_wrong_password_unauthorized(token_registry: Registry) -> None:
    result = _check(
        token_registry, token_registry.ref("team/app", "v1"), user="bob", password="nope"
    )

    assert result.status is CheckStatus.UNAUTHORIZED
    assert _issued(token_registry) == [(None, 200), ("Basic", 401)]


def test_token_credential_without_pull_unauthorized(token_registry: Registry) -> None:
    result = _check(
        token_registry, token_registry.ref("team/other", "v1"), user="bob", password="bobpw"
    )

    assert result.status is CheckStatus.UNAUTHORIZED
    assert result.http_status == 401


def test_token_credential_for_other_host_never_sent(token_registry: Registry) -> None:
    result = _check(
        token_registry,
        token_registry.ref("team/app", "v1"),
        user="bob",
        password="bobpw",
        host="ghcr.io",
    )

    assert result.status is CheckStatus.NO_CREDENTIALS
    assert all(kind is None for kind, _ in _issued(token_registry))


def test_token_missing_tag_with_credentials_not_found(token_registry: Registry) -> None:
    result = _check(
        token_registry, token_registry.ref("team/app", "v9"), user="bob", password="bobpw"
    )

    assert result.status is CheckStatus.NOT_FOUND


def test_token_endpoint_403_forbidden(registry_token: Registry) -> None:
    registry_token.push("public/base", "v1")
    assert registry_token.issuer is not None
    registry_token.issuer.switches.status = 403

    result = _check(registry_token, registry_token.ref("public/base", "v1"))

    assert result.status is CheckStatus.FORBIDDEN


def test_token_rogue_key_tokens_unauthorized_with_credentials(registry_token: Registry) -> None:
    registry_token.push("team/app", "v1")
    assert registry_token.issuer is not None
    registry_token.issuer.switches.rogue_key = True

    result = _check(
        registry_token, registry_token.ref("team/app", "v1"), user="bob", password="bobpw"
    )

    assert result.status is CheckStatus.UNAUTHORIZED
    assert result.error_code == "UNAUTHORIZED"


# -- realms that must not receive credentials --------------------------------------------------


def test_hostile_plain_http_realm_never_receives_credentials(
    registry_hostile_realm: Registry,
) -> None:
    registry_hostile_realm.push("team/app", "v1")
    registry_hostile_realm.push("public/base", "v1")
    registry_hostile_realm.reset()

    private = _check(
        registry_hostile_realm,
        registry_hostile_realm.ref("team/app", "v1"),
        user="bob",
        password="bobpw",
    )
    public = _check(
        registry_hostile_realm,
        registry_hostile_realm.ref("public/base", "v1"),
        user="bob",
        password="bobpw",
    )

    assert private.status is CheckStatus.UNTRUSTED_REALM
    assert registry_hostile_realm.realm is not None
    assert registry_hostile_realm.realm.split("?")[0] in private.detail
    assert public.status is CheckStatus.OK  # anonymous access through it is fine
    assert registry_hostile_realm.issuer is not None
    received = registry_hostile_realm.issuer.requests
    assert received and all(r.authorization is None for r in received)
    assert all(r.scheme == "http" for r in received)


def test_foreign_https_realm_untrusted_unless_configured(registry_foreign_realm: Registry) -> None:
    registry_foreign_realm.push("team/app", "v1")
    registry_foreign_realm.reset()
    ref = registry_foreign_realm.ref("team/app", "v1")

    withheld = _check(registry_foreign_realm, ref, user="bob", password="bobpw")
    assert registry_foreign_realm.issuer is not None
    sent_before = [r.authorization for r in registry_foreign_realm.issuer.requests]
    trusted = _check(
        registry_foreign_realm, ref, user="bob", password="bobpw", trusted_realms=["localhost"]
    )

    assert withheld.status is CheckStatus.UNTRUSTED_REALM
    assert sent_before == [None]
    assert trusted.status is CheckStatus.OK


# -- mode C: htpasswd -----------------------------------------------------------------------------


def test_htpasswd_basic_challenge_unauthorized_credentials_withheld(
    registry_htpasswd: Registry, fault_proxy: ProxyFactory
) -> None:
    registry_htpasswd.push("team/app", "v1")
    proxy = fault_proxy(registry_htpasswd)

    result = _check(
        registry_htpasswd,
        f"{proxy.host}/team/app:v1",
        user="alice",
        password="alicepw",
        host=proxy.host,
    )

    assert result.status is CheckStatus.UNAUTHORIZED
    assert result.detail == BASIC_DETAIL
    assert proxy.requests and all(r.authorization is None for r in proxy.requests)


# -- what only the fault proxy can do ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["header", "body"])
def test_digest_mismatch_error(
    registry_plain: Registry, fault_proxy: ProxyFactory, how: str
) -> None:
    registry_plain.push("public/app", "v1")
    proxy = fault_proxy(registry_plain)
    proxy.mismatch_digest(how=how)  # type: ignore[arg-type]  # the Literal spelled as str

    result = _check(registry_plain, f"{proxy.host}/public/app:v1")

    assert result.status is CheckStatus.ERROR
    assert result.error_code == "DIGEST_MISMATCH"
    assert result.digest is None


def test_429_short_retry_after_waits_once_then_ok(
    registry_plain: Registry, fault_proxy: ProxyFactory
) -> None:
    registry_plain.push("public/app", "v1")
    proxy = fault_proxy(registry_plain)
    proxy.rate_limit(retry_after="1", times=1)
    slept: list[float] = []

    result = _check(registry_plain, f"{proxy.host}/public/app:v1", sleep=slept.append)

    assert result.status is CheckStatus.OK
    assert slept == [1.0]


def test_429_long_retry_after_error_without_waiting(
    registry_plain: Registry, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(registry_plain)
    proxy.rate_limit(retry_after="30")
    slept: list[float] = []

    result = _check(registry_plain, f"{proxy.host}/public/app:v1", sleep=slept.append)

    assert result.status is CheckStatus.ERROR
    assert "Retry-After: 30" in result.detail
    assert result.error_code == "TOOMANYREQUESTS"
    assert slept == []


@pytest.mark.parametrize("target", ["other", "downgrade"])
def test_redirect_to_other_origin_drops_authorization(
    registry_token: Registry, fault_proxy: ProxyFactory, target: str
) -> None:
    registry_token.push("public/base", "v1")
    proxy = fault_proxy(registry_token)
    # The first (anonymous) manifest request passes (a zero delay is a pass-through that
    # fires once); the second, carrying the Bearer token, is redirected.
    proxy.delay("/manifests/", seconds=0, times=1)
    proxy.redirect(target=target, times=1)  # type: ignore[arg-type]  # the Literal spelled as str

    with _client(registry_token) as client:
        client.check_manifest(_ref(f"{proxy.host}/public/base:v1"), LINUX_AMD64)

    front = [r for r in proxy.requests if r.origin == "front" and r.fault == "redirect"]
    moved = [r for r in proxy.requests if r.origin == target]
    assert front and front[0].authorization is not None  # the Bearer went to the front only
    assert moved and all(r.authorization is None for r in moved)


def test_dropped_connection_unreachable(
    registry_plain: Registry, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(registry_plain)
    proxy.drop()

    result = _check(registry_plain, f"{proxy.host}/public/app:v1")

    assert result.status is CheckStatus.UNREACHABLE


class _Rendezvous(httpx.BaseTransport):
    """A transport whose first manifest requests wait for each other at a barrier.

    If the checks ran one after another, the barrier would never fill and the
    wait would break: concurrency is asserted as behaviour, not timed (the
    speed budget itself is measured in ``bench/preflight_bench.py``).
    """

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)
        self.inner = httpx.HTTPTransport()
        self.met = 0
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # the one HTTPS probe per loopback registry runs alone, under the client's probe lock
        probing = request.url.scheme == "https"
        if "/manifests/" in request.url.path and not probing and not self.barrier.broken:
            with self._lock:
                waiting = self.met < self.barrier.parties
                self.met += 1
            if waiting:
                self.barrier.wait()
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_twenty_images_are_checked_concurrently(registry_plain: Registry) -> None:
    for n in range(20):
        registry_plain.push(f"public/speed{n}", "v1")
    twenty = [ImageTarget(registry_plain.ref(f"public/speed{n}", "v1"), ("s",)) for n in range(20)]
    transport = _Rendezvous(parties=8)
    with RegistryClient(transport=transport) as client:
        report = preflight_images.check_images(twenty, client)
    assert report.exit_code == 0
    assert not transport.barrier.broken  # 8 manifest requests were in flight at once
    assert len(report.rows) == 20


# -- through the SDK: preflight-images and submit --plan-only ------------------------------------


@pytest.fixture
def spec_on(registry_plain: Registry, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "spec.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: npa.workflow/v0.0.1
            kind: Workflow
            metadata: {{name: on-registry}}
            config: {{bucket: b}}
            resources:
              default: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: "{registry_plain.ref("public/app", "v1")}"}}
              other: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: "{registry_plain.ref("public/tool", "v1")}"}}
            states:
              a:
                run: {{shell: echo a}}
                transitions: [{{when: promote_checkpoint, goto: b}}, {{goto: c}}]
              b:
                run: {{shell: echo b}}
                resources: other
                terminal: true
              c:
                run: {{shell: echo c}}
                terminal: true
            """
        ),
        encoding="utf-8",
    )
    yield path


def test_sdk_preflight_images_real_registry_rows_and_exit_code(
    registry_plain: Registry, spec_on: Path, tmp_path: Path
) -> None:
    registry_plain.push("public/app", "v1")

    with _client(registry_plain) as client:
        report = api.preflight_images(
            spec_on,
            env={"NPA_HOME": str(tmp_path)},
            services=Services(registry=lambda *_: client),
        )

    rows = {r.image: r for r in report.rows}
    assert rows[registry_plain.ref("public/app", "v1")].steps == ("a", "c")
    tool = rows[registry_plain.ref("public/tool", "v1")]
    assert (tool.status, tool.steps) == (CheckStatus.NOT_FOUND, ("b",))
    assert report.exit_code == 1


def test_sdk_submit_plan_only_renders_the_resolved_digest(
    registry_plain: Registry, spec_on: Path, tmp_path: Path
) -> None:
    app = registry_plain.push("public/app", "v1")
    tool = registry_plain.push("public/tool", "v1")
    options = submitflags.SubmitOptions(
        run_id="pinned-1",
        plan_only=True,
        assume_decision="loop_back",
        render_dir=tmp_path / "out",
        resolve_accelerators=False,
    )

    with _client(registry_plain) as client:
        report = pipeline.submit(
            spec_on,
            options,
            env={"NPA_HOME": str(tmp_path / "home")},
            services=Services(registry=lambda *_: client),
        )

    assert isinstance(report, pipeline.SubmitReport)
    assert report.exit_code == 0
    payload = report.to_json()
    # plan-only creates no pull-probe pod: the rows are unproven, the digests still pinned
    assert payload["preflight"]["decision"] == "unproven"
    assert {c["status"] for c in payload["preflight"]["checks"]} == {"target_pull_unverified"}
    text = "".join(job.text for job in report.jobs)
    assert f"{registry_plain.host}/public/app@{app.digest}" in text
    assert ":v1" not in text
    digests = {c["image"]: c["digest"] for c in payload["preflight"]["checks"]}
    assert digests[registry_plain.ref("public/tool", "v1")] == tool.digest  # the other branch
