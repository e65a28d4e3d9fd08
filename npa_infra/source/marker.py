"""The manifest that proves a staged prefix is complete, checked against its objects
(runtime-reference.md §6).

``<prefix>/<fingerprint>/.npa-source.json`` is written **last**, after every
file, and read back at once. It lists every staged object with the size and
ETag the store reported right after the upload::

    {"schema": "npa.source.v2", "fingerprint": "<64 hex>", "file_count": 2,
     "total_bytes": 12, "objects": {"README.md": [10, "<etag>"], "run.sh": [2, "<etag>"]}}

A marker alone proves only that an upload once finished: an object deleted or
overwritten since then would leave a run without its source. So a prefix
counts as staged only when the marker parses, names the expected fingerprint
(and, when the caller knows them, the same counts) **and** a listing of the
prefix, taken now, shows every object it names with the same size and ETag
(``judge``). A marker of the first schema (``npa.source.v1``, counts only) is
checked by the listing's object count and total size. Anything else, an
unreadable marker, none, or a listing that failed, is a cache miss: an
interrupted upload never leaves a marker, and a damaged copy is never reused.
Objects beside the listed ones are not the marker's business (the prefix is
content-addressed; nothing of npa writes them). Pure: encoding and checking.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from npa_infra.source.selection import MARKER_NAME

__all__ = [
    "LEGACY_SCHEMA",
    "MARKER_NAME",
    "SCHEMA",
    "MarkerVerdict",
    "check",
    "encode",
    "judge",
    "marker_key",
]

SCHEMA = "npa.source.v2"
LEGACY_SCHEMA = "npa.source.v1"  # counts only: checked by the listing's count and bytes

Listed = Mapping[str, tuple[int, str]]  # key under the prefix -> (size, ETag)


class MarkerVerdict(StrEnum):
    """What a marker read, and the listing of its prefix, prove about a prefix."""

    MATCH = "match"  # complete, and the expected content
    ABSENT = "absent"  # no marker: never staged, or interrupted
    UNREADABLE = "unreadable"  # not a JSON object of a known schema's shape
    WRONG_SCHEMA = "wrong_schema"
    WRONG_FINGERPRINT = "wrong_fingerprint"
    WRONG_COUNTS = "wrong_counts"
    OBJECTS_MISSING = "objects_missing"  # an object the marker names is gone
    OBJECTS_CHANGED = "objects_changed"  # an object's size or ETag is not the staged one
    OBJECTS_UNLISTED = "objects_unlisted"  # the listing failed: nothing is proven


def marker_key(prefix_key: str) -> str:
    """The marker's key under a prefix key (with or without its trailing slash)."""
    return f"{prefix_key.rstrip('/')}/{MARKER_NAME}" if prefix_key.strip("/") else MARKER_NAME


def encode(
    fingerprint: str,
    file_count: int,
    total_bytes: int,
    objects: Iterable[tuple[str, int, str]] = (),
) -> bytes:
    """The marker's bytes: compact JSON with sorted keys; ``objects`` are (key, size, ETag)."""
    body = {
        "schema": SCHEMA,
        "fingerprint": fingerprint,
        "file_count": file_count,
        "total_bytes": total_bytes,
        "objects": {key: [size, etag] for key, size, etag in objects},
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _body(data: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _objects(body: Mapping[str, Any]) -> dict[str, tuple[int, str]] | None:
    """A v2 marker's objects, when they are well formed and agree with its own counts."""
    raw = body.get("objects")
    if not isinstance(raw, dict):
        return None
    objects: dict[str, tuple[int, str]] = {}
    for key, value in raw.items():
        if not (isinstance(value, list) and len(value) == 2):
            return None
        size, etag = value
        if not isinstance(size, int) or isinstance(size, bool) or not isinstance(etag, str):
            return None
        objects[key] = (size, etag)
    counts = (len(objects), sum(size for size, _etag in objects.values()))
    return objects if counts == (body.get("file_count"), body.get("total_bytes")) else None


def check(
    data: bytes | None,
    fingerprint: str,
    *,
    file_count: int | None = None,
    total_bytes: int | None = None,
) -> MarkerVerdict:
    """Whether ``data`` (``None``: no marker) is a marker of a complete upload of ``fingerprint``.

    The marker alone: ``judge`` also checks the objects it names.
    """
    if data is None:
        return MarkerVerdict.ABSENT
    body = _body(data)
    if body is None:
        return MarkerVerdict.UNREADABLE
    if body.get("schema") not in (SCHEMA, LEGACY_SCHEMA):
        return MarkerVerdict.WRONG_SCHEMA
    if body.get("schema") == SCHEMA and _objects(body) is None:
        return MarkerVerdict.UNREADABLE
    if body.get("fingerprint") != fingerprint:
        return MarkerVerdict.WRONG_FINGERPRINT
    if file_count is not None and body.get("file_count") != file_count:
        return MarkerVerdict.WRONG_COUNTS
    if total_bytes is not None and body.get("total_bytes") != total_bytes:
        return MarkerVerdict.WRONG_COUNTS
    return MarkerVerdict.MATCH


def judge(
    data: bytes | None,
    fingerprint: str,
    listed: Listed | None,
    *,
    file_count: int | None = None,
    total_bytes: int | None = None,
) -> MarkerVerdict:
    """``check``, then the objects against ``listed`` (None: the listing failed).

    ``listed`` maps each key under the prefix (the marker's own excluded) to the
    size and ETag a listing taken now shows.
    """
    verdict = check(data, fingerprint, file_count=file_count, total_bytes=total_bytes)
    if verdict is not MarkerVerdict.MATCH or data is None:
        return verdict
    if listed is None:
        return MarkerVerdict.OBJECTS_UNLISTED
    body = _body(data) or {}
    objects = _objects(body)
    if objects is None:  # the first schema: its counts against the listing's
        if len(listed) < int(body.get("file_count") or 0):
            return MarkerVerdict.OBJECTS_MISSING
        total = sum(size for size, _etag in listed.values())
        counts = (len(listed), total) == (body.get("file_count"), body.get("total_bytes"))
        return MarkerVerdict.MATCH if counts else MarkerVerdict.OBJECTS_CHANGED
    if any(key not in listed for key in objects):
        return MarkerVerdict.OBJECTS_MISSING
    if any(listed[key] != expected for key, expected in objects.items()):
        return MarkerVerdict.OBJECTS_CHANGED
    return MarkerVerdict.MATCH
