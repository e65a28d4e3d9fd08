"""The answer classifier (registry.md §2.2): every status, and when credentials are next."""

from __future__ import annotations

import pytest

from npa_infra.registry import classify
from npa_infra.registry.classify import Attempt
from npa_infra.registry.models import CheckStatus

A, T, C = Attempt.NO_TOKEN, Attempt.ANONYMOUS_TOKEN, Attempt.CREDENTIALED

# (http status, source, attempt, has credential, realm trusted) -> status, or "creds"
TABLE = {
    "manifest-404": (404, "manifest", T, False, True, CheckStatus.NOT_FOUND),
    "manifest-404-no-token": (404, "manifest", A, False, False, CheckStatus.NOT_FOUND),
    "manifest-403": (403, "manifest", C, True, True, CheckStatus.FORBIDDEN),
    "manifest-403-no-token": (403, "manifest", A, False, False, CheckStatus.FORBIDDEN),
    "anon-401-no-cred": (401, "manifest", T, False, True, CheckStatus.NO_CREDENTIALS),
    "anon-401-cred-trusted": (401, "manifest", T, True, True, "creds"),
    "anon-401-cred-untrusted": (401, "manifest", T, True, False, CheckStatus.UNTRUSTED_REALM),
    "anon-403-cred-trusted": (403, "manifest", T, True, True, "creds"),
    "cred-401": (401, "manifest", C, True, True, CheckStatus.UNAUTHORIZED),
    "no-token-401-no-challenge": (401, "manifest", A, False, False, CheckStatus.ERROR),
    "token-anon-401-no-cred": (401, "token", T, False, True, CheckStatus.NO_CREDENTIALS),
    "token-anon-401-cred": (401, "token", T, True, True, "creds"),
    "token-anon-403-no-cred": (403, "token", T, False, True, CheckStatus.FORBIDDEN),
    "token-anon-403-untrusted": (403, "token", T, True, False, CheckStatus.UNTRUSTED_REALM),
    "token-cred-401": (401, "token", C, True, True, CheckStatus.UNAUTHORIZED),
    "token-cred-403": (403, "token", C, True, True, CheckStatus.FORBIDDEN),
    "token-404": (404, "token", T, False, True, CheckStatus.ERROR),
    "429": (429, "manifest", T, False, True, CheckStatus.ERROR),
    "500": (500, "manifest", T, False, True, CheckStatus.ERROR),
    "503-token": (503, "token", C, True, True, CheckStatus.ERROR),
    "400": (400, "manifest", T, False, True, CheckStatus.ERROR),
    "418": (418, "manifest", C, True, True, CheckStatus.ERROR),
}


@pytest.mark.parametrize(
    ("http", "source", "attempt", "has_credential", "trusted", "expected"),
    TABLE.values(),
    ids=TABLE.keys(),
)
def test_answer_table(
    http: int,
    source: str,
    attempt: Attempt,
    has_credential: bool,
    trusted: bool,
    expected: CheckStatus | str,
) -> None:
    verdict = classify.answer(
        http,
        source=source,  # type: ignore[arg-type]  # the table spells the literal as str
        attempt=attempt,
        host="r.example",
        repository="team/app",
        has_credential=has_credential,
        realm="https://auth.example/t",
        realm_trusted=trusted,
    )

    if expected == "creds":
        assert verdict.use_credentials
        return
    assert verdict.check is not None
    assert verdict.check.status is expected
    assert verdict.check.http_status == http
    assert verdict.check.detail and verdict.check.remedy


def test_answer_untrusted_realm_detail_names_realm() -> None:
    verdict = classify.answer(
        401,
        source="manifest",
        attempt=T,
        host="r.example",
        repository="a",
        has_credential=True,
        realm="http://evil.example/t",
        realm_trusted=False,
    )

    assert verdict.check is not None
    assert "http://evil.example/t" in verdict.check.detail


def test_answer_429_detail_carries_retry_after_and_code() -> None:
    verdict = classify.answer(
        429,
        source="manifest",
        attempt=T,
        host="r",
        repository="a",
        codes=("TOOMANYREQUESTS",),
        retry_after_header="120",
    )

    assert verdict.check is not None
    assert "Retry-After: 120" in verdict.check.detail
    assert verdict.check.error_code == "TOOMANYREQUESTS"


def test_answer_error_code_prefers_registry_code_then_challenge_error() -> None:
    coded = classify.answer(
        404, source="manifest", attempt=T, host="r", repository="a", codes=("NAME_UNKNOWN",)
    )
    scoped = classify.answer(
        401,
        source="manifest",
        attempt=T,
        host="r",
        repository="a",
        challenge_error="insufficient_scope",
    )

    assert coded.check is not None and coded.check.error_code == "NAME_UNKNOWN"
    assert scoped.check is not None and scoped.check.error_code == "insufficient_scope"


def test_basic_challenge_unauthorized_with_documented_detail() -> None:
    check = classify.basic_challenge()

    assert check.status is CheckStatus.UNAUTHORIZED
    assert check.detail == (
        "registry requests Basic auth; credentials are only sent to an HTTPS Bearer token realm"
    )


def test_transport_is_unreachable_never_permission() -> None:
    check = classify.transport("timeout", "ghcr.io", "read timed out")

    assert check.status is CheckStatus.UNREACHABLE
    assert "ghcr.io" in check.detail and check.http_status is None


@pytest.mark.parametrize(
    ("body", "codes", "message"),
    [
        (
            b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}',
            ("MANIFEST_UNKNOWN",),
            "manifest unknown",
        ),
        (b'{"errors":[{"code":"DENIED"},{"code":"X","message":"m"}]}', ("DENIED", "X"), "m"),
        (b"<html><body>502 Bad Gateway</body></html>", (), ""),
        (b"404 page not found\n", (), ""),
        (b'{"errors": "nope"}', (), ""),
        (b"[1,2]", (), ""),
        (b"", (), ""),
        (b"\xff\xfe", (), ""),
        (b"[" * 100000, (), ""),
    ],
    ids=[
        "manifest-unknown",
        "two",
        "html",
        "plain",
        "not-list",
        "array",
        "empty",
        "binary",
        "deep",
    ],
)
def test_error_body_never_raises(body: bytes, codes: tuple[str, ...], message: str) -> None:
    assert classify.error_body(body) == (codes, message)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 0.5 ", 0.5),
        (None, None),
        ("", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("-1", None),
        ("nan", None),
    ],
    ids=["int", "float", "absent", "empty", "http-date", "negative", "nan"],
)
def test_retry_after_seconds_only(value: str | None, seconds: float | None) -> None:
    assert classify.retry_after(value) == seconds
