"""Object-store failures: the one translation from boto3/botocore errors to ``StorageError``.

``classify`` maps every error botocore can raise to a ``StorageErrorKind`` and
nothing else does (style.md rule 8). The kind decides what a caller may do:
``absent`` is authoritative, terminal kinds stop at once, ``unavailable`` may
be retried, and ``unknown`` is never treated as absence (dsl.md §5.4: decisions
fail closed). The upstream tree (botocore 1.3x/1.4x) and where it lands::

    botocore.exceptions.ClientError (the service answered), by error code, then HTTP status:
    ├── NoSuchBucket                                         NO_SUCH_BUCKET
    ├── NoSuchKey, NotFound, "404" (HEAD has no body)        ABSENT
    ├── AccessDenied, AllAccessDisabled, "403", other 403    FORBIDDEN
    ├── InvalidAccessKeyId, SignatureDoesNotMatch,
    │   ExpiredToken, InvalidToken, TokenRefreshRequired     CREDENTIALS
    ├── PermanentRedirect, AuthorizationHeaderMalformed,
    │   IllegalLocationConstraintException,
    │   RequestTimeTooSkewed                                 CONFIG (wrong region, endpoint, clock)
    ├── InvalidBucketName                                    INVALID_URI
    ├── SlowDown, Throttling, RequestTimeout, InternalError,
    │   ServiceUnavailable, any 5xx, 429                     UNAVAILABLE
    └── anything else                                        UNKNOWN
    botocore.exceptions.BotoCoreError (no answer from the service):
    ├── ConnectionError: EndpointConnectionError, ConnectTimeoutError,
    │   ProxyConnectionError                                 UNAVAILABLE
    │   └── SSLError                                         CONFIG (UNAVAILABLE when the text
    │                                                        says EOF, reset or timeout)
    ├── HTTPClientError: ReadTimeoutError, ConnectionClosedError,
    │   ResponseStreamingError; IncompleteReadError,
    │   CapacityNotAvailableError (retry quota spent)        UNAVAILABLE
    ├── NoCredentialsError, PartialCredentialsError, CredentialRetrievalError,
    │   NoAuthTokenError, TokenRetrievalError, RefreshWithMFAUnsupportedError,
    │   UnknownCredentialError, MetadataRetrievalError,
    │   UnknownTokenProviderError, SSOError…, LoginError…    CREDENTIALS
    ├── ProfileNotFound, ConfigNotFound, ConfigParseError, InvalidConfigError…,
    │   NoRegionError, UnknownRegionError, InvalidRegionError, InvalidEndpointConfigurationError,
    │   UnknownEndpointError, InvalidS3AddressingStyleError, InvalidRetry*Error,
    │   InvalidProxiesConfigError, InvalidDefaultsMode, Invalid*EndpointConfigError…,
    │   UnsupportedS3ArnError, UnsupportedS3(Accesspoint)ConfigurationError,
    │   UnsupportedOutpostResourceError, Unknown/UnsupportedSignatureVersionError,
    │   InvalidIMDSEndpoint*Error, InvalidChecksumConfigError, InvalidDNSNameError   CONFIG
    └── everything else (parameter validation, checksums, stubs…)   UNKNOWN
    anything that is not a botocore error                    UNKNOWN

A HEAD answers a missing bucket with the same bare 404 as a missing key; the
adapter tells them apart with a bucket HEAD (``s3.BotoStore.probe_key``).
``StorageError`` carries its kind as ``details["kind"]``; ``kind_of`` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping

from npa_infra.errors import StorageError
from npa_infra.storage.models import S3Uri, StorageErrorKind

__all__ = ["classify", "classify_code", "kind_of", "remedy_for", "translate", "upstream_errors"]

_DETAIL_CAP = 500

_ABSENT_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
_FORBIDDEN_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "Forbidden", "403"})
_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
    }
)
_CONFIG_CODES = frozenset(
    {
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraintException",
        "RequestTimeTooSkewed",
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
    }
)
# Class names, so the table does not import botocore (style.md rule 6); matched along the MRO.
_CLASS_KINDS: Mapping[str, StorageErrorKind] = {
    "SSLError": StorageErrorKind.CONFIG,  # before ConnectionError: its base
    "ConnectionError": StorageErrorKind.UNAVAILABLE,
    "HTTPClientError": StorageErrorKind.UNAVAILABLE,
    "IncompleteReadError": StorageErrorKind.UNAVAILABLE,
    "CapacityNotAvailableError": StorageErrorKind.UNAVAILABLE,
    "NoCredentialsError": StorageErrorKind.CREDENTIALS,
    "PartialCredentialsError": StorageErrorKind.CREDENTIALS,
    "CredentialRetrievalError": StorageErrorKind.CREDENTIALS,
    "NoAuthTokenError": StorageErrorKind.CREDENTIALS,
    "TokenRetrievalError": StorageErrorKind.CREDENTIALS,
    "RefreshWithMFAUnsupportedError": StorageErrorKind.CREDENTIALS,
    "UnknownCredentialError": StorageErrorKind.CREDENTIALS,
    "SSOError": StorageErrorKind.CREDENTIALS,
    "LoginError": StorageErrorKind.CREDENTIALS,
    "MetadataRetrievalError": StorageErrorKind.CREDENTIALS,  # instance-metadata credentials
    "UnknownTokenProviderError": StorageErrorKind.CREDENTIALS,
    "ProfileNotFound": StorageErrorKind.CONFIG,
    "ConfigNotFound": StorageErrorKind.CONFIG,
    "ConfigParseError": StorageErrorKind.CONFIG,
    "InvalidConfigError": StorageErrorKind.CONFIG,
    "NoRegionError": StorageErrorKind.CONFIG,
    "UnknownRegionError": StorageErrorKind.CONFIG,
    "InvalidRegionError": StorageErrorKind.CONFIG,
    "InvalidEndpointConfigurationError": StorageErrorKind.CONFIG,
    "UnknownEndpointError": StorageErrorKind.CONFIG,
    "UnknownFIPSEndpointError": StorageErrorKind.CONFIG,
    "EndpointVariantError": StorageErrorKind.CONFIG,
    "EndpointResolutionError": StorageErrorKind.CONFIG,
    "InvalidS3AddressingStyleError": StorageErrorKind.CONFIG,
    "InvalidS3UsEast1RegionalEndpointConfigError": StorageErrorKind.CONFIG,
    "InvalidSTSRegionalEndpointsConfigError": StorageErrorKind.CONFIG,
    "InvalidEndpointDiscoveryConfigurationError": StorageErrorKind.CONFIG,
    "InvalidRetryConfigurationError": StorageErrorKind.CONFIG,
    "InvalidRetryModeError": StorageErrorKind.CONFIG,
    "InvalidMaxRetryAttemptsError": StorageErrorKind.CONFIG,
    "InvalidProxiesConfigError": StorageErrorKind.CONFIG,
    "InvalidDefaultsMode": StorageErrorKind.CONFIG,
    "InvalidIMDSEndpointError": StorageErrorKind.CONFIG,
    "InvalidIMDSEndpointModeError": StorageErrorKind.CONFIG,
    "InvalidChecksumConfigError": StorageErrorKind.CONFIG,
    "InvalidDNSNameError": StorageErrorKind.CONFIG,
    "UnsupportedS3ArnError": StorageErrorKind.CONFIG,
    "UnsupportedS3ConfigurationError": StorageErrorKind.CONFIG,
    "UnsupportedS3AccesspointConfigurationError": StorageErrorKind.CONFIG,
    "UnsupportedOutpostResourceError": StorageErrorKind.CONFIG,
    "UnsupportedSignatureVersionError": StorageErrorKind.CONFIG,
    "UnknownSignatureVersionError": StorageErrorKind.CONFIG,
}
# TLS failures that are the network's fault, not the certificate's.
_TLS_TRANSIENT = ("eof", "timed out", "timeout", "connection reset", "connection aborted")


def upstream_errors() -> tuple[type[BaseException], ...]:
    """The botocore base classes an adapter call may raise (imported lazily).

    ``UndefinedModelAttributeError`` is the one botocore error outside both trees
    (a broken service model); it is caught so that it too becomes a ``StorageError``.
    """
    from botocore.exceptions import (  # type: ignore[import-untyped]  # botocore ships no type hints
        BotoCoreError,
        ClientError,
        UndefinedModelAttributeError,
    )

    return (BotoCoreError, ClientError, UndefinedModelAttributeError)


def classify(error: BaseException) -> StorageErrorKind:
    """The kind of any exception raised by a boto3 S3 call; total, never raises."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(error, ClientError):
        return classify_code(_code(error), _status(error))
    if not isinstance(error, BotoCoreError):
        return StorageErrorKind.UNKNOWN
    for cls in type(error).__mro__:
        kind = _CLASS_KINDS.get(cls.__name__)
        if kind is None:
            continue
        if kind is StorageErrorKind.CONFIG and cls.__name__ == "SSLError":
            text = str(error).lower()
            if any(marker in text for marker in _TLS_TRANSIENT):
                return StorageErrorKind.UNAVAILABLE
        return kind
    return StorageErrorKind.UNKNOWN


