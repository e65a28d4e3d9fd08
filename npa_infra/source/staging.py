"""Upload a checkout under its content address, marker last (runtime-reference.md §6).

``stage_source`` scans the tree (``tree.scan``), then:

1. unless forced, GETs ``<prefix>/<fingerprint>/.npa-source.json`` and, when
   it is a marker of this fingerprint and counts, lists the prefix: only when
   every object the marker names is there with its staged size and ETag
   (``marker.judge``) is the prefix reused. A marker never stands in for the
   objects: one deleted or overwritten since is a miss, and the tree is
   uploaded again. The GET and one listing page are the S3 requests of a reuse;
2. otherwise uploads every selected file to ``<prefix>/<fingerprint>/<path>``
   through ``ObjectStore.upload_files`` (8 workers, large files multipart);
3. re-checks that no file changed while it was read (size, mtime, exec bit),
   because the fingerprint must describe what was uploaded;
4. lists the prefix: every uploaded object must be there with its file's size;
   their ETags go into the marker;
5. writes the marker, last, and reads it back: only a marker that reads back
   equal completes the staging.

An interrupted or failed upload leaves no marker, so the next staging
uploads again; a marker read or listing that fails for any reason but
credentials or configuration is a cache miss, never an error (§6 "Any
failure is a cache miss"). Credentials errors name what boto3 looked at and
how to fix it, never a value.
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
    if not force and _reuse_verdict(store, base, source, environ) is marker.MarkerVerdict.MATCH:
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
    body = marker.encode(
        source.fingerprint, source.file_count, source.total_bytes, _landed(store, base, source)
    )
    try:
        store.write_bytes(marker_uri, body, content_type="application/json")
    except StorageError as exc:
        explained = _credentials_error(exc, environ)
        if explained is None:
            raise
        raise explained from exc
    if _read_marker(store, marker_uri, environ) != body:
        raise StorageError(
            f"the source marker {marker_uri} did not read back after the upload",
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
    """Whether the prefix ``uri`` (ending in a fingerprint) holds a complete staging of it:
    its marker, and every object the marker names, as a listing taken now shows them.

    Raises:
        StorageError: ``uri`` is not ``s3://bucket/key``, or the marker read or the
            listing failed for credentials, configuration or a missing bucket.
    """
    parsed = S3Uri.parse(uri)
    base = S3Uri(bucket=parsed.bucket, key=parsed.key.rstrip("/") + "/")
    environ = os.environ if env is None else env
    expected = decision.uri_fingerprint(uri)
    data = _read_marker(store, S3Uri(bucket=base.bucket, key=marker.marker_key(base.key)), environ)
    verdict = marker.check(data, expected)
    if verdict is not marker.MarkerVerdict.MATCH:
        return verdict  # no listing for a prefix whose marker already says no
    return marker.judge(data, expected, _listed(store, base, environ))


def _prefix_key(bucket: str, prefix: str, fingerprint: str) -> str:
    return decision.prefix_uri(bucket, prefix, fingerprint).removeprefix(f"s3://{bucket}/")


def _reuse_verdict(
    store: ObjectStore, base: S3Uri, source: tree.SourceTree, env: Mapping[str, str]
) -> marker.MarkerVerdict:
    """The marker of ``base``, then (only if it matches) the objects it names."""
    data = _read_marker(store, S3Uri(bucket=base.bucket, key=marker.marker_key(base.key)), env)
    counts = {"file_count": source.file_count, "total_bytes": source.total_bytes}
    verdict = marker.check(data, source.fingerprint, **counts)
    if verdict is not marker.MarkerVerdict.MATCH:
        return verdict
    return marker.judge(data, source.fingerprint, _listed(store, base, env), **counts)


def _listed(
    store: ObjectStore, base: S3Uri, env: Mapping[str, str]
) -> dict[str, tuple[int, str]] | None:
    """Key under ``base`` -> (size, ETag), the marker excluded; None for a failure an
    upload could cure (a cache miss)."""
    try:
        objects = store.list_objects(base)
    except StorageError as exc:
        if storage_errors.kind_of(exc) not in _FATAL_KINDS:
            return None
        explained = _credentials_error(exc, env)
        if explained is None:
            raise
        raise explained from exc
    listed = {o.key.removeprefix(base.key): (o.size, o.etag) for o in objects}
    listed.pop(marker.MARKER_NAME, None)
    return listed


def _landed(store: ObjectStore, base: S3Uri, source: tree.SourceTree) -> list[tuple[str, int, str]]:
    """Each uploaded file's (key, size, ETag) as the store lists it now.

    Raises:
        StorageError: the listing failed, or a file is missing or of another size.
    """
    listed = {o.key.removeprefix(base.key): o for o in store.list_objects(base)}
    wrong = [f.path for f in source.files if f.path not in listed or listed[f.path].size != f.size]
    if wrong:
        raise StorageError(
            f"{len(wrong)} uploaded object(s) under {base} are missing or of another size "
            f"(first: {wrong[0]}); the marker was not written, so nothing will reuse them",
            remedy="rerun; if it persists, check that the endpoint is a consistent S3 store",
            details={"kind": StorageErrorKind.UNKNOWN.value, "uri": str(base)},
        )
    return [(f.path, f.size, listed[f.path].etag) for f in source.files]


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
