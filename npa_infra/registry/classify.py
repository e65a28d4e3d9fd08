"""From a registry's answer to a status, a detail and a remedy (registry.md §2.2); pure.

``answer`` decides one HTTP answer of the manifest or the token endpoint,
given which attempt produced it. It is one ordered chain of early returns;
``USE_CREDENTIALS`` (rather than a status) tells the client that the next
step is the credentialed token request, which only happens when the host
has a credential and the realm is trusted. Everything else is final.
``transport`` classifies a failure to get any answer at all: always
``unreachable``, never a permission problem. ``error_body`` and
``retry_after`` read the registry's JSON error list and ``Retry-After``
without ever raising.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from npa_infra.registry.models import CheckStatus, ManifestCheck

__all__ = [
    "BASIC_DETAIL",
    "Attempt",
    "Verdict",
    "answer",
    "basic_challenge",
    "digest_mismatch",
    "error_body",
    "malformed",
    "retry_after",
    "transport",
]

BASIC_DETAIL = (
    "registry requests Basic auth; credentials are only sent to an HTTPS Bearer token realm"
)
RERUN = "npa workbench workflow preflight-images SPEC"
Source = Literal["manifest", "token"]


class Attempt(StrEnum):
    """Which request produced the answer being classified (registry.md §2 token flow)."""

    NO_TOKEN = "no_token"  # the first, anonymous manifest request
    ANONYMOUS_TOKEN = "anonymous_token"  # with (or asking for) an anonymous token
    CREDENTIALED = "credentialed"  # with (or asking for) a token bought with the host's credential


@dataclass(frozen=True, slots=True)
class Verdict:
    """A final check, or ``check is None``: ask the realm again with the host's credential."""

    check: ManifestCheck | None

    @property
    def use_credentials(self) -> bool:
        return self.check is None


USE_CREDENTIALS = Verdict(None)


def error_body(body: bytes) -> tuple[tuple[str, ...], str]:
    """The registry error codes and the first message of ``{"errors": [{code, message}]}``."""
    try:
        data = json.loads(body.decode("utf-8", errors="replace")) if body else None
    except (ValueError, RecursionError):
        return (), ""
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list):
        return (), ""
    codes = tuple(str(e["code"]) for e in errors if isinstance(e, dict) and "code" in e)
    messages = [str(e.get("message", "")) for e in errors if isinstance(e, dict)]
    return codes, next((m for m in messages if m), "")


def retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds; None when absent or an HTTP date (which we never wait for)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if 0 <= seconds < 1e9 else None


def _check(
    status: CheckStatus, detail: str, remedy: str, http: int | None, code: str | None
) -> Verdict:
    return Verdict(ManifestCheck(status, detail[:500], remedy, http, code))