def classify_code(code: str, status: int | None) -> StorageErrorKind:
    """The kind of a service answer: its S3 error code first, then its HTTP status."""
    if code == "NoSuchBucket":
        return StorageErrorKind.NO_SUCH_BUCKET
    if code in _ABSENT_CODES:
        return StorageErrorKind.ABSENT
    if code in _CREDENTIAL_CODES:
        return StorageErrorKind.CREDENTIALS
    if code in _FORBIDDEN_CODES:
        return StorageErrorKind.FORBIDDEN
    if code in _CONFIG_CODES:
        return StorageErrorKind.CONFIG
    if code == "InvalidBucketName":
        return StorageErrorKind.INVALID_URI
    if code in _TRANSIENT_CODES:
        return StorageErrorKind.UNAVAILABLE
    if status == 403:
        return StorageErrorKind.FORBIDDEN
    if status is not None and (status >= 500 or status == 429):
        return StorageErrorKind.UNAVAILABLE
    # Any other 404 code (NoSuchUpload, a proxy's page…) is not proof the key is absent.
    return StorageErrorKind.UNKNOWN


def kind_of(error: StorageError) -> StorageErrorKind:
    """The kind recorded on a ``StorageError``; ``unknown`` when none is."""
    try:
        return StorageErrorKind(str(error.details.get("kind")))
    except ValueError:
        return StorageErrorKind.UNKNOWN


