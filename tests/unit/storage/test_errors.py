"""Every botocore error maps to a ``StorageErrorKind`` in one place (style.md rule 8).

The class table has one row per exception class ``botocore.exceptions``
defines, built the way botocore builds it; a new upstream class fails
``test_classify_upstream_module_fully_tabled`` until someone decides where it
belongs (the httpx ``test_exceptions`` model). Service answers
(``ClientError``) are crossed by error code and HTTP status.
"""

from __future__ import annotations

import inspect
import string
from typing import Any

import botocore.exceptions as be
import pytest

from npa_infra.errors import NpaError, StorageError
from npa_infra.storage import errors
from npa_infra.storage.models import S3Uri
from npa_infra.storage.models import StorageErrorKind as K

URI = S3Uri(bucket="bkt", key="runs/r1/decision.json")
ENDPOINT = "http://127.0.0.1:9"


def client_error(code: str, status: int | None, operation: str = "GetObject") -> be.ClientError:
    """A ``ClientError`` exactly as botocore raises it from a parsed error response."""
    response: dict[str, Any] = {"Error": {"Code": code, "Message": f"{code} message"}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return be.ClientError(response, operation)


def build(cls: type[BaseException]) -> BaseException:
    """An instance of a botocore exception, its ``fmt`` fields filled in."""
    if issubclass(cls, be.ClientError):
        return cls(
            {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
            "GetObject",
        )
    if cls is be.WaiterError:
        return be.WaiterError(name="ObjectExists", reason="timed out", last_response={})
    fmt = getattr(cls, "fmt", "")
    fields = {name for _, name, _, _ in string.Formatter().parse(fmt) if name}
    return cls(**{name: "x" for name in fields})


# The kind every botocore exception class lands on. One row per class upstream defines.
UPSTREAM: dict[str, K] = {
    # the service answered: by code (403 AccessDenied here; codes are crossed below)
    "ClientError": K.FORBIDDEN,
    "EventStreamError": K.FORBIDDEN,
    # no answer: the network, timeouts, retry quota
    "ConnectionError": K.UNAVAILABLE,
    "EndpointConnectionError": K.UNAVAILABLE,
    "ConnectTimeoutError": K.UNAVAILABLE,
    "ProxyConnectionError": K.UNAVAILABLE,
    "HTTPClientError": K.UNAVAILABLE,
    "ReadTimeoutError": K.UNAVAILABLE,
    "ConnectionClosedError": K.UNAVAILABLE,
    "ResponseStreamingError": K.UNAVAILABLE,
    "IncompleteReadError": K.UNAVAILABLE,
    "CapacityNotAvailableError": K.UNAVAILABLE,
    "SSLError": K.CONFIG,
    # credentials
    "NoCredentialsError": K.CREDENTIALS,
    "PartialCredentialsError": K.CREDENTIALS,
    "CredentialRetrievalError": K.CREDENTIALS,
    "NoAuthTokenError": K.CREDENTIALS,
    "TokenRetrievalError": K.CREDENTIALS,
    "RefreshWithMFAUnsupportedError": K.CREDENTIALS,
    "UnknownCredentialError": K.CREDENTIALS,
    "MetadataRetrievalError": K.CREDENTIALS,
    "UnknownTokenProviderError": K.CREDENTIALS,
    "SSOError": K.CREDENTIALS,
    "SSOTokenLoadError": K.CREDENTIALS,
    "UnauthorizedSSOTokenError": K.CREDENTIALS,
    "LoginError": K.CREDENTIALS,
    "LoginAuthorizationCodeError": K.CREDENTIALS,
    "LoginInsufficientPermissions": K.CREDENTIALS,
    "LoginRefreshRequired": K.CREDENTIALS,
    "LoginTokenLoadError": K.CREDENTIALS,
    # client configuration: profile, region, endpoint, retries, addressing
    "ProfileNotFound": K.CONFIG,
    "ConfigNotFound": K.CONFIG,
    "ConfigParseError": K.CONFIG,
    "InvalidConfigError": K.CONFIG,
    "InfiniteLoopConfigError": K.CONFIG,
    "NoRegionError": K.CONFIG,
    "UnknownRegionError": K.CONFIG,
    "InvalidRegionError": K.CONFIG,
    "InvalidEndpointConfigurationError": K.CONFIG,
    "InvalidEndpointDiscoveryConfigurationError": K.CONFIG,
    "InvalidSTSRegionalEndpointsConfigError": K.CONFIG,
    "InvalidS3UsEast1RegionalEndpointConfigError": K.CONFIG,
    "UnknownEndpointError": K.CONFIG,
    "UnknownFIPSEndpointError": K.CONFIG,
    "EndpointVariantError": K.CONFIG,
    "EndpointResolutionError": K.CONFIG,
    "InvalidS3AddressingStyleError": K.CONFIG,
    "InvalidRetryConfigurationError": K.CONFIG,
    "InvalidRetryModeError": K.CONFIG,
    "InvalidMaxRetryAttemptsError": K.CONFIG,
    "InvalidProxiesConfigError": K.CONFIG,
    "InvalidDefaultsMode": K.CONFIG,
    "InvalidIMDSEndpointError": K.CONFIG,
    "InvalidIMDSEndpointModeError": K.CONFIG,
    "InvalidChecksumConfigError": K.CONFIG,
    "InvalidDNSNameError": K.CONFIG,
    "UnsupportedS3ArnError": K.CONFIG,
    "UnsupportedS3ConfigurationError": K.CONFIG,
    "UnsupportedS3AccesspointConfigurationError": K.CONFIG,
    "UnsupportedOutpostResourceError": K.CONFIG,
    "UnsupportedSignatureVersionError": K.CONFIG,
    "UnknownSignatureVersionError": K.CONFIG,
    # everything else: our bug or botocore's; never authoritative
    "BotoCoreError": K.UNKNOWN,
    "AliasConflictParameterError": K.UNKNOWN,
    "ApiVersionNotFoundError": K.UNKNOWN,
    "AwsChunkedWrapperError": K.UNKNOWN,
    "BaseEndpointResolverError": K.UNKNOWN,
    "ChecksumError": K.UNKNOWN,
    "DataNotFoundError": K.UNKNOWN,
    "EndpointProviderError": K.UNKNOWN,
    "FlexibleChecksumError": K.UNKNOWN,
    "InvalidExpressionError": K.UNKNOWN,
    "InvalidHostLabelError": K.UNKNOWN,
    "MD5UnavailableError": K.UNKNOWN,
    "MissingDependencyException": K.UNKNOWN,
    "MissingParametersError": K.UNKNOWN,
    "MissingServiceIdError": K.UNKNOWN,
    "OperationNotPageableError": K.UNKNOWN,
    "PaginationError": K.UNKNOWN,
    "ParamValidationError": K.UNKNOWN,
    "RangeError": K.UNKNOWN,
    "ServiceNotInRegionError": K.UNKNOWN,
    "StubAssertionError": K.UNKNOWN,
    "StubResponseError": K.UNKNOWN,
    "UnStubbedResponseError": K.UNKNOWN,
    "UndefinedModelAttributeError": K.UNKNOWN,
    "UnknownClientMethodError": K.UNKNOWN,
    "UnknownEndpointResolutionBuiltInName": K.UNKNOWN,
    "UnknownKeyError": K.UNKNOWN,
    "UnknownParameterError": K.UNKNOWN,
    "UnknownServiceError": K.UNKNOWN,
    "UnknownServiceStyle": K.UNKNOWN,
    "UnseekableStreamError": K.UNKNOWN,
    "UnsupportedS3ControlArnError": K.UNKNOWN,
    "UnsupportedS3ControlConfigurationError": K.UNKNOWN,
    "UnsupportedServiceProtocolsError": K.UNKNOWN,
    "ValidationError": K.UNKNOWN,
    "WaiterConfigError": K.UNKNOWN,
    "WaiterError": K.UNKNOWN,
}


def _upstream_classes() -> dict[str, type[BaseException]]:
    return {
        name: cls
        for name, cls in inspect.getmembers(be, inspect.isclass)
        if cls.__module__ == be.__name__
        and issubclass(cls, BaseException)
        and not issubclass(cls, Warning)
    }


def test_classify_upstream_module_fully_tabled() -> None:
    upstream = set(_upstream_classes())

    assert upstream - set(UPSTREAM) == set(), "a new botocore exception class needs a row"


@pytest.mark.parametrize(("name", "expected"), sorted(UPSTREAM.items()), ids=sorted(UPSTREAM))
def test_classify_each_upstream_class_expected_kind(name: str, expected: K) -> None:
    cls = _upstream_classes().get(name)
    if cls is None:
        pytest.skip(f"botocore {be.__name__} no longer defines {name}")

    exc = build(cls)

    assert type(exc) is cls
    assert errors.classify(exc) is expected


def _case_id(value: object) -> str | None:
    if not isinstance(value, BaseException):
        return None
    response = getattr(value, "response", None) or {}
    code = response.get("Error", {}).get("Code") or "none"
    return f"{type(value).__name__}-{code}" if response else f"{type(value).__name__}-{value}"[:60]


# Named mappings, built as boto3 raises them.
@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (client_error("NoSuchKey", 404), K.ABSENT),
        (client_error("404", 404, "HeadObject"), K.ABSENT),
        (client_error("NotFound", 404), K.ABSENT),
        (client_error("NoSuchBucket", 404), K.NO_SUCH_BUCKET),
        (client_error("AccessDenied", 403), K.FORBIDDEN),
        (client_error("403", 403, "HeadObject"), K.FORBIDDEN),
        (client_error("AllAccessDisabled", 403), K.FORBIDDEN),
        (client_error("SomethingNew", 403), K.FORBIDDEN),
        (client_error("InvalidAccessKeyId", 403), K.CREDENTIALS),
        (client_error("SignatureDoesNotMatch", 403), K.CREDENTIALS),
        (client_error("ExpiredToken", 400), K.CREDENTIALS),
        (client_error("RequestTimeTooSkewed", 403), K.CONFIG),
        (client_error("PermanentRedirect", 301), K.CONFIG),
        (client_error("AuthorizationHeaderMalformed", 400), K.CONFIG),
        (client_error("InvalidBucketName", 400), K.INVALID_URI),
        (client_error("SlowDown", 503), K.UNAVAILABLE),
        (client_error("InternalError", 500), K.UNAVAILABLE),
        (client_error("ServiceUnavailable", 503), K.UNAVAILABLE),
        (client_error("RequestTimeout", 400), K.UNAVAILABLE),
        (client_error("503", 503, "HeadObject"), K.UNAVAILABLE),
        (client_error("BadGateway", 502), K.UNAVAILABLE),
        (client_error("TooManyRequests", 429), K.UNAVAILABLE),
        (client_error("NoSuchUpload", 404), K.UNKNOWN),
        (client_error("InvalidArgument", 400), K.UNKNOWN),
        (client_error("", None), K.UNKNOWN),
        (be.ClientError({}, "GetObject"), K.UNKNOWN),
        (be.EndpointConnectionError(endpoint_url=ENDPOINT), K.UNAVAILABLE),
        (be.ConnectTimeoutError(endpoint_url=ENDPOINT), K.UNAVAILABLE),
        (be.ReadTimeoutError(endpoint_url=ENDPOINT), K.UNAVAILABLE),
        (be.SSLError(endpoint_url=ENDPOINT, error="certificate verify failed"), K.CONFIG),
        (be.SSLError(endpoint_url=ENDPOINT, error="EOF occurred in violation"), K.UNAVAILABLE),
        (be.SSLError(endpoint_url=ENDPOINT, error="The read operation timed out"), K.UNAVAILABLE),
        (ValueError("odd"), K.UNKNOWN),
        (OSError("odd"), K.UNKNOWN),
        (StorageError("ours", details={"kind": "forbidden"}), K.UNKNOWN),
    ],
    ids=lambda v: _case_id(v),
)
def test_classify_named_failures_expected_kind(exc: BaseException, expected: K) -> None:
    assert errors.classify(exc) is expected


