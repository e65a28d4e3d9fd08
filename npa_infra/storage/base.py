"""The one interface the logic layers use to read and probe an object store.

Runtime mode reads a small artifact (a decision), proves a declared output
key or prefix exists after success (runtime-reference.md §2) and writes small
objects; source staging uploads a tree and lists it to prove a staged copy is
still whole (runtime-reference.md §6); the stack's
source prefix deletes what it staged, when asked (pulumi.md §3). Reads and
probes separate authoritative absence from "could not tell", so a
fail-closed caller never mistakes an outage for a missing object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from npa_infra.storage.models import ObjectProbe, S3Uri, StoredObject, Upload

__all__ = ["MAX_LISTED", "MAX_READ_BYTES", "UPLOAD_WORKERS", "ObjectStore"]

MAX_READ_BYTES = 1024 * 1024  # artifacts read through the store are small: 1 MiB by default
UPLOAD_WORKERS = 8  # runtime-reference.md §6: the source tree is uploaded by 8 workers
MAX_LISTED = 200_000  # objects one listing may return: a staged source tree is far smaller


class ObjectStore(Protocol):
    """An S3-compatible store. Methods raise ``StorageError``, never an SDK exception."""

    def read_bytes(self, uri: S3Uri, *, max_bytes: int = MAX_READ_BYTES) -> bytes | None:
        """The object's bytes, or ``None`` when the store says the key does not exist.

        Raises:
            StorageError: any other failure (forbidden, no such bucket, unreachable, unknown),
                or kind ``too_large`` when the object exceeds ``max_bytes``.
        """
        ...

    def probe_key(self, uri: S3Uri) -> ObjectProbe:
        """HEAD the key: ``present`` when ContentLength > 0, ``empty`` at 0, else absent/unavailable.

        Raises:
            StorageError: kind ``invalid_uri`` when ``uri`` has no key.
        """
        ...

    def probe_prefix(self, uri: S3Uri) -> ObjectProbe:
        """List under the prefix: ``present`` iff some object has Size > 0.

        Raises:
            StorageError: never for store failures (they are ``unavailable`` probes).
        """
        ...

    def list_objects(
        self, uri: S3Uri, *, max_objects: int = MAX_LISTED
    ) -> tuple[StoredObject, ...]:
        """Every object whose key starts with ``uri.key``, with its size and ETag.

        Raises:
            StorageError: the listing failed (its kind says why; never read as empty),
                or kind ``too_large`` past ``max_objects``.
        """
        ...

    def write_bytes(
        self, uri: S3Uri, data: bytes, *, content_type: str = "application/octet-stream"
    ) -> None:
        """Create or overwrite the object.

        Raises:
            StorageError: the write failed or its outcome is unknown.
        """
        ...

    def delete_prefix(self, uri: S3Uri) -> int:
        """Delete every object whose key starts with ``uri.key``; return how many.

        Raises:
            StorageError: the listing or a delete failed (some objects may be gone);
                ``invalid_uri`` when ``uri`` has no key (never the whole bucket).
        """
        ...

    def upload_files(self, uploads: Sequence[Upload], *, workers: int = UPLOAD_WORKERS) -> None:
        """Put every file at its URI, ``workers`` transfers at a time (large files multipart).

        Returns only when every upload succeeded; on the first failure the rest are
        cancelled, and objects already written stay (the caller's marker, written
        last, is what makes a prefix count).

        Raises:
            StorageError: an upload failed or its outcome is unknown; ``invalid_uri``
                for a URI without a key.
            ConfigError: a local file could not be read.
        """
        ...
