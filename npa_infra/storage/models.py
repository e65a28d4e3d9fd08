"""Typed S3 locations and observations the logic layers consume.

``S3Uri`` is the only way a location crosses the adapter boundary: it is
validated once, at parse time, so no caller handles a half-formed string.
``ObjectProbe`` answers "does this declared output exist?" in the four states
runtime-reference.md §2 needs: only ``present``, ``empty`` and ``absent`` are
authoritative; ``unavailable`` means the store could not say, and a fail-closed
caller must treat it as unknown, never as absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from npa_infra.errors import StorageError

__all__ = [
    "MAX_KEY_BYTES",
    "ObjectProbe",
    "ProbeState",
    "S3Uri",
    "StorageErrorKind",
    "StoredObject",
    "Upload",
]

MAX_KEY_BYTES = 1024  # S3's own limit on a key's UTF-8 length
_SCHEME = "s3://"
# Bucket naming rules for general-purpose buckets: 3-63 of [a-z0-9.-], alphanumeric at both ends.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")


class StorageErrorKind(StrEnum):
    """What a failed object-store call means, grouped by remedy (style.md rule 7)."""

    ABSENT = "absent"  # NoSuchKey / 404: authoritative absence
    FORBIDDEN = "forbidden"  # 403 / AccessDenied: terminal
    NO_SUCH_BUCKET = "no_such_bucket"  # terminal
    CREDENTIALS = "credentials"  # none found, expired or rejected: terminal
    CONFIG = "config"  # bad profile, region, endpoint or TLS setup: terminal
    UNAVAILABLE = "unavailable"  # endpoint unreachable, timeout, throttling, 5xx: transient
    INVALID_URI = "invalid_uri"  # not s3://bucket/key, or a bucket name S3 refuses
    TOO_LARGE = "too_large"  # an object larger than the caller's read cap
    UNKNOWN = "unknown"  # anything else: never authoritative

    @property
    def terminal(self) -> bool:
        """Rerunning without a change cannot succeed."""
        return self in (
            StorageErrorKind.FORBIDDEN,
            StorageErrorKind.NO_SUCH_BUCKET,
            StorageErrorKind.CREDENTIALS,
            StorageErrorKind.CONFIG,
            StorageErrorKind.INVALID_URI,
            StorageErrorKind.TOO_LARGE,
        )

    @property
    def transient(self) -> bool:
        """A later attempt may succeed unchanged."""
        return self is StorageErrorKind.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class S3Uri:
    """``s3://bucket/key``; ``key`` may be empty only where a prefix is meant (the whole bucket)."""

    bucket: str
    key: str = ""

    def __post_init__(self) -> None:
        problem = _bucket_problem(self.bucket) or _key_problem(self.key)
        if problem:
            raise _invalid(f"{_SCHEME}{self.bucket}/{self.key}", problem)

    @classmethod
    def parse(cls, text: str) -> S3Uri:
        """Parse ``s3://bucket[/key]``.

        Raises:
            StorageError: kind ``invalid_uri`` when the text is not an S3 URI S3 would accept.
        """
        if not text.startswith(_SCHEME):
            raise _invalid(text, "it does not start with s3://")
        bucket, _, key = text[len(_SCHEME) :].partition("/")
        if not bucket:
            raise _invalid(text, "it names no bucket")
        problem = _bucket_problem(bucket) or _key_problem(key)
        if problem:
            raise _invalid(text, problem)
        return cls(bucket=bucket, key=key)

    def __str__(self) -> str:
        return f"{_SCHEME}{self.bucket}/{self.key}"


@dataclass(frozen=True, slots=True)
class Upload:
    """One local file to put at ``uri`` (source staging, runtime-reference.md §6)."""

    path: Path
    uri: S3Uri


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object a listing showed: its key, size and ETag (quotes stripped), as the store says."""

    key: str
    size: int
    etag: str


class ProbeState(StrEnum):
    """The answer to "does this declared output exist?" (runtime-reference.md §2)."""

    PRESENT = "present"  # a key with ContentLength > 0, or a prefix with an object of Size > 0
    EMPTY = "empty"  # the key exists with 0 bytes, or the prefix holds only 0-byte objects
    ABSENT = "absent"  # authoritatively not there
    UNAVAILABLE = "unavailable"  # the store could not say: treat as unknown, never as absent


@dataclass(frozen=True, slots=True)
class ObjectProbe:
    """One existence check of a key or a prefix; ``kind`` is set only when ``unavailable``."""

    state: ProbeState
    size: int = 0  # the key's size, or the size of the first non-empty object under the prefix
    detail: str = ""  # the witnessing object, a count, or the (capped) error message
    kind: StorageErrorKind | None = None

    @property
    def authoritative(self) -> bool:
        """The store answered; only then may a caller rely on presence or absence."""
        return self.state is not ProbeState.UNAVAILABLE

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "size": self.size,
            "detail": self.detail,
            "kind": self.kind.value if self.kind is not None else None,
        }


def _bucket_problem(bucket: str) -> str:
    if not _BUCKET.fullmatch(bucket):
        return (
            f"bucket {bucket!r} is not a valid name (3-63 characters: lowercase letters, "
            "digits, '.' and '-', starting and ending with a letter or digit)"
        )
    if ".." in bucket or _IPV4.fullmatch(bucket):
        return f"bucket {bucket!r} is not a valid name (no '..', not an IP address)"
    return ""


def _key_problem(key: str) -> str:
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        return f"the key is longer than {MAX_KEY_BYTES} bytes"
    return ""


def _invalid(text: str, problem: str) -> StorageError:
    shown = text if len(text) <= 200 else text[:200] + "…"
    return StorageError(
        f"{shown!r} is not a valid S3 URI: {problem}",
        remedy="write the location as s3://<bucket>/<key>, then rerun",
        details={"kind": StorageErrorKind.INVALID_URI.value, "uri": shown},
    )
