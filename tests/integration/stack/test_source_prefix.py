"""``SourcePrefixProvider`` methods called directly against moto's S3 server (pulumi.md §5.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import ConfigError, RunStateError
from npa_infra.source import tree
from npa_infra.stack.providers import SourcePrefixProvider
from npa_infra.storage.s3 import BotoStore
from tests.support.motoserver import MotoS3
from tests.support.stackjournal import journal_run

BUCKET = "npa-dev-artifacts"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    (root / "run.sh").chmod(0o755)
    (root / ".env").write_text("TOKEN=never-staged\n", encoding="utf-8")
    return root


@pytest.fixture
def provider(s3_server: MotoS3, tmp_path: Path) -> SourcePrefixProvider:
    s3_server.create_bucket(BUCKET)
    env = {"NPA_HOME": str(tmp_path / "home")}
    return SourcePrefixProvider(store=lambda endpoint: BotoStore.create(endpoint), env=env)


def props(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "bucket": BUCKET,
        "prefix": "npa-src/npa",
        "fingerprint": tree.scan(root).fingerprint,
        "source_dir": str(root),
        "endpoint": "",
        "stack": "dev",
        "delete_objects": False,
        "__provider": "serialized",
        **extra,
    }


def keys(s3: MotoS3) -> list[str]:
    listing = s3.client.list_objects_v2(Bucket=BUCKET)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_create_stages_files_marker_last_uri_is_id(
    provider: SourcePrefixProvider, source: Path, s3_server: MotoS3
) -> None:
    inputs = props(source)

    result = provider.create(inputs)

    sha = inputs["fingerprint"]
    base = f"npa-src/npa/{sha}/"
    assert result.id == f"s3://{BUCKET}/{base}"
    assert keys(s3_server) == [base + ".npa-source.json", base + "pkg/__init__.py", base + "run.sh"]
    marker = json.loads(
        s3_server.client.get_object(Bucket=BUCKET, Key=base + ".npa-source.json")["Body"].read()
    )
    assert (marker["fingerprint"], marker["file_count"]) == (sha, 2)
    assert result.outs is not None
    assert (result.outs["uri"], result.outs["file_count"], result.outs["reused"]) == (
        result.id,
        2,
        False,
    )
    assert "__provider" not in result.outs  # the host adds it back; never ours to echo


def test_create_again_reuses_verified_prefix(provider: SourcePrefixProvider, source: Path) -> None:
    provider.create(props(source))

    again = provider.create(props(source))

    assert again.outs is not None and again.outs["reused"] is True


def test_create_refuses_tree_changed_since_program(
    provider: SourcePrefixProvider, source: Path, s3_server: MotoS3
) -> None:
    inputs = props(source)
    (source / "pkg" / "__init__.py").write_text("VALUE = 2\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="changed after the program read it"):
        provider.create(inputs)
    assert keys(s3_server) == []


def test_diff_fingerprint_replaces_create_before_delete(
    provider: SourcePrefixProvider, source: Path
) -> None:
    old = props(source)
    new = {**old, "fingerprint": "b" * 64}

    diff = provider.diff("id", old, new)

    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (
        True,
        ["fingerprint"],
        False,
    )


def test_diff_endpoint_is_update_and_keeps_uri(
    provider: SourcePrefixProvider, source: Path
) -> None:
    created = provider.create(props(source))
    assert created.outs is not None
    new = {**props(source), "endpoint": "http://minio:9000"}

    diff = provider.diff(created.id, created.outs, new)
    updated = provider.update(created.id, created.outs, new)

    assert (diff.changes, diff.replaces) == (True, [])
    assert updated.outs is not None and updated.outs["uri"] == created.id


def test_diff_same_inputs_no_change(provider: SourcePrefixProvider, source: Path) -> None:
    inputs = props(source)

    assert provider.diff("id", inputs, dict(inputs)).changes is False


def test_delete_retains_objects_by_default(
    provider: SourcePrefixProvider, source: Path, s3_server: MotoS3
) -> None:
    created = provider.create(props(source))
    assert created.outs is not None

    provider.delete(created.id, created.outs)

    assert len(keys(s3_server)) == 3


def test_delete_when_asked_removes_prefix_only(
    provider: SourcePrefixProvider, source: Path, s3_server: MotoS3
) -> None:
    s3_server.put(BUCKET, "npa-src/npa/other/keep.txt", b"keep")
    created = provider.create(props(source, delete_objects=True))
    assert created.outs is not None

    provider.delete(created.id, created.outs)

    assert keys(s3_server) == ["npa-src/npa/other/keep.txt"]


def test_delete_refused_while_active_run_of_stack(
    provider: SourcePrefixProvider, source: Path, s3_server: MotoS3, tmp_path: Path
) -> None:
    created = provider.create(props(source, delete_objects=True))
    assert created.outs is not None
    journal_run(tmp_path / "home", "r-live", status="SUBMITTED")

    with pytest.raises(RunStateError, match="r-live"):
        provider.delete(created.id, created.outs)
    assert len(keys(s3_server)) == 3


def test_delete_refused_when_other_stack_run_names_uri(
    provider: SourcePrefixProvider, source: Path, tmp_path: Path
) -> None:
    created = provider.create(props(source, delete_objects=True))
    assert created.outs is not None
    journal_run(tmp_path / "home", "r-prod", stack="prod", data={"src_s3_uri": created.id})
    journal_run(tmp_path / "home", "r-done", status="SUCCEEDED")

    with pytest.raises(RunStateError, match="r-prod"):
        provider.delete(created.id, created.outs)


def test_check_rejects_bad_bucket_and_missing_fingerprint(
    provider: SourcePrefixProvider, source: Path
) -> None:
    result = provider.check({}, props(source, bucket="Bad_Bucket", fingerprint=""))

    assert sorted(f.property for f in result.failures) == ["bucket", "fingerprint"]


def test_store_delete_prefix_never_whole_bucket(s3_server: MotoS3) -> None:
    from npa_infra.errors import StorageError
    from npa_infra.storage.models import S3Uri

    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "a/1", b"x")

    with pytest.raises(StorageError):
        BotoStore.create().delete_prefix(S3Uri(BUCKET, ""))
    assert BotoStore.create().delete_prefix(S3Uri(BUCKET, "a/")) == 1
    assert keys(s3_server) == []