def translate(
    error: BaseException,
    *,
    operation: str,
    uri: S3Uri,
    endpoint: str,
    kind: StorageErrorKind | None = None,
) -> StorageError:
    """The ``StorageError`` for an upstream failure of ``operation`` on ``uri`` (chain with ``from``)."""
    kind = kind if kind is not None else classify(error)
    text = " ".join(str(error).split())[:_DETAIL_CAP] or type(error).__name__
    messages = {
        StorageErrorKind.ABSENT: f"{uri} does not exist at {endpoint}",
        StorageErrorKind.FORBIDDEN: f"access denied to {operation} {uri} at {endpoint}: {text}",
        StorageErrorKind.NO_SUCH_BUCKET: f"bucket {uri.bucket!r} does not exist at {endpoint}",
        StorageErrorKind.CREDENTIALS: f"no usable credentials to {operation} {uri}: {text}",
        StorageErrorKind.CONFIG: f"cannot {operation} {uri}: the S3 client setup is wrong: {text}",
        StorageErrorKind.UNAVAILABLE: (
            f"cannot reach the S3 endpoint {endpoint} to {operation} {uri}: {text}"
        ),
    }
    message = messages.get(kind, f"S3 {operation} of {uri} failed at {endpoint}: {text}")
    details: dict[str, object] = {
        "kind": kind.value,
        "operation": operation,
        "uri": str(uri),
        "endpoint": endpoint,
        "error_type": type(error).__name__,
        "error": text,
    }
    code = _code(error)
    if code:
        details["code"] = code
        details["status"] = _status(error)
    return StorageError(message, remedy=remedy_for(kind, uri, endpoint), details=details)


def remedy_for(kind: StorageErrorKind, uri: S3Uri, endpoint: str) -> str:
    """The next thing to do about a failure of ``kind`` on ``uri``."""
    remedies = {
        StorageErrorKind.ABSENT: f"write {uri} first, or fix the location in the spec, then rerun",
        StorageErrorKind.FORBIDDEN: (
            f"grant these credentials access to bucket {uri.bucket!r} "
            "(s3:GetObject, s3:ListBucket, s3:PutObject as needed), then rerun"
        ),
        StorageErrorKind.NO_SUCH_BUCKET: (
            f"create bucket {uri.bucket!r} at {endpoint}, or fix the bucket in the spec "
            "(config.bucket), then rerun"
        ),
        StorageErrorKind.CREDENTIALS: (
            "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE (log in again if the "
            "session expired), then rerun"
        ),
        StorageErrorKind.CONFIG: (
            "fix the AWS profile, region or endpoint (AWS_PROFILE, AWS_REGION, "
            "AWS_ENDPOINT_URL_S3), the endpoint's TLS certificate or the system clock, then rerun"
        ),
        StorageErrorKind.UNAVAILABLE: (
            f"check that {endpoint} is reachable (network, VPN, proxy, AWS_ENDPOINT_URL), "
            "then rerun"
        ),
        StorageErrorKind.INVALID_URI: "write the location as s3://<bucket>/<key>, then rerun",
    }
    return remedies.get(kind, "rerun with --debug and report the error if it persists")


def _code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    if not isinstance(response, Mapping):
        return ""
    body = response.get("Error")
    code = body.get("Code") if isinstance(body, Mapping) else None
    return str(code) if code is not None else ""


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    meta = response.get("ResponseMetadata") if isinstance(response, Mapping) else None
    status = meta.get("HTTPStatusCode") if isinstance(meta, Mapping) else None
    return status if isinstance(status, int) else None
