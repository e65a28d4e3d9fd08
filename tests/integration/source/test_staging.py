"""``stage_source`` against moto's S3 server through the real boto3 client (issue 7).

First stage, reuse in exactly one request, a changed file or exec bit moving
the prefix, sensitive files never leaving the machine, partial uploads and
foreign markers never reused, an interrupted upload restaged, and credentials
errors that say where boto3 looked without printing a value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import ConfigError, StorageError
from npa_infra.source import marker, staging, tree
from npa_infra.storage import errors as storage_errors
from npa_infra.storage.models import S3Uri, StorageErrorKind, Upload
from npa_infra.storage.s3 import BotoStore
from tests.integration.source.conftest import BUCKET
from tests.support.motoserver import MotoS3

PREFIX = "npa-src/npa"
SOURCE_KEYS = {"README.md", "bin/run.sh", "pkg/__init__.py", "pkg/mod.py"}


def keys_under(s3: MotoS3, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for page in s3.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found.update(entry["Key"] for entry in page.get("Contents") or ())
    return found


def get(s3: MotoS3, key: str) -> bytes:
    body: bytes = s3.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return body


def stage(root: Path, store: BotoStore, **kwargs: Any) -> staging.StageResult:
    return staging.stage_source(root, BUCKET, PREFIX, store=store, **kwargs)


def test_stage_first_time_uploads_every_source_file_then_marker(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    result = stage(checkout, store)

    fp = tree.scan(checkout).fingerprint
    base = f"{PREFIX}/{fp}/"
    assert result.uri == f"s3://{BUCKET}/{base}"
    assert (result.fingerprint, result.file_count, result.reused) == (fp, 4, False)
    assert result.uploaded == 4
    assert keys_under(s3_server) == {base + k for k in SOURCE_KEYS} | {base + ".npa-source.json"}
    assert get(s3_server, base + "pkg/mod.py") == b"VALUE = 1\n"
    listed = s3_server.client.list_objects_v2(Bucket=BUCKET, Prefix=base)["Contents"]
    etags = {e["Key"].removeprefix(base): [e["Size"], e["ETag"].strip('"')] for e in listed}
    assert json.loads(get(s3_server, base + ".npa-source.json")) == {
        "schema": "npa.source.v2",
        "fingerprint": fp,
        "file_count": 4,
        "total_bytes": result.total_bytes,
        "objects": {k: etags[k] for k in SOURCE_KEYS},
    }


def test_stage_sensitive_and_excluded_files_never_uploaded(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    stage(checkout, store)

    uploaded = {key.split("/", 3)[3] for key in keys_under(s3_server)}
    assert not uploaded & {".env", "tls/server.key", ".aws/credentials", "app.log"}
    everything = b"".join(get(s3_server, k) for k in keys_under(s3_server))
    assert b"do-not-upload" not in everything
    assert b"PRIVATE KEY" not in everything


def test_stage_unchanged_tree_reused_with_exactly_two_requests(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    first = stage(checkout, store)
    fresh = BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)

    again = stage(checkout, fresh)

    assert again.reused and again.uploaded == 0
    assert (again.uri, again.fingerprint) == (first.uri, first.fingerprint)
    assert fresh.request_count == 2  # the marker GET and one listing page, nothing else


@pytest.mark.parametrize("damage", ["deleted", "overwritten", "truncated"])
def test_stage_object_damaged_since_marker_not_reused_restaged(
    checkout: Path, store: BotoStore, s3_server: MotoS3, damage: str
) -> None:
    """Issue 24 item 9: the marker is no proof the objects are still there."""
    first = stage(checkout, store)
    key = f"{PREFIX}/{first.fingerprint}/pkg/mod.py"
    if damage == "deleted":
        s3_server.client.delete_object(Bucket=BUCKET, Key=key)
    else:
        s3_server.put(BUCKET, key, b"VALUE = 9\n" if damage == "overwritten" else b"V")
    verdict = staging.verify_prefix(first.uri, store)

    again = stage(checkout, store)

    assert verdict is not marker.MarkerVerdict.MATCH
    assert (again.reused, again.uploaded) == (False, 4)
    assert get(s3_server, key) == b"VALUE = 1\n"
    assert staging.verify_prefix(first.uri, store) is marker.MarkerVerdict.MATCH


def test_stage_legacy_marker_checked_by_count_and_bytes(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    """A prefix staged before the marker named its objects (``npa.source.v1``) is reused
    while the listing's count and bytes are the marker's, restaged once an object is gone."""
    first = stage(checkout, store)
    base = f"{PREFIX}/{first.fingerprint}/"
    legacy = {"schema": "npa.source.v1", "fingerprint": first.fingerprint, "file_count": 4,
              "total_bytes": first.total_bytes}  # fmt: skip
    s3_server.put(BUCKET, base + ".npa-source.json", json.dumps(legacy).encode())

    assert stage(checkout, store).reused
    s3_server.client.delete_object(Bucket=BUCKET, Key=base + "README.md")
    assert staging.verify_prefix(first.uri, store) is marker.MarkerVerdict.OBJECTS_MISSING
    assert not stage(checkout, store).reused


def test_stage_listing_unavailable_is_a_miss_never_a_reuse(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    stage(checkout, store)

    class Unlisting(InterruptingStore):
        calls = 0

        def list_objects(self, uri: S3Uri, *, max_objects: int = 1) -> Any:
            type(self).calls += 1
            if type(self).calls == 1:
                kind = StorageErrorKind.UNAVAILABLE.value
                raise StorageError("connection reset", details={"kind": kind})
            return self.real.list_objects(uri)

        def upload_files(self, uploads: Sequence[Upload], *, workers: int = 8) -> None:
            self.real.upload_files(uploads, workers=workers)

    again = stage(checkout, Unlisting(store, 0, KeyboardInterrupt()))  # type: ignore[arg-type]

    assert (again.reused, again.uploaded) == (False, 4)


def test_stage_force_uploads_even_when_marker_matches(checkout: Path, store: BotoStore) -> None:
    stage(checkout, store)

    forced = stage(checkout, store, force=True)

    assert (forced.reused, forced.uploaded) == (False, 4)


def test_stage_one_file_changed_new_prefix_old_untouched(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    first = stage(checkout, store)
    (checkout / "pkg" / "mod.py").write_text("VALUE = 2\n")

    second = stage(checkout, store)

    assert second.fingerprint != first.fingerprint and not second.reused
    base = f"{PREFIX}/{second.fingerprint}/"
    assert get(s3_server, base + "pkg/mod.py") == b"VALUE = 2\n"
    old = f"{PREFIX}/{first.fingerprint}/"
    assert get(s3_server, old + "pkg/mod.py") == b"VALUE = 1\n"
    assert old + ".npa-source.json" in keys_under(s3_server)


def test_stage_exec_bit_changed_new_fingerprint(checkout: Path, store: BotoStore) -> None:
    first = stage(checkout, store)
    (checkout / "pkg" / "mod.py").chmod(0o755)

    second = stage(checkout, store)

    assert second.fingerprint != first.fingerprint
    assert not second.reused


def test_stage_partial_upload_without_marker_not_reused(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    fp = tree.scan(checkout).fingerprint
    base = f"{PREFIX}/{fp}/"
    s3_server.put(BUCKET, base + "README.md", b"# checkout\n")  # a partial copy, no marker

    result = stage(checkout, store)

    assert (result.reused, result.uploaded) == (False, 4)
    assert base + ".npa-source.json" in keys_under(s3_server)


@pytest.mark.parametrize(
    "body",
    [
        marker.encode("b" * 64, 4, 1),
        b'{"schema": "npa.source.v0"}',
        b"garbage",
    ],
    ids=["wrong-fingerprint", "wrong-schema", "unreadable"],
)
def test_stage_foreign_marker_not_reused_and_replaced(
    checkout: Path, store: BotoStore, s3_server: MotoS3, body: bytes
) -> None:
    fp = tree.scan(checkout).fingerprint
    key = f"{PREFIX}/{fp}/.npa-source.json"
    s3_server.put(BUCKET, key, body)

    result = stage(checkout, store)

    assert not result.reused
    assert marker.check(get(s3_server, key), fp, file_count=4) is marker.MarkerVerdict.MATCH


class InterruptingStore:
    """The real store, but the upload stops after ``after`` files (Ctrl-C, a crash)."""

    def __init__(self, real: BotoStore, after: int, error: BaseException) -> None:
        self.real = real
        self.after = after
        self.error = error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def upload_files(self, uploads: Sequence[Upload], *, workers: int = 8) -> None:
        self.real.upload_files(list(uploads)[: self.after], workers=workers)
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        KeyboardInterrupt(),
        StorageError("connection reset", details={"kind": StorageErrorKind.UNAVAILABLE.value}),
    ],
    ids=["ctrl-c", "network"],
)
def test_stage_interrupted_upload_leaves_no_marker_then_restages(
    checkout: Path, store: BotoStore, s3_server: MotoS3, error: BaseException
) -> None:
    fp = tree.scan(checkout).fingerprint
    base = f"{PREFIX}/{fp}/"
    with pytest.raises(type(error)):
        stage(checkout, InterruptingStore(store, 2, error))  # type: ignore[arg-type]
    assert len(keys_under(s3_server, base)) == 2
    assert base + ".npa-source.json" not in keys_under(s3_server)

    result = stage(checkout, store)

    assert (result.reused, result.uploaded) == (False, 4)
    assert keys_under(s3_server, base) == {base + k for k in SOURCE_KEYS} | {
        base + ".npa-source.json"
    }


class MutatingStore(InterruptingStore):
    """Uploads everything, then edits a file, as an editor saving mid-staging would."""

    def upload_files(self, uploads: Sequence[Upload], *, workers: int = 8) -> None:
        self.real.upload_files(uploads, workers=workers)
        path = next(u.path for u in uploads if u.path.name == "mod.py")
        path.write_text("VALUE = 'edited meanwhile'\n")


def test_stage_file_changed_during_upload_refused_without_marker(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    with pytest.raises(ConfigError, match="changed while") as caught:
        stage(checkout, MutatingStore(store, 0, KeyboardInterrupt()))  # type: ignore[arg-type]

    assert caught.value.details["changed"] == ["pkg/mod.py"]
    assert not any(k.endswith(".npa-source.json") for k in keys_under(s3_server))


def test_stage_large_file_multipart_round_trips(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    blob = os.urandom(9 * 1024 * 1024 + 7)  # above the 8 MiB multipart threshold
    (checkout / "data.bin").write_bytes(blob)

    result = stage(checkout, store)

    assert get(s3_server, f"{PREFIX}/{result.fingerprint}/data.bin") == blob


def test_stage_many_files_in_parallel_all_present(
    tmp_path: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    root = tmp_path / "many"
    for i in range(300):
        folder = root / f"d{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"file {i}\n")

    result = stage(root, store)

    assert result.file_count == 300
    assert len(keys_under(s3_server, f"{PREFIX}/{result.fingerprint}/")) == 301


def test_stage_no_credentials_clear_error_names_what_was_checked(
    checkout: Path, s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_server.create_bucket(BUCKET)
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    no_creds = BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)

    with pytest.raises(StorageError) as caught:
        stage(checkout, no_creds)

    error = caught.value
    assert storage_errors.kind_of(error) is StorageErrorKind.CREDENTIALS
    assert "no usable AWS credentials" in error.message
    assert "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (unset)" in error.message
    assert "shared credentials file" in error.message
    assert "AWS_PROFILE" in error.remedy
    assert "testing" not in error.message  # never a value


def test_stage_credentials_message_never_prints_key_values(
    checkout: Path, s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_server.create_bucket(BUCKET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASECRETVALUE123")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")  # a partial pair: boto3 refuses it
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.delenv("AWS_SECURITY_TOKEN")
    partial = BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)

    with pytest.raises(StorageError) as caught:
        stage(checkout, partial)

    rendered = json.dumps([caught.value.message, caught.value.remedy, caught.value.details])
    assert storage_errors.kind_of(caught.value) is StorageErrorKind.CREDENTIALS
    assert "AKIASECRETVALUE123" not in rendered
    assert "(set)" in caught.value.message


def test_stage_missing_bucket_fails_clearly_not_as_a_miss(
    checkout: Path, s3_server: MotoS3
) -> None:
    store = BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)

    with pytest.raises(StorageError) as caught:
        stage(checkout, store)

    assert storage_errors.kind_of(caught.value) is StorageErrorKind.NO_SUCH_BUCKET
    assert store.request_count == 1  # failed at the marker GET, before any upload


def test_verify_prefix_complete_match_and_absent(
    checkout: Path, store: BotoStore, s3_server: MotoS3
) -> None:
    result = stage(checkout, store)

    assert staging.verify_prefix(result.uri, store) is marker.MarkerVerdict.MATCH
    assert staging.verify_prefix(result.uri.rstrip("/"), store) is marker.MarkerVerdict.MATCH
    other = f"s3://{BUCKET}/{PREFIX}/{'c' * 64}/"
    assert staging.verify_prefix(other, store) is marker.MarkerVerdict.ABSENT


def test_upload_files_key_less_uri_refused(store: BotoStore, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")

    with pytest.raises(StorageError) as caught:
        store.upload_files([Upload(tmp_path / "f", S3Uri(BUCKET, ""))])

    assert storage_errors.kind_of(caught.value) is StorageErrorKind.INVALID_URI


def test_upload_files_missing_local_file_config_error(store: BotoStore, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        store.upload_files([Upload(tmp_path / "absent", S3Uri(BUCKET, "k"))])


def test_upload_files_missing_bucket_translated(s3_server: MotoS3, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    store = BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)

    with pytest.raises(StorageError) as caught:
        store.upload_files([Upload(tmp_path / "f", S3Uri("absent-bucket", "k"))])

    assert storage_errors.kind_of(caught.value) is StorageErrorKind.NO_SUCH_BUCKET
    assert caught.value.details["operation"] == "upload"