def test_upstream_errors_every_tabled_class_caught() -> None:
    caught = errors.upstream_errors()

    for cls in _upstream_classes().values():
        assert isinstance(build(cls), caught)


@pytest.mark.parametrize(
    ("exc", "kind", "fragment"),
    [
        (be.EndpointConnectionError(endpoint_url=ENDPOINT), K.UNAVAILABLE, "cannot reach"),
        (client_error("AccessDenied", 403), K.FORBIDDEN, "access denied"),
        (client_error("NoSuchBucket", 404), K.NO_SUCH_BUCKET, "bucket 'bkt' does not exist"),
        (be.NoCredentialsError(), K.CREDENTIALS, "no usable credentials"),
        (be.ProfileNotFound(profile="p"), K.CONFIG, "client setup is wrong"),
        (client_error("InvalidArgument", 400), K.UNKNOWN, "failed at"),
    ],
    ids=lambda v: v.value if isinstance(v, K) else None,
)
def test_translate_storage_error_kind_endpoint_remedy(
    exc: BaseException, kind: K, fragment: str
) -> None:
    error = errors.translate(exc, operation="read", uri=URI, endpoint=ENDPOINT)

    assert isinstance(error, StorageError)
    assert isinstance(error, NpaError)
    assert error.category == "storage"
    assert error.exit_code == 1
    assert errors.kind_of(error) is kind
    assert fragment in error.message
    assert "\n" not in error.message
    assert error.remedy
    assert error.details["uri"] == str(URI)
    assert error.details["endpoint"] == ENDPOINT


