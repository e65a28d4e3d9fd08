"""``S3Uri`` parsing and formatting, probe records and error kinds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.errors import StorageError
from npa_infra.storage import errors
from npa_infra.storage.models import (
    MAX_KEY_BYTES,
    ObjectProbe,
    ProbeState,
    S3Uri,
    StorageErrorKind,
)


@pytest.mark.parametrize(
    ("text", "bucket", "key"),
    [
        ("s3://my-bucket/runs/r1/decision.json", "my-bucket", "runs/r1/decision.json"),
        ("s3://my.bucket.01/k", "my.bucket.01", "k"),
        ("s3://abc/", "abc", ""),
        ("s3://abc", "abc", ""),
        ("s3://abc/prefix/", "abc", "prefix/"),
        ("s3://abc/a b/ü.json", "abc", "a b/ü.json"),
        ("s3://abc//double", "abc", "/double"),
    ],
    ids=["nested-key", "dots", "bucket-slash", "bucket-only", "prefix", "unicode", "leading-slash"],
)
def test_parse_valid_uri_bucket_and_key(text: str, bucket: str, key: str) -> None:
    uri = S3Uri.parse(text)

    assert (uri.bucket, uri.key) == (bucket, key)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "s3:/abc/k",
        "S3://abc/k",
        "gs://abc/k",
        "/abc/k",
        "s3://",
        "s3:///k",
        "s3://ab/k",
        "s3://" + "a" * 64 + "/k",
        "s3://My-Bucket/k",
        "s3://under_score/k",
        "s3://-abc/k",
        "s3://abc-/k",
        "s3://a..b/k",
        "s3://192.168.1.1/k",
        "s3://${config.bucket}/k",
        " s3://abc/k",
        "s3://abc/" + "k" * (MAX_KEY_BYTES + 1),
    ],
    ids=[
        "empty",
        "one-slash",
        "upper-scheme",
        "gcs",
        "path",
        "scheme-only",
        "no-bucket",
        "short-bucket",
        "long-bucket",
        "uppercase-bucket",
        "underscore-bucket",
        "leading-dash",
        "trailing-dash",
        "double-dot",
        "ip-bucket",
        "unresolved-token",
        "leading-space",
        "long-key",
    ],
)
def test_parse_invalid_uri_storage_error_invalid_uri(text: str) -> None:
    with pytest.raises(StorageError) as caught:
        S3Uri.parse(text)

    assert errors.kind_of(caught.value) is StorageErrorKind.INVALID_URI
    assert "not a valid S3 URI" in caught.value.message
    assert caught.value.remedy


def test_constructor_invalid_bucket_storage_error() -> None:
    with pytest.raises(StorageError):
        S3Uri(bucket="NO", key="k")


def test_str_round_trips_through_parse() -> None:
    uri = S3Uri(bucket="bkt", key="a/b.json")

    assert str(uri) == "s3://bkt/a/b.json"
    assert S3Uri.parse(str(uri)) == uri


@given(
    bucket=st.from_regex(r"[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", fullmatch=True),
    key=st.text(max_size=50),
)
def test_str_parse_round_trip_property(bucket: str, key: str) -> None:
    uri = S3Uri(bucket=bucket, key=key)

    assert S3Uri.parse(str(uri)) == uri


def test_uri_frozen_and_hashable() -> None:
    uri = S3Uri.parse("s3://bkt/k")

    with pytest.raises(AttributeError):
        uri.key = "other"  # type: ignore[misc]  # asserting immutability
    assert {uri, S3Uri.parse("s3://bkt/k")} == {uri}


@pytest.mark.parametrize(
    ("probe", "authoritative"),
    [
        (ObjectProbe(state=ProbeState.PRESENT, size=3), True),
        (ObjectProbe(state=ProbeState.EMPTY), True),
        (ObjectProbe(state=ProbeState.ABSENT), True),
        (ObjectProbe(state=ProbeState.UNAVAILABLE, kind=StorageErrorKind.UNAVAILABLE), False),
    ],
    ids=["present", "empty", "absent", "unavailable"],
)
def test_probe_authoritative_only_when_answered(probe: ObjectProbe, authoritative: bool) -> None:
    assert probe.authoritative is authoritative


def test_probe_to_json_plain_values() -> None:
    probe = ObjectProbe(
        state=ProbeState.UNAVAILABLE, detail="boom", kind=StorageErrorKind.FORBIDDEN
    )

    assert probe.to_json() == {
        "state": "unavailable",
        "size": 0,
        "detail": "boom",
        "kind": "forbidden",
    }


@pytest.mark.parametrize("kind", list(StorageErrorKind), ids=lambda k: k.value)
def test_error_kind_never_both_terminal_and_transient(kind: StorageErrorKind) -> None:
    assert not (kind.terminal and kind.transient)


def test_error_kind_absent_unknown_neither_terminal_nor_transient() -> None:
    for kind in (StorageErrorKind.ABSENT, StorageErrorKind.UNKNOWN):
        assert not kind.terminal
        assert not kind.transient
