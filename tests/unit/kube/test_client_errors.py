"""Every upstream error maps to a ``KubeErrorKind`` in one place (style.md rule 8).

The table covers every exception class that ``kubernetes.client.exceptions``
and ``urllib3.exceptions`` define, built the way upstream builds them; a new
upstream class fails ``test_classify_upstream_exception_modules_fully_tabled``
until someone decides where it belongs (the httpx ``test_exceptions`` model).
"""

from __future__ import annotations

import http.client
import inspect
import socket
import ssl
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import pydantic
import pytest
import urllib3.exceptions as u3
from kubernetes.client import V1Node
from kubernetes.client import exceptions as api_exc
from kubernetes.config.config_exception import ConfigException

from npa_infra.errors import KubeError
from npa_infra.kube import failures
from npa_infra.kube.models import KubeErrorKind as K

CERT_TEXT = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer"


def http_response(status: int, body: bytes = b"{}") -> SimpleNamespace:
    return SimpleNamespace(status=status, reason="Reason", data=body, headers={"X": "y"})


def from_response(status: int) -> api_exc.ApiException:
    """An ``ApiException`` subclass exactly as the generated client raises it."""
    try:
        api_exc.ApiException.from_response(http_resp=http_response(status), body="{}", data=None)
    except api_exc.ApiException as exc:
        return exc
    raise AssertionError("from_response did not raise")


def rest_ssl_error() -> api_exc.ApiException:
    """rest.py wraps urllib3's SSLError as ApiException(status=0, 'SSLError\\n…')."""
    error = u3.SSLError(CERT_TEXT)
    return api_exc.ApiException(status=0, reason="\n".join([type(error).__name__, str(error)]))


def chunk_response() -> Any:
    return SimpleNamespace(tell=lambda: 3, length_remaining=10)


def validation_error() -> pydantic.ValidationError:
    try:
        V1Node.model_validate({"metadata": {"name": 5}})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("V1Node accepted a numeric name")