def answer(
    http_status: int,
    *,
    source: Source,
    attempt: Attempt,
    host: str,
    repository: str,
    codes: tuple[str, ...] = (),
    message: str = "",
    challenge_error: str = "",
    has_credential: bool = False,
    realm: str = "",
    realm_trusted: bool = False,
    retry_after_header: str | None = None,
) -> Verdict:
    """Classify one non-200 answer of the manifest (``source="manifest"``) or token endpoint."""
    code = codes[0] if codes else (challenge_error or None)
    said = f": {message}" if message else ""
    where = "token endpoint" if source == "token" else "registry"
    if http_status == 429:
        # registry.md §2.2: a 429 is an error whose detail carries Retry-After.
        wait = retry_after_header or "not given"
        return _check(
            CheckStatus.ERROR,
            f"{where} rate limit (429 {code or 'TOOMANYREQUESTS'}); Retry-After: {wait}",
            f"wait {wait if retry_after_header else 'a while'} seconds, then rerun {RERUN}",
            http_status,
            code or "TOOMANYREQUESTS",
        )
    if http_status in (401, 403) and attempt is Attempt.ANONYMOUS_TOKEN and has_credential:
        if realm_trusted:
            return USE_CREDENTIALS
        # registry.md §2.1: an untrusted realm only ever gets anonymous requests.
        return _check(
            CheckStatus.UNTRUSTED_REALM,
            f"anonymous pull denied ({http_status}) and credentials withheld: token realm "
            f"{realm} is not a trusted HTTPS host for {host}",
            "if you trust that realm, add its host to registry.trusted_token_realms in "
            f"$NPA_HOME/config.yaml, then rerun {RERUN}",
            http_status,
            code,
        )
    if http_status == 401:
        if attempt is Attempt.CREDENTIALED:
            # registry.md §2.2: 401 after a credentialed token (or a rejected login) is unauthorized.
            what = (
                f"token endpoint rejected the credential for {host}"
                if source == "token"
                else f"the credential for {host} does not grant pull on {repository}"
            )
            return _check(
                CheckStatus.UNAUTHORIZED,
                f"401 {what}{said}",
                f"check the username and password configured for {host} "
                "(NPA_REGISTRY_SERVER/USERNAME/PASSWORD or SKYPILOT_DOCKER_*), then rerun " + RERUN,
                http_status,
                code,
            )
        if attempt is Attempt.NO_TOKEN:
            return Verdict(
                malformed(f"{where} answered 401 without a Bearer or Basic challenge", 401)
            )
        # registry.md §2.2: anonymous insufficient_scope with no credential for the host.
        return _check(
            CheckStatus.NO_CREDENTIALS,
            f"anonymous pull of {repository} denied (401 {code or 'UNAUTHORIZED'}); the "
            f"repository is private or does not exist, and no credential is configured for {host}",
            f"export NPA_REGISTRY_SERVER={host} NPA_REGISTRY_USERNAME=… NPA_REGISTRY_PASSWORD=…, "
            f"then rerun {RERUN}",
            http_status,
            code,
        )
    if http_status == 403:
        return _check(
            CheckStatus.FORBIDDEN,
            f"403 {code or 'DENIED'} from the {where}{said}",
            f"the credential for {host} is refused: refresh it (e.g. a new token with pull or "
            f"read:packages) or ask for pull access to {repository}, then rerun {RERUN}",
            http_status,
            code,
        )
    if http_status == 404 and source == "manifest":
        return _check(
            CheckStatus.NOT_FOUND,
            f"404 {code or 'no registry error code'}{said}",
            f"push the image, or select another with --image-override TOOL_REF=IMAGE, then "
            f"rerun {RERUN}",
            http_status,
            code,
        )
    if http_status >= 500:
        return _check(
            CheckStatus.ERROR,
            f"{where} server error {http_status}{said}",
            f"retry later: rerun {RERUN}",
            http_status,
            code,
        )
    return _check(
        CheckStatus.ERROR,
        f"unexpected HTTP {http_status} from the {where}{said}",
        f"check the registry address and the image reference, then rerun {RERUN}",
        http_status,
        code,
    )


def basic_challenge(http_status: int = 401) -> ManifestCheck:
    """registry.md §2.1: a Basic challenge never receives credentials."""
    return ManifestCheck(
        CheckStatus.UNAUTHORIZED,
        BASIC_DETAIL,
        "the in-cluster pull probe is the authority for Basic-auth registries; submit with "
        "--no-preflight-images, or serve the registry behind a Bearer token realm",
        http_status,
        None,
    )


def malformed(detail: str, http_status: int | None = None) -> ManifestCheck:
    """A malformed answer is ``error`` (registry.md §2.2)."""
    return ManifestCheck(
        CheckStatus.ERROR,
        detail[:500],
        f"the registry answered in a way npa-infra cannot verify; rerun {RERUN} later",
        http_status,
        None,
    )


def digest_mismatch(
    expected: str, actual: str, *, what: str, body: str = "the manifest body"
) -> ManifestCheck:
    """registry.md §3: the body must hash to the digest the registry (or the reference) names."""
    return ManifestCheck(
        CheckStatus.ERROR,
        f"digest mismatch: {what} names {expected} but {body} hashes to {actual}",
        "do not use this image: the registry served content other than what it names; report it "
        "to the registry operator",
        200,
        "DIGEST_MISMATCH",
    )


def transport(kind: str, host: str, detail: str) -> ManifestCheck:
    """No answer at all (DNS, TCP, TLS, timeout): ``unreachable``, never a permission problem."""
    return ManifestCheck(
        CheckStatus.UNREACHABLE,
        f"{kind} reaching {host}: {detail}"[:500],
        f"check that {host} resolves and is reachable from here (network, VPN, proxy, TLS CA), "
        f"then rerun {RERUN}",
        None,
        None,
    )