def test_translate_unavailable_names_endpoint_and_uri() -> None:
    error = errors.translate(
        be.EndpointConnectionError(endpoint_url=ENDPOINT),
        operation="read",
        uri=URI,
        endpoint=ENDPOINT,
    )

    assert ENDPOINT in error.message
    assert str(URI) in error.message
    assert ENDPOINT in error.remedy


def test_translate_client_error_records_code_and_status() -> None:
    error = errors.translate(
        client_error("AccessDenied", 403), operation="read", uri=URI, endpoint=ENDPOINT
    )

    assert error.details["code"] == "AccessDenied"
    assert error.details["status"] == 403


def test_translate_explicit_kind_overrides_classification() -> None:
    error = errors.translate(
        client_error("404", 404, "HeadBucket"),
        operation="probe",
        uri=URI,
        endpoint=ENDPOINT,
        kind=K.NO_SUCH_BUCKET,
    )

    assert errors.kind_of(error) is K.NO_SUCH_BUCKET


def test_translate_long_upstream_text_capped_one_line() -> None:
    exc = be.HTTPClientError(error="line\n" * 1000)

    error = errors.translate(exc, operation="read", uri=URI, endpoint=ENDPOINT)

    assert len(str(error.details["error"])) <= 500
    assert "\n" not in error.message


def test_kind_of_missing_or_bad_kind_unknown() -> None:
    assert errors.kind_of(StorageError("no kind")) is K.UNKNOWN
    assert errors.kind_of(StorageError("bad", details={"kind": "nope"})) is K.UNKNOWN


@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.value)
def test_remedy_for_every_kind_nonempty(kind: K) -> None:
    assert errors.remedy_for(kind, URI, ENDPOINT)