# Upstream class -> (factory, expected kind). One row per class upstream defines.
UPSTREAM: dict[type[BaseException], tuple[Callable[[], BaseException], K]] = {
    # kubernetes.client.exceptions
    api_exc.OpenApiException: (lambda: api_exc.OpenApiException("x"), K.UNEXPECTED),
    api_exc.ApiTypeError: (lambda: api_exc.ApiTypeError("bad type", ["a"]), K.UNEXPECTED),
    api_exc.ApiValueError: (lambda: api_exc.ApiValueError("bad value"), K.UNEXPECTED),
    api_exc.ApiKeyError: (lambda: api_exc.ApiKeyError("bad key"), K.UNEXPECTED),
    api_exc.ApiAttributeError: (lambda: api_exc.ApiAttributeError("bad attr"), K.UNEXPECTED),
    api_exc.ApiException: (lambda: from_response(429), K.RATE_LIMIT),
    api_exc.BadRequestException: (lambda: from_response(400), K.UNEXPECTED),
    api_exc.UnauthorizedException: (lambda: from_response(401), K.AUTH),
    api_exc.ForbiddenException: (lambda: from_response(403), K.FORBIDDEN),
    api_exc.NotFoundException: (lambda: from_response(404), K.NOT_FOUND),
    api_exc.ConflictException: (lambda: from_response(409), K.UNEXPECTED),
    api_exc.UnprocessableEntityException: (lambda: from_response(422), K.UNEXPECTED),
    api_exc.ServiceException: (lambda: from_response(503), K.SERVER),
    # urllib3.exceptions
    u3.HTTPError: (lambda: u3.HTTPError("x"), K.UNEXPECTED),
    u3.PoolError: (lambda: u3.PoolError(None, "x"), K.UNEXPECTED),  # type: ignore[arg-type]  # no pool needed
    u3.RequestError: (lambda: u3.RequestError(None, "/readyz", "x"), K.UNEXPECTED),  # type: ignore[arg-type]  # no pool needed
    u3.SSLError: (lambda: u3.SSLError(CERT_TEXT), K.CERTIFICATE),
    u3.ProxyError: (lambda: u3.ProxyError("proxy down", OSError("refused")), K.TRANSPORT),
    u3.DecodeError: (lambda: u3.DecodeError("bad gzip"), K.UNEXPECTED),
    u3.ProtocolError: (
        lambda: u3.ProtocolError("Connection aborted.", http.client.RemoteDisconnected("closed")),
        K.TRANSPORT,
    ),
    u3.MaxRetryError: (
        lambda: u3.MaxRetryError(None, "/readyz", u3.NewConnectionError(None, "refused")),  # type: ignore[arg-type]  # no pool needed
        K.TRANSPORT,
    ),
    u3.HostChangedError: (lambda: u3.HostChangedError(None, "http://elsewhere/", 0), K.UNEXPECTED),  # type: ignore[arg-type]  # no pool needed
    u3.TimeoutStateError: (lambda: u3.TimeoutStateError("x"), K.UNEXPECTED),
    u3.TimeoutError: (lambda: u3.TimeoutError("timed out"), K.TRANSPORT),
    u3.ReadTimeoutError: (
        lambda: u3.ReadTimeoutError(None, "/readyz", "Read timed out. (read timeout=10)"),  # type: ignore[arg-type]  # no pool needed
        K.TRANSPORT,
    ),
    u3.ConnectTimeoutError: (lambda: u3.ConnectTimeoutError("connect timed out"), K.TRANSPORT),
    u3.NewConnectionError: (
        lambda: u3.NewConnectionError(None, "[Errno 111] Connection refused"),  # type: ignore[arg-type]  # no connection needed
        K.TRANSPORT,
    ),
    u3.NameResolutionError: (
        lambda: u3.NameResolutionError("api.example", None, socket.gaierror(-2, "unknown")),  # type: ignore[arg-type]  # no connection needed
        K.TRANSPORT,
    ),
    u3.EmptyPoolError: (lambda: u3.EmptyPoolError(None, "empty"), K.TRANSPORT),  # type: ignore[arg-type]  # no pool needed
    u3.FullPoolError: (lambda: u3.FullPoolError(None, "full"), K.TRANSPORT),  # type: ignore[arg-type]  # no pool needed
    u3.ClosedPoolError: (lambda: u3.ClosedPoolError(None, "closed"), K.TRANSPORT),  # type: ignore[arg-type]  # no pool needed
    u3.LocationValueError: (lambda: u3.LocationValueError("no host"), K.NO_KUBECONFIG),
    u3.LocationParseError: (lambda: u3.LocationParseError("https://[::"), K.NO_KUBECONFIG),
    u3.URLSchemeUnknown: (lambda: u3.URLSchemeUnknown("gopher"), K.NO_KUBECONFIG),
    u3.ResponseError: (lambda: u3.ResponseError("too many redirects"), K.UNEXPECTED),
    u3.ResponseNotChunked: (lambda: u3.ResponseNotChunked("not chunked"), K.TRANSPORT),
    u3.BodyNotHttplibCompatible: (lambda: u3.BodyNotHttplibCompatible(), K.UNEXPECTED),
    u3.IncompleteRead: (lambda: u3.IncompleteRead(3, 10), K.TRANSPORT),
    u3.InvalidChunkLength: (lambda: u3.InvalidChunkLength(chunk_response(), b"zz"), K.TRANSPORT),
    u3.InvalidHeader: (lambda: u3.InvalidHeader("bad header"), K.UNEXPECTED),
    u3.ProxySchemeUnknown: (lambda: u3.ProxySchemeUnknown("gopher"), K.NO_KUBECONFIG),
    u3.ProxySchemeUnsupported: (lambda: u3.ProxySchemeUnsupported("https"), K.NO_KUBECONFIG),
    u3.HeaderParsingError: (lambda: u3.HeaderParsingError([], "junk"), K.UNEXPECTED),
    u3.UnrewindableBodyError: (lambda: u3.UnrewindableBodyError("x"), K.UNEXPECTED),
}


def _exception_classes(module: ModuleType) -> set[type[BaseException]]:
    return {
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__
        and issubclass(cls, BaseException)
        and not issubclass(cls, Warning)
    }


def test_classify_upstream_exception_modules_fully_tabled() -> None:
    upstream = _exception_classes(api_exc) | _exception_classes(u3)

    assert upstream - set(UPSTREAM) == set(), "a new upstream exception class needs a row"


@pytest.mark.parametrize(
    ("cls", "factory", "expected"),
    [(cls, factory, kind) for cls, (factory, kind) in UPSTREAM.items()],
    ids=[cls.__name__ for cls in UPSTREAM],
)
def test_classify_each_upstream_class_expected_kind(
    cls: type[BaseException], factory: Callable[[], BaseException], expected: K
) -> None:
    exc = factory()

    assert type(exc) is cls
    assert failures.classify(exc) is expected


