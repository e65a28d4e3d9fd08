"""Upload a checkout under its content address, marker last (runtime-reference.md §6).

``stage_source`` scans the tree (``tree.scan``), then:

1. unless forced, GETs ``<prefix>/<fingerprint>/.npa-source.json``: a marker
   with this schema, fingerprint and counts proves a complete upload, and the
   prefix is reused. That GET is the only S3 request of a reuse;
2. otherwise uploads every selected file to ``<prefix>/<fingerprint>/<path>``
   through ``ObjectStore.upload_files`` (8 workers, large files multipart);
3. re-checks that no file changed while it was read (size, mtime, exec bit),
   because the fingerprint must describe what was uploaded;
4. writes the marker, last, and reads it back: only a marker that reads back
   equal completes the staging.

An interrupted or failed upload leaves no marker, so the next staging
uploads again; a marker read that fails for any reason but credentials or
configuration is a cache miss, never an error (§6 "Any failure is a cache
miss"). Credentials errors name what boto3 looked at and how to fix it,
never a value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_infra.errors import ConfigError, StorageError
from npa_infra.source import decision, marker, tree
from npa_infra.storage import errors as storage_errors
from npa_infra.storage.base import UPLOAD_WORKERS, ObjectStore
from npa_infra.storage.models import S3Uri, StorageErrorKind, Upload

__all__ = ["StageResult", "stage_source", "verify_prefix"]

_MARKER_MAX_BYTES = 64 * 1024
# A marker read failing with these kinds cannot be helped by uploading: report it.
_FATAL_KINDS = frozenset(
    {
        StorageErrorKind.CREDENTIALS,
        StorageErrorKind.CONFIG,
        StorageErrorKind.NO_SUCH_BUCKET,
        StorageErrorKind.INVALID_URI,
    }
)


@dataclass(frozen=True, slots=True)
class StageResult:
    """A staged (or reused) source prefix; ``uploaded`` counts files put by this call."""

    uri: str
    fingerprint: str
    file_count: int
    total_bytes: int
    reused: bool
    uploaded: int

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "reused" if self.reused else "uploaded",
            "uri": self.uri,
            "fingerprint": self.fingerprint,
            "file_count": self.file_count,
            "total_bytes": self.total_bytes,
            "reused": self.reused,
            "uploaded": self.uploaded,
        }


def stage_source(
    root: Path,
    bucket: str,
    prefix: str = decision.DEFAULT_PREFIX,
    *,
    store: ObjectStore,
    force: bool = False,
    scanned: tree.SourceTree | None = None,
    workers: int = UPLOAD_WORKERS,
    env: Mapping[str, str] | None = None,
) -> StageResult:
    """Stage ``root`` under ``s3://bucket/prefix/<fingerprint>/``, or reuse a verified copy.

    ``scanned`` skips the scan when the caller already has it; ``env`` is only
    read to explain a credentials error (default: the process environment).

    Raises:
        ConfigError: the tree cannot be listed or read, or changed while uploading.
        StorageError: the bucket, credentials or endpoint refused (kind in ``details``),
            or the marker did not read back.
    """
    source = scanned if scanned is not None else tree.scan(root)
    base = S3Uri(bucket=bucket, key=_prefix_key(bucket, prefix, source.fingerprint))
    marker_uri = S3Uri(bucket=bucket, key=marker.marker_key(base.key))
    environ = os.environ if env is None else env
    result = StageResult(
        uri=str(base),
        fingerprint=source.fingerprint,
        file_count=source.file_count,
        total_bytes=source.total_bytes,
        reused=True,
        uploaded=0,
    )
    if not force:
        verdict = _read_verdict(store, marker_uri, source, environ)
        if verdict is marker.MarkerVerdict.MATCH:
            return result
    uploads = [
        Upload(path=source.root / item.path, uri=S3Uri(bucket=bucket, key=base.key + item.path))
        for item in source.files
    ]
    try:
        store.upload_files(uploads, workers=workers)
    except StorageError as exc:
        explained = _credentials_error(exc, environ)
        if explained is None:
            raise
        raise explained from exc
    changed = tree.changed_files(source.root, source.files)
    if changed:
        raise ConfigError(
            f"{len(changed)} file(s) changed while {source.root} was being staged "
            f"(first: {changed[0]}); the marker was not written, so nothing will reuse "
            "this upload",
            remedy="rerun when the checkout is quiet (no build or editor writing to it)",
            details={"changed": changed[:20], "uri": str(base)},
        )
    body = marker.encode(source.fingerprint, source.file_count, source.total_bytes)
    try:
        store.write_bytes(marker_uri, body, content_type="application/json")
    except StorageError as exc:
        explained = _credentials_error(exc, environ)
        if explained is None:
            raise
        raise explained from exc
    verdict = _read_verdict(store, marker_uri, source, environ)
    if verdict is not marker.MarkerVerdict.MATCH:
        raise StorageError(
            f"the source marker {marker_uri} did not read back after the upload ({verdict.value})",
            remedy="rerun; if it persists, check that the endpoint is a consistent S3 store",
            details={"kind": StorageErrorKind.UNKNOWN.value, "uri": str(marker_uri)},
        )
    return StageResult(
        uri=result.uri,
        fingerprint=result.fingerprint,
        file_count=result.file_count,
        total_bytes=result.total_bytes,
        reused=False,
        uploaded=len(uploads),
    )


def verify_prefix(
    uri: str, store: ObjectStore, *, env: Mapping[str, str] | None = None
) -> marker.MarkerVerdict:
    """Whether the prefix ``uri`` (ending in a fingerprint) holds a complete staging of it.

    Raises:
        StorageError: ``uri`` is not ``s3://bucket/key``, or the marker read failed for
            credentials, configuration or a missing bucket.
    """
    parsed = S3Uri.parse(uri)
    expected = decision.uri_fingerprint(uri)
    marker_uri = S3Uri(bucket=parsed.bucket, key=marker.marker_key(parsed.key))
    data = _read_marker(store, marker_uri, os.environ if env is None else env)
    return marker.check(data, expected)


def _prefix_key(bucket: str, prefix: str, fingerprint: str) -> str:
    return decision.prefix_uri(bucket, prefix, fingerprint).removeprefix(f"s3://{bucket}/")


def _read_verdict(
    store: ObjectStore, uri: S3Uri, source: tree.SourceTree, env: Mapping[str, str]
) -> marker.MarkerVerdict:
    data = _read_marker(store, uri, env)
    return marker.check(
        data, source.fingerprint, file_count=source.file_count, total_bytes=source.total_bytes
    )


def _read_marker(store: ObjectStore, uri: S3Uri, env: Mapping[str, str]) -> bytes | None:
    """The marker's bytes; ``None`` for absent or for any failure an upload could cure."""
    try:
        return store.read_bytes(uri, max_bytes=_MARKER_MAX_BYTES)
    except StorageError as exc:
        if storage_errors.kind_of(exc) not in _FATAL_KINDS:
            return None
        explained = _credentials_error(exc, env)
        if explained is None:
            raise
        raise explained from exc


def _credentials_error(error: StorageError, env: Mapping[str, str]) -> StorageError | None:
    """For a credentials error, one that names where boto3 looked (never a value); else None."""
    if storage_errors.kind_of(error) is not StorageErrorKind.CREDENTIALS:
        return None
    home = Path("~").expanduser()
    shared = env.get("AWS_SHARED_CREDENTIALS_FILE") or str(home / ".aws" / "credentials")
    config = env.get("AWS_CONFIG_FILE") or str(home / ".aws" / "config")
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or ""
    checked = [
        f"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY ({'set' if env.get('AWS_ACCESS_KEY_ID') else 'unset'})",
        f"AWS_PROFILE ({profile or 'unset'})",
        f"the shared credentials file {shared}",
        f"the config file {config}",
        "container and instance metadata",
    ]
    target = error.details.get("uri", "the bucket")
    return StorageError(
        f"no usable AWS credentials to stage source to {target}; checked: {', '.join(checked)}",
        remedy="export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE=<profile> "
        "(run `aws sso login` if the session expired), then rerun",
        details={**error.details, "checked": checked},
    )
