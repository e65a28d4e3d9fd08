"""The one interface the logic layers use to read and probe an object store.

Runtime mode needs exactly four things from S3: read a small artifact (a
decision), prove a declared output key or prefix exists after success
(runtime-reference.md §2), and write a small object (ledgers, tests). Reads
and probes separate authoritative absence from "could not tell", so a
fail-closed caller never mistakes an outage for a missing object.
"""

from __future__ import annotations

from typing import Protocol

from npa_infra.storage.models import ObjectProbe, S3Uri

__all__ = ["MAX_READ_BYTES", "ObjectStore"]

MAX_READ_BYTES = 1024 * 1024  # artifacts read through the store are small: 1 MiB by default


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

    def write_bytes(
        self, uri: S3Uri, data: bytes, *, content_type: str = "application/octet-stream"
    ) -> None:
        """Create or overwrite the object.

        Raises:
            StorageError: the write failed or its outcome is unknown.
        """
        ...
