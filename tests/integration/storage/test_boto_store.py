"""``BotoStore`` against moto's S3 server over loopback, through the real boto3 client.

Covers what runtime mode relies on (runtime-reference.md §2, dsl.md §5.4):
authoritative absence, empty versus present keys and prefixes, a missing
bucket that is never mistaken for a missing key, the read cap, and an
unreachable endpoint that becomes a one-line ``StorageError`` naming it.
"""

from __future__ import annotations

import socket

import pytest

from npa_infra.errors import StorageError
from npa_infra.storage import errors
from npa_infra.storage.models import ObjectProbe, ProbeState, S3Uri, StorageErrorKind
from npa_infra.storage.s3 import BotoStore
from tests.support.motoserver import MotoS3

BUCKET = "npa-test"


@pytest.fixture
def store(s3_server: MotoS3) -> BotoStore:
    s3_server.create_bucket(BUCKET)
    return BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)


def uri(key: str, bucket: str = BUCKET) -> S3Uri:
    return S3Uri(bucket=bucket, key=key)


def closed_port_endpoint() -> str:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- read_bytes -------------------------------------------------------------------------


def test_read_bytes_absent_key_none(store: BotoStore) -> None:
    assert store.read_bytes(uri("runs/r1/decision.json")) is None


def test_read_bytes_present_key_exact_bytes(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "runs/r1/decision.json", b'{"decision": "promote"}')

    assert store.read_bytes(uri("runs/r1/decision.json")) == b'{"decision": "promote"}'


def test_read_bytes_empty_object_empty_bytes(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "empty.json", b"")

    assert store.read_bytes(uri("empty.json")) == b""


def test_read_bytes_at_cap_allowed(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "exact", b"x" * 16)

    assert store.read_bytes(uri("exact"), max_bytes=16) == b"x" * 16


def test_read_bytes_oversize_refused_too_large(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "big", b"x" * 17)

    with pytest.raises(StorageError) as caught:
        store.read_bytes(uri("big"), max_bytes=16)

    assert errors.kind_of(caught.value) is StorageErrorKind.TOO_LARGE
    assert "16-byte limit" in caught.value.message
    assert caught.value.details["size"] == 17


def test_read_bytes_no_such_bucket_raises_not_absent(store: BotoStore) -> None:
    with pytest.raises(StorageError) as caught:
        store.read_bytes(uri("k", bucket="missing-bucket"))

    assert errors.kind_of(caught.value) is StorageErrorKind.NO_SUCH_BUCKET
    assert "'missing-bucket' does not exist" in caught.value.message
    assert caught.value.details["code"] == "NoSuchBucket"
    assert isinstance(caught.value.__cause__, Exception)


def test_read_bytes_bucket_uri_invalid(store: BotoStore) -> None:
    with pytest.raises(StorageError) as caught:
        store.read_bytes(S3Uri(bucket=BUCKET))

    assert errors.kind_of(caught.value) is StorageErrorKind.INVALID_URI


# --- probe_key --------------------------------------------------------------------------


def test_probe_key_absent_key_absent(store: BotoStore) -> None:
    probe = store.probe_key(uri("out/model.pt"))

    assert probe.state is ProbeState.ABSENT
    assert probe.authoritative


def test_probe_key_empty_object_empty(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "out/model.pt", b"")

    assert store.probe_key(uri("out/model.pt")) == ObjectProbe(
        state=ProbeState.EMPTY, size=0, detail=f"s3://{BUCKET}/out/model.pt"
    )


def test_probe_key_present_object_present_with_size(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "out/model.pt", b"weights")

    probe = store.probe_key(uri("out/model.pt"))

    assert (probe.state, probe.size) == (ProbeState.PRESENT, 7)


def test_probe_key_no_such_bucket_unavailable_not_absent(store: BotoStore) -> None:
    # HEAD answers a missing bucket with the same bare 404 as a missing key.
    probe = store.probe_key(uri("k", bucket="missing-bucket"))

    assert probe.state is ProbeState.UNAVAILABLE
    assert probe.kind is StorageErrorKind.NO_SUCH_BUCKET
    assert "missing-bucket" in probe.detail


# --- probe_prefix -----------------------------------------------------------------------


def test_probe_prefix_nothing_under_prefix_absent(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "elsewhere/file", b"data")

    assert store.probe_prefix(uri("out/ckpt/")).state is ProbeState.ABSENT


def test_probe_prefix_only_zero_size_objects_empty(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "out/ckpt/", b"")
    s3_server.put(BUCKET, "out/ckpt/_SUCCESS", b"")

    probe = store.probe_prefix(uri("out/ckpt/"))

    assert probe.state is ProbeState.EMPTY
    assert probe.detail.startswith("2 zero-size object(s)")


def test_probe_prefix_some_object_non_empty_present(store: BotoStore, s3_server: MotoS3) -> None:
    s3_server.put(BUCKET, "out/ckpt/_SUCCESS", b"")
    s3_server.put(BUCKET, "out/ckpt/step-10/model.pt", b"weights!")

    probe = store.probe_prefix(uri("out/ckpt/"))

    assert probe == ObjectProbe(
        state=ProbeState.PRESENT, size=8, detail=f"s3://{BUCKET}/out/ckpt/step-10/model.pt"
    )


