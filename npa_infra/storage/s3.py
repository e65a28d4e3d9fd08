"""``BotoStore``: the real ``ObjectStore``, over boto3 (imported lazily, style.md rule 6).

The endpoint is boto3's own resolution (``AWS_ENDPOINT_URL_S3``,
``AWS_ENDPOINT_URL``, the profile's ``endpoint_url``, then AWS) unless the
factory is given one; an explicit endpoint (MinIO, moto) gets path-style
addressing, because such servers rarely resolve ``<bucket>.<host>``.
Constructing a store does no I/O: the client is built on the first call.
Every upstream failure goes through ``errors.translate`` (style.md rule 8).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from npa_infra.errors import ConfigError, StorageError
from npa_infra.storage import errors
from npa_infra.storage.base import MAX_LISTED, MAX_READ_BYTES, UPLOAD_WORKERS
from npa_infra.storage.models import (
    ObjectProbe,
    ProbeState,
    S3Uri,
    StorageErrorKind,
    StoredObject,
    Upload,
)

__all__ = ["BotoStore"]

_DETAIL_CAP = 500
MULTIPART_BYTES = 8 * 1024 * 1024  # files from 8 MiB up go as parallel 8 MiB parts


class BotoStore:
    """An S3-compatible store reached through one lazily built boto3 client."""

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        max_attempts: int = 3,
        page_size: int = 1000,
    ) -> None:
        self._endpoint_url = endpoint_url
        self._region = region
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_attempts = max_attempts
        self._page_size = page_size
        self._client: Any = None  # a boto3 S3 client; boto3 ships no type hints
        self._lock = threading.Lock()
        self._requests = 0
        self._requests_lock = threading.Lock()

    @classmethod
    def create(
        cls,
        endpoint_url: str | None = None,
        region: str | None = None,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        max_attempts: int = 3,
        page_size: int = 1000,
    ) -> BotoStore:
        """A store on ``endpoint_url`` (else boto3's resolution) in ``region``; does no I/O.

        ``max_attempts`` counts boto3's own attempts (standard mode) at transient failures;
        ``page_size`` is the ListObjectsV2 page size of ``probe_prefix`` (S3's maximum: 1000).
        """
        return cls(
            endpoint_url=endpoint_url,
            region=region,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
            page_size=page_size,
        )

    @property
    def endpoint(self) -> str:
        """The endpoint calls go to: resolved once the client exists, else what was asked for."""
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        return self._endpoint_url or "the default S3 endpoint"

    def read_bytes(self, uri: S3Uri, *, max_bytes: int = MAX_READ_BYTES) -> bytes | None:
        """The object's bytes, or ``None`` when the store says the key does not exist.

        Raises:
            StorageError: forbidden, no such bucket, unreachable, unknown; ``too_large``
                past ``max_bytes``; ``invalid_uri`` without a key.
        """
        _require_key(uri, "read")
        upstream = errors.upstream_errors()
        try:
            response = self._s3().get_object(Bucket=uri.bucket, Key=uri.key)
        except upstream as exc:
            kind = errors.classify(exc)
            if kind is StorageErrorKind.ABSENT:
                return None
            raise self._translate(exc, "read", uri, kind) from exc
        length = response.get("ContentLength")
        body = response["Body"]
        try:
            if isinstance(length, int) and length > max_bytes:
                raise _too_large(uri, length, max_bytes)
            data = _read_capped(body, max_bytes)
        except upstream as exc:
            raise self._translate(exc, "read", uri, errors.classify(exc)) from exc
        finally:
            body.close()
        if len(data) > max_bytes:
            raise _too_large(uri, len(data), max_bytes)
        return data

    def probe_key(self, uri: S3Uri) -> ObjectProbe:
        """HEAD the key: ``present`` when ContentLength > 0, ``empty`` at 0.

        Raises:
            StorageError: kind ``invalid_uri`` when ``uri`` has no key; store failures
                are ``unavailable`` probes, never exceptions.
        """
        _require_key(uri, "probe")
        upstream = errors.upstream_errors()
        try:
            head = self._s3().head_object(Bucket=uri.bucket, Key=uri.key)
        except upstream as exc:
            kind = errors.classify(exc)
            if kind is StorageErrorKind.ABSENT:
                return self._absent_unless_no_bucket(uri)
            return _unavailable(self._translate(exc, "probe", uri, kind))
        size = head.get("ContentLength")
        if not isinstance(size, int) or size < 0:
            return ObjectProbe(
                state=ProbeState.UNAVAILABLE,
                detail=f"HEAD {uri} returned no usable ContentLength ({size!r})",
                kind=StorageErrorKind.UNKNOWN,
            )
        state = ProbeState.PRESENT if size > 0 else ProbeState.EMPTY
        return ObjectProbe(state=state, size=size, detail=str(uri))

    def probe_prefix(self, uri: S3Uri) -> ObjectProbe:
        """List under the prefix (raw S3 prefix match): ``present`` iff some object has Size > 0.

        Raises:
            StorageError: never; store failures are ``unavailable`` probes.
        """
        upstream = errors.upstream_errors()
        zero_sized = 0
        try:
            pages = self._s3().get_paginator("list_objects_v2")
            listing = pages.paginate(
                Bucket=uri.bucket, Prefix=uri.key, PaginationConfig={"PageSize": self._page_size}
            )
            for page in listing:
                for entry in page.get("Contents") or ():
                    size = entry.get("Size")
                    if isinstance(size, int) and size > 0:
                        witness = S3Uri(bucket=uri.bucket, key=str(entry.get("Key", "")))
                        return ObjectProbe(state=ProbeState.PRESENT, size=size, detail=str(witness))
                    zero_sized += 1
        except upstream as exc:
            return _unavailable(self._translate(exc, "list", uri, errors.classify(exc)))
        if zero_sized:
            return ObjectProbe(
                state=ProbeState.EMPTY, detail=f"{zero_sized} zero-size object(s) under {uri}"
            )
        return ObjectProbe(state=ProbeState.ABSENT, detail=f"no object under {uri}")

    def list_objects(
        self, uri: S3Uri, *, max_objects: int = MAX_LISTED
    ) -> tuple[StoredObject, ...]:
        """Every object under the prefix (raw S3 prefix match), a page per request.

        Raises:
            StorageError: the listing failed, or ``too_large`` past ``max_objects``.
        """
        found: list[StoredObject] = []
        try:
            pages = self._s3().get_paginator("list_objects_v2")
            listing = pages.paginate(
                Bucket=uri.bucket, Prefix=uri.key, PaginationConfig={"PageSize": self._page_size}
            )
            for page in listing:
                for entry in page.get("Contents") or ():
                    found.append(_stored(entry))
                if len(found) > max_objects:
                    raise _too_many(uri, max_objects)
        except errors.upstream_errors() as exc:
            raise self._translate(exc, "list", uri, errors.classify(exc)) from exc
        return tuple(found)

    def write_bytes(
        self, uri: S3Uri, data: bytes, *, content_type: str = "application/octet-stream"
    ) -> None:
        """Create or overwrite the object.

        Raises:
            StorageError: the write failed or its outcome is unknown; ``invalid_uri`` without a key.
        """
        _require_key(uri, "write")
        try:
            self._s3().put_object(
                Bucket=uri.bucket, Key=uri.key, Body=data, ContentType=content_type
            )
        except errors.upstream_errors() as exc:
            raise self._translate(exc, "write", uri, errors.classify(exc)) from exc

    def delete_prefix(self, uri: S3Uri) -> int:
        """Delete every object under the prefix, a listed page (<= 1000 keys) per request.

        Raises:
            StorageError: the listing or a delete failed; ``invalid_uri`` without a key.
        """
        _require_key(uri, "delete under")
        upstream = errors.upstream_errors()
        deleted = 0
        try:
            pages = self._s3().get_paginator("list_objects_v2")
            listing = pages.paginate(
                Bucket=uri.bucket, Prefix=uri.key, PaginationConfig={"PageSize": self._page_size}
            )
            for page in listing:
                keys = [{"Key": entry["Key"]} for entry in page.get("Contents") or ()]
                if not keys:
                    continue
                answer = self._s3().delete_objects(
                    Bucket=uri.bucket, Delete={"Objects": keys, "Quiet": True}
                )
                failed = answer.get("Errors") or []
                if failed:
                    first = failed[0]
                    raise StorageError(
                        f"could not delete {len(failed)} object(s) under {uri}: "
                        f"{first.get('Key')}: {first.get('Code')} {first.get('Message')}",
                        remedy="check the credentials allow s3:DeleteObject, then rerun",
                        details={"kind": StorageErrorKind.UNKNOWN.value, "uri": str(uri)},
                    )
                deleted += len(keys)
        except upstream as exc:
            raise self._translate(exc, "delete under", uri, errors.classify(exc)) from exc
        return deleted

    def upload_files(self, uploads: Sequence[Upload], *, workers: int = UPLOAD_WORKERS) -> None:
        """Put every file through one s3transfer manager: ``workers`` threads in all.

        Small files go as one PUT each, ``workers`` at a time; a file of
        ``MULTIPART_BYTES`` or more goes as a multipart upload whose parts share
        the same threads. The first failure cancels the transfers still queued.

        Raises:
            StorageError: an upload failed or its outcome is unknown; ``invalid_uri``
                for a URI without a key.
            ConfigError: a local file could not be read.
        """
        for item in uploads:
            _require_key(item.uri, "upload")
        if not uploads:
            return
        from boto3.s3.transfer import (  # type: ignore[import-untyped]  # boto3 ships no type hints
            TransferConfig,
            create_transfer_manager,
        )

        config = TransferConfig(
            multipart_threshold=MULTIPART_BYTES,
            multipart_chunksize=MULTIPART_BYTES,
            max_concurrency=max(1, workers),
            use_threads=True,
        )
        manager = create_transfer_manager(self._s3(), config)
        upstream = errors.upstream_errors()
        current = uploads[0]
        cancel = True
        try:
            futures = [
                (item, manager.upload(str(item.path), item.uri.bucket, item.uri.key))
                for item in uploads
            ]
            for item, future in futures:
                current = item  # named in the error if this one failed
                future.result()
            cancel = False
        except upstream as exc:
            raise self._translate(exc, "upload", current.uri, errors.classify(exc)) from exc
        except concurrent.futures.CancelledError as exc:  # s3transfer's Cancelled/FatalError
            raise self._translate(exc, "upload", current.uri, StorageErrorKind.UNKNOWN) from exc
        except OSError as exc:
            raise ConfigError(
                f"cannot read {current.path} to upload it to {current.uri}: {exc.strerror or exc}",
                remedy="keep the source tree unchanged while it is staged, then rerun",
                details={"path": str(current.path), "uri": str(current.uri)},
            ) from exc
        finally:
            manager.shutdown(cancel=cancel)

    def connect(self) -> None:
        """Build the boto3 client now (it reads the AWS config and loads the S3 model).

        For callers that overlap the ~0.2 s this takes with other work, e.g. on a
        background thread while a source tree is scanned. A failure is left for
        the next real call to raise, translated, in the caller's thread.
        """
        with contextlib.suppress(*errors.upstream_errors()):
            self._s3()

    @property
    def request_count(self) -> int:
        """HTTP requests this store has sent so far, retries included (diagnostics, benchmarks)."""
        with self._requests_lock:
            return self._requests

    def _count_request(self, **_: Any) -> None:
        with self._requests_lock:
            self._requests += 1

    def _s3(self) -> Any:
        """The boto3 client, built once; building it reads the AWS config files and env."""
        with self._lock:
            if self._client is None:
                import boto3  # type: ignore[import-untyped]  # boto3 ships no type hints
                from botocore.config import Config  # type: ignore[import-untyped]  # no hints

                options: dict[str, Any] = {
                    "connect_timeout": self._connect_timeout,
                    "read_timeout": self._read_timeout,
                    "retries": {"mode": "standard", "max_attempts": self._max_attempts},
                    # the upload workers plus the odd concurrent read share one pool
                    "max_pool_connections": UPLOAD_WORKERS + 2,
                }
                if self._endpoint_url:
                    options["s3"] = {"addressing_style": "path"}
                session = boto3.session.Session(region_name=self._region)
                self._client = session.client(
                    "s3", endpoint_url=self._endpoint_url, config=Config(**options)
                )
                self._client.meta.events.register("before-send.s3", self._count_request)
            return self._client

    def _absent_unless_no_bucket(self, uri: S3Uri) -> ObjectProbe:
        """A HEAD 404 is the same for a missing key and a missing bucket: ask the bucket.

        S3 answers a missing key with 404 only to callers allowed to list the bucket
        (403 otherwise), and a missing bucket with 404 whoever asks; so a bucket that
        answers, or refuses us (403), exists and the key's 404 is authoritative.
        """
        try:
            self._s3().head_bucket(Bucket=uri.bucket)
        except errors.upstream_errors() as exc:
            kind = errors.classify(exc)
            if kind is StorageErrorKind.ABSENT:
                kind = StorageErrorKind.NO_SUCH_BUCKET
            if kind is not StorageErrorKind.FORBIDDEN:
                return _unavailable(self._translate(exc, "probe", uri, kind))
        return ObjectProbe(state=ProbeState.ABSENT, detail=f"{uri} does not exist")

    def _translate(
        self, exc: BaseException, operation: str, uri: S3Uri, kind: StorageErrorKind
    ) -> StorageError:
        return errors.translate(
            exc, operation=operation, uri=uri, endpoint=self.endpoint, kind=kind
        )


def _read_capped(body: Any, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes, so an object without a length still cannot flood us."""
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes:
        chunk = body.read(max_bytes + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _stored(entry: Mapping[str, Any]) -> StoredObject:
    size = entry.get("Size")
    return StoredObject(
        key=str(entry.get("Key", "")),
        size=size if isinstance(size, int) else -1,  # no size: matches no expected one
        etag=str(entry.get("ETag") or "").strip('"'),
    )


def _too_many(uri: S3Uri, max_objects: int) -> StorageError:
    return StorageError(
        f"{uri} holds more than {max_objects} objects, more than npa lists",
        remedy="stage source under its own prefix (npa-infra:sourcePrefix), then rerun",
        details={"kind": StorageErrorKind.TOO_LARGE.value, "uri": str(uri)},
    )


def _require_key(uri: S3Uri, operation: str) -> None:
    if not uri.key:
        raise StorageError(
            f"cannot {operation} {uri}: it names a bucket, not an object key",
            remedy="write the location as s3://<bucket>/<key>, then rerun",
            details={"kind": StorageErrorKind.INVALID_URI.value, "uri": str(uri)},
        )


def _too_large(uri: S3Uri, size: int, max_bytes: int) -> StorageError:
    return StorageError(
        f"{uri} holds {size} bytes or more, over the {max_bytes}-byte limit for artifacts npa reads",
        remedy="write a small artifact there (a decision is a small JSON object), then rerun",
        details={
            "kind": StorageErrorKind.TOO_LARGE.value,
            "uri": str(uri),
            "size": size,
            "max_bytes": max_bytes,
        },
    )


def _unavailable(error: StorageError) -> ObjectProbe:
    """A probe that could not be answered, carrying the translated error's kind and message."""
    return ObjectProbe(
        state=ProbeState.UNAVAILABLE,
        detail=error.message[:_DETAIL_CAP],
        kind=errors.kind_of(error),
    )
