"""The staged-prefix marker (runtime-reference.md §6)."""

from __future__ import annotations

import json

import pytest

from npa_infra.source import marker
from npa_infra.source.marker import MarkerVerdict

FP = "a" * 64


def test_encode_fixed_keys_and_schema() -> None:
    body = json.loads(marker.encode(FP, 3, 1234))

    assert body == {
        "schema": "npa.source.v1",
        "fingerprint": FP,
        "file_count": 3,
        "total_bytes": 1234,
    }


def test_check_encoded_marker_matches() -> None:
    data = marker.encode(FP, 3, 1234)

    assert marker.check(data, FP, file_count=3, total_bytes=1234) is MarkerVerdict.MATCH
    assert marker.check(data, FP) is MarkerVerdict.MATCH


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, MarkerVerdict.ABSENT),
        (b"not json", MarkerVerdict.UNREADABLE),
        (b"\xff\xfe", MarkerVerdict.UNREADABLE),
        (b"[1, 2]", MarkerVerdict.UNREADABLE),
        (
            json.dumps({"schema": "npa.source.v0", "fingerprint": FP}).encode(),
            MarkerVerdict.WRONG_SCHEMA,
        ),
        (marker.encode("b" * 64, 3, 1234), MarkerVerdict.WRONG_FINGERPRINT),
        (marker.encode(FP, 4, 1234), MarkerVerdict.WRONG_COUNTS),
        (marker.encode(FP, 3, 999), MarkerVerdict.WRONG_COUNTS),
    ],
    ids=["absent", "not-json", "not-utf8", "not-object", "schema", "fingerprint", "count", "bytes"],
)
def test_check_anything_else_is_a_miss(data: bytes | None, expected: MarkerVerdict) -> None:
    assert marker.check(data, FP, file_count=3, total_bytes=1234) is expected


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("npa-src/npa/" + FP + "/", f"npa-src/npa/{FP}/.npa-source.json"),
        ("npa-src/npa/" + FP, f"npa-src/npa/{FP}/.npa-source.json"),
        ("", ".npa-source.json"),
    ],
    ids=["slash", "no-slash", "root"],
)
def test_marker_key(prefix: str, expected: str) -> None:
    assert marker.marker_key(prefix) == expected