def test_probe_prefix_non_empty_on_last_page_present(s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    for index in range(4):
        s3_server.put(BUCKET, f"out/{index:02d}", b"")
    s3_server.put(BUCKET, "out/zz-last", b"1")
    store = BotoStore.create(endpoint_url=s3_server.endpoint_url, page_size=2)

    probe = store.probe_prefix(uri("out/"))

    assert probe.state is ProbeState.PRESENT
    assert probe.detail.endswith("out/zz-last")


def test_probe_prefix_zero_size_across_pages_counts_all(s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    for index in range(5):
        s3_server.put(BUCKET, f"out/{index:02d}", b"")
    store = BotoStore.create(endpoint_url=s3_server.endpoint_url, page_size=2)

    probe = store.probe_prefix(uri("out/"))

    assert probe.state is ProbeState.EMPTY
    assert probe.detail.startswith("5 zero-size object(s)")


def test_probe_prefix_no_such_bucket_unavailable(store: BotoStore) -> None:
    probe = store.probe_prefix(uri("out/", bucket="missing-bucket"))

    assert probe.state is ProbeState.UNAVAILABLE
    assert probe.kind is StorageErrorKind.NO_SUCH_BUCKET


# --- write_bytes ------------------------------------------------------------------------


def test_write_bytes_then_read_round_trip_and_overwrite(
    store: BotoStore, s3_server: MotoS3
) -> None:
    target = uri("npa-workflow/runtime.json")

    store.write_bytes(target, b'{"v": 1}', content_type="application/json")
    store.write_bytes(target, b'{"v": 2}', content_type="application/json")

    assert store.read_bytes(target) == b'{"v": 2}'
    head = s3_server.client.head_object(Bucket=BUCKET, Key=target.key)
    assert head["ContentType"] == "application/json"


def test_write_bytes_no_such_bucket_raises(store: BotoStore) -> None:
    with pytest.raises(StorageError) as caught:
        store.write_bytes(uri("k", bucket="missing-bucket"), b"x")

    assert errors.kind_of(caught.value) is StorageErrorKind.NO_SUCH_BUCKET


# --- endpoint resolution and failures ---------------------------------------------------


def test_create_does_no_io() -> None:
    store = BotoStore.create(endpoint_url=closed_port_endpoint())

    assert store.endpoint.startswith("http://127.0.0.1:")


def test_create_without_endpoint_uses_boto3_resolution(s3_server: MotoS3) -> None:
    # The fixture points AWS_ENDPOINT_URL at the server; boto3 resolves it (no path-style forced).
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "k", b"via env")
    store = BotoStore.create()

    assert store.read_bytes(uri("k")) == b"via env"
    assert store.endpoint == s3_server.endpoint_url


def test_explicit_endpoint_overrides_environment(
    s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "k", b"explicit")
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_port_endpoint())
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", closed_port_endpoint())

    store = BotoStore.create(endpoint_url=s3_server.endpoint_url)

    assert store.read_bytes(uri("k")) == b"explicit"


@pytest.fixture
def unreachable(s3_server: MotoS3) -> BotoStore:
    return BotoStore.create(endpoint_url=closed_port_endpoint(), connect_timeout=2, max_attempts=1)


def test_read_bytes_unreachable_endpoint_unavailable_names_endpoint(unreachable: BotoStore) -> None:
    with pytest.raises(StorageError) as caught:
        unreachable.read_bytes(uri("k"))

    error = caught.value
    assert errors.kind_of(error) is StorageErrorKind.UNAVAILABLE
    assert error.message.startswith(f"cannot reach the S3 endpoint {unreachable.endpoint}")
    assert "\n" not in error.message
    assert "Traceback" not in error.message
    assert unreachable.endpoint in error.remedy
    assert error.details["endpoint"] == unreachable.endpoint


@pytest.mark.parametrize("probe", ["probe_key", "probe_prefix"], ids=["key", "prefix"])
def test_probe_unreachable_endpoint_unavailable_not_absent(
    unreachable: BotoStore, probe: str
) -> None:
    result: ObjectProbe = getattr(unreachable, probe)(uri("out/k"))

    assert result.state is ProbeState.UNAVAILABLE
    assert result.kind is StorageErrorKind.UNAVAILABLE
    assert unreachable.endpoint in result.detail


def test_write_bytes_unreachable_endpoint_unavailable(unreachable: BotoStore) -> None:
    with pytest.raises(StorageError) as caught:
        unreachable.write_bytes(uri("k"), b"x")

    assert errors.kind_of(caught.value) is StorageErrorKind.UNAVAILABLE


def test_read_bytes_no_credentials_credentials_kind(
    s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    store = BotoStore.create(endpoint_url=s3_server.endpoint_url, max_attempts=1)

    with pytest.raises(StorageError) as caught:
        store.read_bytes(uri("k"))

    assert errors.kind_of(caught.value) is StorageErrorKind.CREDENTIALS
