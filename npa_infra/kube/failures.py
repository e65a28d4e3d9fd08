"""Kubernetes failures: the one translation from upstream errors to ``KubeError``.

Every error the official client, its kubeconfig loader or urllib3 can raise is
mapped to a ``KubeErrorKind`` by ``classify`` and nowhere else (style.md rule 8).
The kind decides what the caller may do (kubernetes.md §1.2): terminal kinds
stop at once, transient kinds may be sampled again, everything else is
ambiguous. The upstream tree (kubernetes 37, urllib3 2) and where it lands::

    kubernetes.config.ConfigException
    ├── "exec: …" (the credential plugin failed)        EXEC_PLUGIN
    └── anything else (unreadable, inconsistent file)    NO_KUBECONFIG
    kubernetes.client.OpenApiException
    ├── ApiException                                     by HTTP status:
    │   │   401 AUTH · 403 FORBIDDEN · 404 NOT_FOUND · 429 RATE_LIMIT · 5xx SERVER
    │   │   status 0 + "SSLError …" (the REST layer's TLS wrapper): by TLS text
    │   └── BadRequest/Unauthorized/Forbidden/NotFound/Conflict/
    │       UnprocessableEntity/ServiceException        the same, by status
    └── ApiTypeError/ApiValueError/ApiKeyError/ApiAttributeError   UNEXPECTED
    urllib3.exceptions.HTTPError
    ├── MaxRetryError                                    classify(reason)
    ├── SSLError                                         CERTIFICATE (TRANSPORT when the
    │                                                    text says EOF, reset or timeout)
    ├── TimeoutError (connect/read), NewConnectionError,
    │   NameResolutionError, ProtocolError, IncompleteRead,
    │   ProxyError, Closed/Empty/FullPoolError           TRANSPORT
    ├── LocationValueError, URLSchemeUnknown,
    │   ProxySchemeUnknown, ProxySchemeUnsupported       NO_KUBECONFIG (bad server URL)
    └── everything else                                  UNEXPECTED
    ssl.SSLError / ssl.CertificateError                  as urllib3's SSLError
    OSError: ConnectionError, TimeoutError; http.client.HTTPException   TRANSPORT
    anything else (pydantic ValidationError, ValueError …)               UNEXPECTED

``KubeError`` carries its kind as ``details["kind"]``; ``kind_of`` reads it back.
``refused`` tells a refused connection (ECONNREFUSED: nothing listens at the
server's address) apart within TRANSPORT, so it can be reported as such.
"""

from __future__ import annotations

import errno
import http.client
import ssl
from collections.abc import Iterable

from npa_infra.errors import KubeError
from npa_infra.kube.models import KubeErrorKind

__all__ = [
    "classify",
    "describe",
    "kind_for_status",
    "kind_of",
    "kube_error",
    "refused",
    "remedy_for",
    "translate",
    "upstream_errors",
]

_DETAIL_CAP = 1000

# TLS failures that are the network's fault, not the certificate's (runtime-reference §1).
_TLS_TRANSIENT = ("eof", "timed out", "timeout", "connection reset", "connection aborted")


def kube_error(
    kind: KubeErrorKind,
    message: str,
    *,
    context: str,
    remedy: str | None = None,
    contexts: Iterable[str] = (),
    **details: object,
) -> KubeError:
    """Build the ``KubeError`` for ``kind``, with the standard remedy unless one is given."""
    return KubeError(
        message,
        remedy=remedy if remedy is not None else remedy_for(kind, context, contexts=contexts),
        details={"kind": kind.value, "context": context, **details},
    )


def kind_of(error: KubeError) -> KubeErrorKind:
    """The kind recorded on a ``KubeError``; ``UNEXPECTED`` when none is."""
    raw = error.details.get("kind")
    try:
        return KubeErrorKind(str(raw))
    except ValueError:
        return KubeErrorKind.UNEXPECTED


def remedy_for(kind: KubeErrorKind, context: str, *, contexts: Iterable[str] = ()) -> str:
    """The next thing to do about a failure of ``kind`` on ``context``."""
    names = ", ".join(sorted(contexts)) or "none"
    remedies = {
        KubeErrorKind.NO_KUBECONFIG: (
            "point KUBECONFIG at a valid kubeconfig file (only its first existing file is "
            "read) or create ~/.kube/config, then rerun"
        ),
        KubeErrorKind.UNKNOWN_CONTEXT: (
            f"use one of the contexts the kubeconfig defines: {names} "
            "(there is no fallback to the current context)"
        ),
        KubeErrorKind.AUTH: (
            f"refresh the credentials of context {context!r} (log in again or renew its "
            "token), then check with `kubectl --context " + context + " get --raw=/readyz`"
        ),
        KubeErrorKind.FORBIDDEN: (
            f"grant the user of context {context!r} the permission named in the message "
            "(RBAC), then rerun"
        ),
        KubeErrorKind.CERTIFICATE: (
            f"fix certificate-authority(-data) or the server name for the cluster of "
            f"context {context!r} in the kubeconfig, then rerun"
        ),
        KubeErrorKind.EXEC_PLUGIN: (
            f"run the exec credential plugin of context {context!r} by hand and fix it "
            "(often: log in to the cloud CLI again), then rerun"
        ),
        KubeErrorKind.TRANSPORT: (
            f"check that the API server of context {context!r} is reachable "
            "(network, VPN, proxy), then rerun"
        ),
        KubeErrorKind.RATE_LIMIT: "the API server is throttling requests: wait a minute, then rerun",
        KubeErrorKind.SERVER: "the API server is failing or starting up: wait, then rerun",
        KubeErrorKind.NOT_FOUND: "check the object's name and namespace, then rerun",
    }
    return remedies.get(kind, "rerun with --debug and report the details")


