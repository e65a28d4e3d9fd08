"""``RegistryClient``: the manifest check over HTTP (registry.md §2-§3, runtime-reference.md §7).

For one reference: ``GET /v2/<repo>/manifests/<ref>`` with the four media
types; on a Bearer challenge, an anonymous token first, then (only when the
host has a credential and the realm is trusted, registry.md §2.1) a token
bought with that credential; a Basic challenge never gets credentials. A 200
is verified by ``manifest.verify``: ``Docker-Content-Digest`` and a digest
reference must both equal the sha256 of the exact body bytes, and an index
resolves to the platform child the cluster will pull. ``tags/list`` is never asked.

``image_labels`` (only for trusted images, ``contract.is_trusted``) reads the
labels of the manifest the cluster pulls with two more requests: that
manifest by its digest, then its config blob, each verified against its
digest. It reuses the token that served the check while it is valid, so no
new token is bought and no anonymous request is repeated.

Transport rules: HTTPS, except that loopback hosts (and ``insecure_hosts``)
fall back to plain HTTP when the server does not speak TLS (cli.md §0).
Redirects are followed by hand and drop ``Authorization`` on any change of
origin. A 429 waits once for a ``Retry-After`` of at most
``max_retry_after`` seconds (``sleep`` is injected). One pooled
``httpx.Client`` serves every thread; tokens are cached per
``(realm, service, scope, credential)`` until shortly before they expire,
and concurrent checks needing the same token fetch it once.

Error tree: nothing a registry or the network does escapes as an exception.
``translate`` maps every ``httpx`` transport and decoding error to a
``ManifestCheck`` (``unreachable`` for DNS, TCP, TLS and timeouts; ``error``
for malformed HTTP). httpx is imported inside methods: the constructor does
no I/O and importing this module stays cheap.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from npa_infra.errors import InvariantError
from npa_infra.registry import challenge, classify, contract, manifest
from npa_infra.registry.classify import Attempt
from npa_infra.registry.credentials import Credential, CredentialSet
from npa_infra.registry.models import (
    LINUX_AMD64,
    MANIFEST_ACCEPT,
    CheckStatus,
    ImageRef,
    ManifestCheck,
    Platform,
    is_loopback_host,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["RegistryClient", "translate"]

USER_AGENT = "npa-infra-preflight/1"
MAX_BODY = 4 * 1024 * 1024  # distribution refuses manifests above 4 MiB
MAX_REDIRECTS = 5
_TokenKey = tuple[str, str, tuple[str, ...], tuple[str, str] | None]
# the challenge, scopes and credential whose token last served a repository
_Grant = tuple[challenge.Challenge, tuple[str, ...], Credential | None]


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    challenges: str
    body: bytes


class _Final(Exception):
    """Unwinds a check with its final result (never leaves this module)."""

    def __init__(self, check: ManifestCheck) -> None:
        super().__init__(check.status.value)
        self.check = check


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 16:
        yield current
        current = current.__cause__ or current.__context__
        seen += 1


def _tls_cause(exc: BaseException) -> ssl.SSLError | None:
    return next((e for e in _chain(exc) if isinstance(e, ssl.SSLError)), None)


def _speaks_plain_http(exc: BaseException) -> bool:
    """A TLS handshake that failed because the peer answered in plain HTTP (not a bad certificate)."""
    cause = _tls_cause(exc)
    if cause is None or isinstance(cause, ssl.SSLCertVerificationError):
        return False
    text = str(cause).upper()
    return any(m in text for m in ("WRONG_VERSION_NUMBER", "RECORD_LAYER", "HTTP_REQUEST", "EOF"))


def translate(exc: Exception, host: str) -> ManifestCheck:
    """Map an httpx failure to a check: no answer is ``unreachable``, a broken answer ``error``."""
    import httpx

    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return classify.transport("timeout", host, detail)
    if isinstance(exc, httpx.ConnectError):
        if _tls_cause(exc) is not None:
            return classify.transport("TLS failure", host, detail)
        return classify.transport("connection failure", host, detail)
    if isinstance(exc, httpx.ProxyError):
        return classify.transport("proxy failure", host, detail)
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
        return classify.transport("connection lost", host, detail)
    return classify.malformed(f"malformed HTTP exchange with {host}: {detail}")


class RegistryClient:
    """The real ``base.Registry``: one pooled httpx client, thread-safe, no I/O until used."""

    def __init__(
        self,
        *,
        credentials: Iterable[Credential] = (),
        trusted_realms: Iterable[str] = (),
        insecure_hosts: Iterable[str] = (),
        transport: httpx.BaseTransport | None = None,
        verify: str | bool = True,
        timeout: float = 10.0,
        max_retry_after: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = CredentialSet(credentials)
        self._trusted = tuple(trusted_realms)
        self._insecure = frozenset(h.strip().lower() for h in insecure_hosts if h.strip())
        self._transport = transport
        self._verify = verify
        self._timeout = timeout
        self._max_retry_after = max_retry_after
        self._sleep = sleep
        self._monotonic = monotonic
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._tokens: dict[_TokenKey, tuple[str, float]] = {}
        self._token_locks: dict[_TokenKey, threading.Lock] = {}
        self._schemes: dict[str, str] = {}
        self._grants: dict[tuple[str, str], _Grant] = {}

    # -- lifecycle -----------------------------------------------------------
    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                import httpx

                verify: ssl.SSLContext | bool = (
                    ssl.create_default_context(cafile=self._verify)
                    if isinstance(self._verify, str)
                    else self._verify
                )
                self._client = httpx.Client(
                    transport=self._transport,
                    verify=verify,
                    timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 5.0)),
                    follow_redirects=False,
                    limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
                    headers={"User-Agent": USER_AGENT},
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RegistryClient(credentials={self._credentials!r}, trusted={list(self._trusted)})"

    # -- the check ---------------------------------------------------------------
    def check_manifest(self, ref: ImageRef, platform: Platform = LINUX_AMD64) -> ManifestCheck:
        """The registry's answer for ``ref``, classified; never raises for a registry answer."""
        try:
            return self._check(ref, platform)
        except _Final as final:
            return final.check

    def image_labels(self, ref: ImageRef, check: ManifestCheck) -> contract.LabelsResult:
        """``config.Labels`` of the manifest the cluster pulls (registry.md §3), or why not.

        That manifest is the check's platform child for an index, else the
        manifest itself; never raises for a registry answer.

        Raises:
            InvariantError: ``check`` is not an ``ok`` check with a digest.
        """
        digest = check.platform_digest or check.digest
        if check.status is not CheckStatus.OK or not digest:
            raise InvariantError(f"image_labels needs an ok manifest check, got {check.status}")
        try:
            return self._labels(ref, digest)
        except _Final as final:
            return contract.LabelsResult(failure=final.check)

    def _check(self, ref: ImageRef, platform: Platform) -> ManifestCheck:
        path = f"/v2/{ref.repository}/manifests/{ref.reference}"
        answer = self._authorized(ref, lambda auth: self._get(ref, path, auth))
        return self._verify_body(answer, ref, platform)

    def _labels(self, ref: ImageRef, digest: str) -> contract.LabelsResult:
        path = f"/v2/{ref.repository}/manifests/{digest}"
        child = self._authorized(ref, lambda auth: self._get(ref, path, auth), reuse=True)
        config = manifest.config_digest(
            child.body, digest=digest, header_digest=child.headers.get("docker-content-digest", "")
        )
        if isinstance(config, ManifestCheck):
            return contract.LabelsResult(failure=config)
        blob = f"/v2/{ref.repository}/blobs/{config}"
        answer = self._authorized(ref, lambda auth: self._get(ref, blob, auth, "*/*"), reuse=True)
        labels = manifest.config_labels(answer.body, digest=config)
        if isinstance(labels, ManifestCheck):
            return contract.LabelsResult(failure=labels)
        return contract.LabelsResult(labels=labels, config_digest=config)

    def _authorized(
        self, ref: ImageRef, fetch: Callable[[str | None], _Answer], *, reuse: bool = False
    ) -> _Answer:
        """The 200 answer of ``fetch`` through the token flow (registry.md §2); else ``_Final``.

        With ``reuse`` the token that last served this repository goes first
        (a later request for an image already checked); a 401 falls back to the flow.
        """
        reused = self._reused(ref, fetch) if reuse else None
        if reused is not None:
            return reused
        first = fetch(None)
        if first.status == 200:
            return first
        chosen = challenge.select(challenge.parse(first.challenges))
        if (
            first.status != 401
            or chosen is None
            or (chosen.scheme == "bearer" and not chosen.realm)
        ):
            raise _Final(self._final(first, ref, "manifest", Attempt.NO_TOKEN))
        if chosen.scheme == "basic":
            raise _Final(classify.basic_challenge(first.status))
        credential = self._credentials.for_registry(ref.registry)
        trusted = challenge.realm_trusted(chosen.realm, ref.registry, self._trusted)
        scopes = tuple(chosen.scope.split()) or (f"repository:{ref.repository}:pull",)
        for attempt in (Attempt.ANONYMOUS_TOKEN, Attempt.CREDENTIALED):
            use = credential if attempt is Attempt.CREDENTIALED else None
            token = self._token(ref, chosen, scopes, use)
            if isinstance(token, _Answer):
                answer, source = token, "token"
            else:
                answer, source = fetch(f"Bearer {token}"), "manifest"
                if answer.status == 200:
                    with self._lock:
                        self._grants[(ref.registry, ref.repository)] = (chosen, scopes, use)
                    return answer
            verdict = self._verdict(answer, ref, source, attempt, credential, chosen, trusted)
            if verdict.check is not None:
                raise _Final(verdict.check)
        raise AssertionError("the credentialed attempt always ends the flow")  # pragma: no cover

    def _reused(self, ref: ImageRef, fetch: Callable[[str | None], _Answer]) -> _Answer | None:
        """``fetch`` with the repository's last token; None when there is none or it was refused."""
        with self._lock:
            grant = self._grants.get((ref.registry, ref.repository))
        if grant is None:
            return None
        token = self._token(ref, *grant)  # the cached token, unless it is about to expire
        if isinstance(token, _Answer):
            return None
        answer = fetch(f"Bearer {token}")
        if answer.status == 401:
            return None
        if answer.status != 200:
            raise _Final(self._final(answer, ref, "manifest", Attempt.NO_TOKEN))
        return answer

    def _verdict(
        self,
        answer: _Answer,
        ref: ImageRef,
        source: str,
        attempt: Attempt,
        credential: Credential | None,
        chosen: challenge.Challenge,
        trusted: bool,
    ) -> classify.Verdict:
        codes, message = classify.error_body(answer.body)
        again = challenge.select(challenge.parse(answer.challenges))
        return classify.answer(
            answer.status,
            source="token" if source == "token" else "manifest",
            attempt=attempt,
            host=ref.registry,
            repository=ref.repository,
            codes=codes,
            message=message,
            challenge_error=again.error if again else "",
            has_credential=credential is not None,
            realm=chosen.realm,
            realm_trusted=trusted,
            retry_after_header=answer.headers.get("retry-after"),
        )

    def _final(
        self, answer: _Answer, ref: ImageRef, source: str, attempt: Attempt
    ) -> ManifestCheck:
        verdict = self._verdict(
            answer, ref, source, attempt, None, challenge.Challenge("", {}), False
        )
        assert verdict.check is not None  # without a credential every verdict is final
        return verdict.check

    # -- tokens ----------------------------------------------------------------------
    def _token(
        self,
        ref: ImageRef,
        chosen: challenge.Challenge,
        scopes: tuple[str, ...],
        credential: Credential | None,
    ) -> str | _Answer:
        key: _TokenKey = (
            chosen.realm,
            chosen.service,
            scopes,
            credential.key if credential else None,
        )
        with self._lock:
            lock = self._token_locks.setdefault(key, threading.Lock())
        with lock:  # single flight: concurrent checks of one repository fetch one token
            cached = self._tokens.get(key)
            if cached is not None and cached[1] > self._monotonic():
                return cached[0]
            got = self._fetch_token(ref, chosen, scopes, credential)
            if isinstance(got, _Answer):
                return got
            token, lifetime = got
            self._tokens[key] = (token, self._monotonic() + max(lifetime - 10.0, 1.0))
            return token

    def _fetch_token(
        self,
        ref: ImageRef,
        chosen: challenge.Challenge,
        scopes: tuple[str, ...],
        credential: Credential | None,
    ) -> tuple[str, float] | _Answer:
        try:
            url = challenge.token_url(chosen.realm, chosen.service, scopes)
        except ValueError as exc:
            raise _Final(classify.malformed(str(exc))) from None
        realm = urlsplit(url)
        if realm.scheme == "http" and not self._plain_allowed(realm.hostname or ""):
            # cli.md §0: plain HTTP only to loopback (or --insecure-registry) hosts.
            raise _Final(
                ManifestCheck(
                    CheckStatus.UNTRUSTED_REALM,
                    f"token realm {chosen.realm} uses plain HTTP on a non-loopback host; "
                    "it was not contacted and credentials were withheld",
                    f"pass --insecure-registry {realm.hostname} only if you trust that network",
                    None,
                    None,
                )
            )
        authorization = None
        if credential is not None:
            pair = f"{credential.username}:{credential.password.get_secret_value()}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        answer = self._send(url, authorization, accept="application/json", host=ref.registry)
        if answer.status != 200:
            return answer
        try:
            data = json.loads(answer.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            data = None
        token = None
        if isinstance(data, dict):
            token = data.get("token") or data.get("access_token")
        if not isinstance(token, str) or not token:
            raise _Final(
                classify.malformed(f"token endpoint {chosen.realm} answered 200 without a token")
            )
        lifetime = data.get("expires_in", 60) if isinstance(data, dict) else 60
        seconds = float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else 60.0
        return token, seconds

    # -- HTTP ----------------------------------------------------------------------------
    def _plain_allowed(self, host: str) -> bool:
        return is_loopback_host(host) or host.lower() in self._insecure

    def _get(
        self, ref: ImageRef, path: str, authorization: str | None, accept: str = MANIFEST_ACCEPT
    ) -> _Answer:
        import httpx

        scheme = self._schemes.get(ref.registry)
        if scheme is None and self._plain_allowed(ref.host):
            scheme, answer = self._probe_scheme(ref, path, authorization)
            if answer is not None:
                return answer
        try:
            return self._send(
                f"{scheme or 'https'}://{ref.registry}{path}",
                authorization,
                accept=accept,
                host=ref.registry,
                raw=True,
            )
        except httpx.HTTPError as exc:
            raise _Final(translate(exc, ref.registry)) from None

    def _probe_scheme(
        self, ref: ImageRef, path: str, authorization: str | None
    ) -> tuple[str, _Answer | None]:
        """HTTPS first, plain HTTP when the loopback (or insecure) peer does not speak TLS.

        Concurrent checks do not wait for each other: each one whose scheme is
        still unknown tries HTTPS itself, and the first outcome is remembered.
        Waiting would serialise a whole TLS handshake and first answer in front
        of every other check (the bench's ``--mode token``); a failed handshake
        against a plain-HTTP peer costs one round trip, in parallel. An HTTPS
        answer is returned as is.
        """
        import httpx

        try:
            answer = self._send(
                f"https://{ref.registry}{path}",
                authorization,
                accept=MANIFEST_ACCEPT,
                host=ref.registry,
                raw=True,
            )
        except httpx.ConnectError as exc:
            if not _speaks_plain_http(exc):
                raise _Final(translate(exc, ref.registry)) from None
            return self._schemes.setdefault(ref.registry, "http"), None
        except httpx.HTTPError as exc:
            raise _Final(translate(exc, ref.registry)) from None
        self._schemes.setdefault(ref.registry, "https")
        return "https", answer

    def _send(
        self,
        url: str,
        authorization: str | None,
        *,
        accept: str,
        host: str,
        raw: bool = False,
    ) -> _Answer:
        """One request with hand-followed redirects and one bounded wait on 429.

        With ``raw`` httpx errors propagate (the manifest request decides on
        the plain-HTTP fallback); otherwise they end the check.
        """
        import httpx

        try:
            answer = self._follow(url, authorization, accept)
            wait = classify.retry_after(answer.headers.get("retry-after"))
            if answer.status == 429 and wait is not None and wait <= self._max_retry_after:
                self._sleep(wait)
                answer = self._follow(url, authorization, accept)
            return answer
        except httpx.HTTPError as exc:
            if raw:
                raise
            raise _Final(translate(exc, host)) from None
        except httpx.InvalidURL as exc:
            raise _Final(classify.malformed(f"invalid URL from {host}: {exc}")) from None

    def _follow(self, url: str, authorization: str | None, accept: str) -> _Answer:
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Accept": accept}
            if authorization:
                headers["Authorization"] = authorization
            answer = self._once(url, headers)
            location = answer.headers.get("location")
            if answer.status not in (301, 302, 303, 307, 308) or not location:
                return answer
            target = urljoin(url, location)
            parts = urlsplit(target)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _Final(classify.malformed(f"redirect to an unusable location {location!r}"))
            if parts.scheme == "http" and not self._plain_allowed(parts.hostname):
                raise _Final(classify.malformed(f"redirect downgrades to plain HTTP: {target}"))
            if _origin(target) != _origin(url):
                authorization = None  # registry.md §2.1: another origin never sees Authorization
            url = target
        raise _Final(classify.malformed(f"more than {MAX_REDIRECTS} redirects from {url}"))

    def _once(self, url: str, headers: dict[str, str]) -> _Answer:
        client = self._http()
        with client.stream("GET", url, headers=headers) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise _Final(
                        classify.malformed(f"answer from {url} is larger than {MAX_BODY} bytes")
                    )
                chunks.append(chunk)
            kept = {k: response.headers[k] for k in _KEPT if k in response.headers}
            challenges = ", ".join(response.headers.get_list("www-authenticate"))
            return _Answer(response.status_code, kept, challenges, b"".join(chunks))

    def _verify_body(self, answer: _Answer, ref: ImageRef, platform: Platform) -> ManifestCheck:
        return manifest.verify(
            answer.body,
            ref=ref,
            platform=platform,
            header_digest=answer.headers.get("docker-content-digest", ""),
            content_type=answer.headers.get("content-type", ""),
        )


_KEPT = ("docker-content-digest", "content-type", "retry-after", "location")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.scheme, (parts.hostname or "").lower(), port)