# Beyond the class table: statuses, wrapped errors and stdlib errors.
@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (from_response(500), K.SERVER),
        (from_response(502), K.SERVER),
        (from_response(504), K.SERVER),
        (api_exc.ApiException(status=429, reason="Too Many Requests"), K.RATE_LIMIT),
        (api_exc.ApiException(status=302, reason="Found"), K.UNEXPECTED),
        (api_exc.ApiException(status=0, reason="Cannot prepare a request message"), K.UNEXPECTED),
        (api_exc.ApiException(), K.UNEXPECTED),
        (rest_ssl_error(), K.CERTIFICATE),
        (api_exc.ApiException(status=0, reason="SSLError\nEOF occurred in violation"), K.TRANSPORT),
        (u3.SSLError("[SSL: WRONG_VERSION_NUMBER] wrong version number"), K.CERTIFICATE),
        (u3.SSLError("_ssl.c:980: The handshake operation timed out"), K.TRANSPORT),
        (
            u3.MaxRetryError(None, "/readyz", u3.SSLError(CERT_TEXT)),  # type: ignore[arg-type]  # no pool needed
            K.CERTIFICATE,
        ),
        (
            u3.MaxRetryError(None, "/readyz", u3.ProtocolError("reset", ConnectionResetError())),  # type: ignore[arg-type]  # no pool needed
            K.TRANSPORT,
        ),
        (u3.MaxRetryError(None, "/readyz", None), K.TRANSPORT),  # type: ignore[arg-type]  # no pool needed
        (ssl.SSLCertVerificationError(1, CERT_TEXT), K.CERTIFICATE),
        (ssl.SSLError(1, "[SSL] record layer failure"), K.CERTIFICATE),
        (ssl.CertificateError("hostname mismatch"), K.CERTIFICATE),
        (ConnectionRefusedError(111, "Connection refused"), K.TRANSPORT),
        (ConnectionResetError(104, "Connection reset by peer"), K.TRANSPORT),
        (http.client.RemoteDisconnected("Remote end closed connection"), K.TRANSPORT),
        (http.client.BadStatusLine("garbage"), K.TRANSPORT),
        (TimeoutError("timed out"), K.TRANSPORT),
        (ConfigException("exec: process returned 1. token expired"), K.EXEC_PLUGIN),
        (ConfigException("exec: failed to decode process output: x"), K.EXEC_PLUGIN),
        (ConfigException("Invalid kube-config file. No configuration found."), K.NO_KUBECONFIG),
        (ConfigException("File does not exist: /nope/ca.crt"), K.NO_KUBECONFIG),
        (validation_error(), K.UNEXPECTED),
        (ValueError("odd"), K.UNEXPECTED),
        (RuntimeError("odd"), K.UNEXPECTED),
        (
            failures.kube_error(K.FORBIDDEN, "no", context="c"),
            K.FORBIDDEN,
        ),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_classify_other_failures_expected_kind(exc: BaseException, expected: K) -> None:
    assert failures.classify(exc) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, K.NONE),
        (204, K.NONE),
        (None, K.NONE),
        (301, K.UNEXPECTED),
        (400, K.UNEXPECTED),
        (401, K.AUTH),
        (403, K.FORBIDDEN),
        (404, K.NOT_FOUND),
        (408, K.UNEXPECTED),
        (429, K.RATE_LIMIT),
        (500, K.SERVER),
        (599, K.SERVER),
        (600, K.UNEXPECTED),
    ],
    ids=str,
)
def test_kind_for_status_each_status_expected_kind(status: int | None, expected: K) -> None:
    assert failures.kind_for_status(status) is expected


def test_upstream_errors_every_tabled_class_caught() -> None:
    caught = failures.upstream_errors()

    for factory, _ in UPSTREAM.values():
        assert isinstance(factory(), caught)


def test_translate_api_exception_kube_error_with_kind_status_remedy() -> None:
    error = failures.translate(from_response(403), context="prod", operation="list nodes")

    assert isinstance(error, KubeError)
    assert failures.kind_of(error) is K.FORBIDDEN
    assert error.details["status"] == 403
    assert error.details["context"] == "prod"
    assert error.details["upstream"] == "ForbiddenException"
    assert "list nodes" in error.message
    assert "RBAC" in error.remedy


def test_translate_kube_error_returned_unchanged() -> None:
    original = failures.kube_error(K.AUTH, "no", context="c")

    assert failures.translate(original, context="c", operation="x") is original


def test_kind_of_missing_or_bad_kind_unexpected() -> None:
    assert failures.kind_of(KubeError("no kind")) is K.UNEXPECTED
    assert failures.kind_of(KubeError("bad", details={"kind": "nope"})) is K.UNEXPECTED


@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.value)
def test_remedy_for_every_kind_nonempty(kind: K) -> None:
    assert failures.remedy_for(kind, "ctx", contexts=["a", "b"])


def test_describe_long_body_capped_one_line() -> None:
    exc = api_exc.ApiException(status=500, reason="Internal", body="line\n" * 1000)

    text = failures.describe(exc)

    assert len(text) <= 1000
    assert "\n" not in text
    assert text.startswith("HTTP 500 Internal")