def kind_for_status(status: int | None) -> KubeErrorKind:
    """The kind of a non-success HTTP status (kubernetes.md §1.2)."""
    if status is None or 200 <= status <= 299:
        return KubeErrorKind.NONE
    if status == 401:
        return KubeErrorKind.AUTH
    if status == 403:
        return KubeErrorKind.FORBIDDEN
    if status == 404:
        return KubeErrorKind.NOT_FOUND
    if status == 429:
        return KubeErrorKind.RATE_LIMIT
    if 500 <= status <= 599:
        return KubeErrorKind.SERVER
    return KubeErrorKind.UNEXPECTED


def classify(exc: BaseException) -> KubeErrorKind:
    """The kind of any exception raised while talking to the API server; never raises."""
    # Upstream modules load here, never at import time (style.md rule 6).
    from kubernetes.client import exceptions as api_exc
    from kubernetes.config.config_exception import ConfigException
    from urllib3 import exceptions as u3

    if isinstance(exc, KubeError):
        return kind_of(exc)
    if isinstance(exc, ConfigException):
        # exec_provider.py prefixes every plugin failure with "exec:".
        text = str(exc).lower()
        return KubeErrorKind.EXEC_PLUGIN if text.startswith("exec") else KubeErrorKind.NO_KUBECONFIG
    if isinstance(exc, api_exc.ApiException):
        if exc.status:
            return kind_for_status(int(exc.status))
        # rest.py turns urllib3's SSLError into ApiException(status=0, "SSLError\n…").
        reason = str(exc.reason or "")
        if reason.startswith("SSLError"):
            return _tls_kind(reason)
        return KubeErrorKind.UNEXPECTED
    if isinstance(exc, api_exc.OpenApiException):
        return KubeErrorKind.UNEXPECTED  # client-side (de)serialisation: never the network
    if isinstance(exc, u3.MaxRetryError):
        return classify(exc.reason) if exc.reason is not None else KubeErrorKind.TRANSPORT
    if isinstance(exc, u3.SSLError | ssl.SSLError | ssl.CertificateError):
        return _tls_kind(str(exc))
    if isinstance(exc, u3.LocationValueError | u3.ProxySchemeUnsupported):
        return KubeErrorKind.NO_KUBECONFIG  # the kubeconfig's server or proxy URL is unusable
    if isinstance(
        exc,
        u3.TimeoutError
        | u3.ProtocolError
        | u3.ProxyError
        | u3.ClosedPoolError
        | u3.EmptyPoolError
        | u3.FullPoolError
        | http.client.IncompleteRead,
    ):
        return KubeErrorKind.TRANSPORT
    if isinstance(exc, u3.HTTPError):
        return KubeErrorKind.UNEXPECTED
    if isinstance(exc, ConnectionError | TimeoutError | http.client.HTTPException):
        return KubeErrorKind.TRANSPORT
    return KubeErrorKind.UNEXPECTED


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a refused TCP connection (ECONNREFUSED).

    urllib3 raises ``MaxRetryError(reason=NewConnectionError(...))``, the latter
    chained ``from`` the socket's ``ConnectionRefusedError``; the chain is walked.
    """
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        current = todo.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ECONNREFUSED:
            return True
        if isinstance(current, ConnectionRefusedError):
            return True
        todo.extend((current.__cause__, current.__context__, getattr(current, "reason", None)))
    return False


def upstream_errors() -> tuple[type[BaseException], ...]:
    """The base classes of everything ``classify`` understands, for ``except`` clauses."""
    from kubernetes.client import exceptions as api_exc
    from kubernetes.config.config_exception import ConfigException
    from urllib3 import exceptions as u3

    return (
        api_exc.OpenApiException,
        ConfigException,
        u3.HTTPError,
        OSError,  # ssl.SSLError, ConnectionError, TimeoutError, missing files
        http.client.HTTPException,
        ValueError,  # pydantic's ValidationError when a response does not deserialise
    )


def translate(exc: BaseException, *, context: str, operation: str) -> KubeError:
    """``exc`` as a ``KubeError`` (the caller raises it ``from exc``)."""
    if isinstance(exc, KubeError):
        return exc
    kind = classify(exc)
    status = getattr(exc, "status", None)
    return kube_error(
        kind,
        f"{operation} on context {context!r} failed ({kind.value}): {describe(exc)}",
        context=context,
        operation=operation,
        status=status if isinstance(status, int) and status else None,
        upstream=type(exc).__name__,
    )


def describe(exc: BaseException) -> str:
    """One line about ``exc``, short enough for evidence and messages."""
    from kubernetes.client import exceptions as api_exc

    if isinstance(exc, api_exc.ApiException):
        text = f"HTTP {exc.status} {exc.reason or ''}".strip()
        if exc.body:
            text += f": {str(exc.body).strip()}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:_DETAIL_CAP]


def _tls_kind(text: str) -> KubeErrorKind:
    lowered = text.lower()
    if any(marker in lowered for marker in _TLS_TRANSIENT) and "certificate" not in lowered:
        return KubeErrorKind.TRANSPORT
    return KubeErrorKind.CERTIFICATE
