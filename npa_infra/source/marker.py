"""The marker object that proves a staged prefix is complete (runtime-reference.md §6).

``<prefix>/<fingerprint>/.npa-source.json`` is written **last**, after every
file, and read back at once. Its schema, fixed keys and nothing else::

    {"file_count": 3, "fingerprint": "<64 hex>", "schema": "npa.source.v1", "total_bytes": 1234}

A prefix counts as staged only when its marker parses, names this schema and
the expected fingerprint (and, when the caller knows them, the same counts).
Anything else, including an unreadable marker or none, is a cache miss: an
interrupted upload never leaves a marker, so it is never mistaken for a
complete one. Pure: encoding and checking only.
"""

from __future__ import annotations

import json
from enum import StrEnum

from npa_infra.source.selection import MARKER_NAME

__all__ = ["MARKER_NAME", "SCHEMA", "MarkerVerdict", "check", "encode", "marker_key"]

SCHEMA = "npa.source.v1"


class MarkerVerdict(StrEnum):
    """What a marker read proves about a prefix."""

    MATCH = "match"  # complete, and the expected content
    ABSENT = "absent"  # no marker: never staged, or interrupted
    UNREADABLE = "unreadable"  # not a JSON object
    WRONG_SCHEMA = "wrong_schema"
    WRONG_FINGERPRINT = "wrong_fingerprint"
    WRONG_COUNTS = "wrong_counts"


def marker_key(prefix_key: str) -> str:
    """The marker's key under a prefix key (with or without its trailing slash)."""
    return f"{prefix_key.rstrip('/')}/{MARKER_NAME}" if prefix_key.strip("/") else MARKER_NAME


def encode(fingerprint: str, file_count: int, total_bytes: int) -> bytes:
    """The marker's bytes: compact JSON with sorted keys."""
    body = {
        "schema": SCHEMA,
        "fingerprint": fingerprint,
        "file_count": file_count,
        "total_bytes": total_bytes,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def check(
    data: bytes | None,
    fingerprint: str,
    *,
    file_count: int | None = None,
    total_bytes: int | None = None,
) -> MarkerVerdict:
    """Whether ``data`` (``None``: no marker) proves a complete upload of ``fingerprint``."""
    if data is None:
        return MarkerVerdict.ABSENT
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return MarkerVerdict.UNREADABLE
    if not isinstance(body, dict):
        return MarkerVerdict.UNREADABLE
    if body.get("schema") != SCHEMA:
        return MarkerVerdict.WRONG_SCHEMA
    if body.get("fingerprint") != fingerprint:
        return MarkerVerdict.WRONG_FINGERPRINT
    if file_count is not None and body.get("file_count") != file_count:
        return MarkerVerdict.WRONG_COUNTS
    if total_bytes is not None and body.get("total_bytes") != total_bytes:
        return MarkerVerdict.WRONG_COUNTS
    return MarkerVerdict.MATCH
