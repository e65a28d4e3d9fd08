"""The staged-prefix marker and its check against the prefix's objects (runtime-reference.md §6)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.source import marker
from npa_infra.source.marker import MarkerVerdict

FP = "a" * 64
OBJECTS = (("README.md", 1000, "e1"), ("pkg/mod.py", 234, "e2"), ("run.sh", 0, "e3"))
LISTED = {key: (size, etag) for key, size, etag in OBJECTS}


def _marker(fingerprint: str = FP) -> bytes:
    return marker.encode(fingerprint, 3, 1234, OBJECTS)


def _legacy(fingerprint: str = FP, file_count: int = 3, total_bytes: int = 1234) -> bytes:
    body = {
        "schema": "npa.source.v1",
        "fingerprint": fingerprint,
        "file_count": file_count,
        "total_bytes": total_bytes,
    }
    return json.dumps(body).encode()


def test_encode_fixed_keys_schema_and_objects() -> None:
    body = json.loads(_marker())

    assert body == {
        "schema": "npa.source.v2",
        "fingerprint": FP,
        "file_count": 3,
        "total_bytes": 1234,
        "objects": {"README.md": [1000, "e1"], "pkg/mod.py": [234, "e2"], "run.sh": [0, "e3"]},
    }


def test_check_encoded_marker_matches() -> None:
    assert marker.check(_marker(), FP, file_count=3, total_bytes=1234) is MarkerVerdict.MATCH
    assert marker.check(_marker(), FP) is MarkerVerdict.MATCH
    assert marker.check(_legacy(), FP, file_count=3) is MarkerVerdict.MATCH


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
        (_marker("b" * 64), MarkerVerdict.WRONG_FINGERPRINT),
        (_legacy(file_count=4), MarkerVerdict.WRONG_COUNTS),
        (_legacy(total_bytes=999), MarkerVerdict.WRONG_COUNTS),
        (marker.encode(FP, 3, 1234), MarkerVerdict.UNREADABLE),  # names no objects
        (marker.encode(FP, 3, 1234, OBJECTS[:2]), MarkerVerdict.UNREADABLE),
        (_marker().replace(b'"e1"', b"7"), MarkerVerdict.UNREADABLE),
    ],
    ids=[
        "absent",
        "not-json",
        "not-utf8",
        "not-object",
        "schema",
        "fingerprint",
        "count",
        "bytes",
        "v2-without-objects",
        "v2-objects-disagree-with-counts",
        "v2-etag-not-a-string",
    ],
)
def test_check_anything_else_is_a_miss(data: bytes | None, expected: MarkerVerdict) -> None:
    assert marker.check(data, FP, file_count=3, total_bytes=1234) is expected


@pytest.mark.parametrize(
    ("data", "listed", "expected"),
    [
        (_marker(), LISTED, MarkerVerdict.MATCH),
        (_marker(), {**LISTED, "extra.txt": (5, "e9")}, MarkerVerdict.MATCH),
        (
            _marker(),
            {k: v for k, v in LISTED.items() if k != "pkg/mod.py"},
            MarkerVerdict.OBJECTS_MISSING,
        ),
        (_marker(), {}, MarkerVerdict.OBJECTS_MISSING),
        (_marker(), {**LISTED, "pkg/mod.py": (234, "other")}, MarkerVerdict.OBJECTS_CHANGED),
        (_marker(), {**LISTED, "pkg/mod.py": (233, "e2")}, MarkerVerdict.OBJECTS_CHANGED),
        (_marker(), None, MarkerVerdict.OBJECTS_UNLISTED),
        (_legacy(), LISTED, MarkerVerdict.MATCH),
        (_legacy(), {"README.md": (1000, "e1")}, MarkerVerdict.OBJECTS_MISSING),
        (_legacy(), {**LISTED, "run.sh": (5, "e3")}, MarkerVerdict.OBJECTS_CHANGED),
        (None, LISTED, MarkerVerdict.ABSENT),
    ],
    ids=[
        "every-object-staged",
        "an-extra-object",
        "an-object-deleted",
        "every-object-deleted",
        "an-object-overwritten",
        "an-object-truncated",
        "listing-failed",
        "legacy-counts-hold",
        "legacy-object-deleted",
        "legacy-bytes-differ",
        "no-marker",
    ],
)
def test_judge_marker_against_listing(
    data: bytes | None, listed: dict[str, tuple[int, str]] | None, expected: MarkerVerdict
) -> None:
    assert marker.judge(data, FP, listed, file_count=3, total_bytes=1234) is expected


_KEYS = st.sampled_from(["a", "b/c.py", "d.sh"])
_ENTRY = st.tuples(st.integers(0, 3), st.sampled_from(["e1", "e2"]))


@given(
    st.dictionaries(_KEYS, _ENTRY, max_size=3),
    st.none() | st.dictionaries(_KEYS, _ENTRY, max_size=3),
)
def test_judge_match_only_when_every_named_object_is_listed_unchanged(
    staged: dict[str, tuple[int, str]], listed: dict[str, tuple[int, str]] | None
) -> None:
    data = marker.encode(
        FP,
        len(staged),
        sum(size for size, _etag in staged.values()),
        [(key, size, etag) for key, (size, etag) in staged.items()],
    )
    verdict = marker.judge(data, FP, listed)
    whole = listed is not None and all(listed.get(k) == v for k, v in staged.items())
    assert (verdict is MarkerVerdict.MATCH) is whole


@given(st.binary(max_size=200))
def test_judge_any_bytes_never_raises(data: bytes) -> None:
    assert isinstance(marker.judge(data, FP, LISTED), MarkerVerdict)


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
