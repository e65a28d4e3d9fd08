"""``npa workbench workflow stage-src`` end to end: the real typer app, boto3 and moto.

Exit codes and streams as cli.md §0 and §1.10 say: JSON ``{uri, fingerprint,
file_count, reused, total_bytes, uploaded}`` on stdout; text prints the URI and
an eval-able ``export NPA_SRC_S3_URI=…``; failures are ``Error:``/``Hint:`` on
stderr, never a traceback, never a secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra import config as npa_config
from npa_infra.cli.main import app
from npa_infra.source import tree
from tests.integration.source.conftest import BUCKET
from tests.support.motoserver import MotoS3

STAGE_KEYS = {"status", "uri", "fingerprint", "file_count", "reused", "total_bytes", "uploaded"}


@pytest.fixture(autouse=True)
def npa_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "npa-home"
    monkeypatch.setenv("NPA_HOME", str(home))
    monkeypatch.delenv("NPA_DEBUG", raising=False)
    return home


def npa(*args: object) -> Result:
    return CliRunner().invoke(
        app, ["workbench", "workflow", "stage-src", *map(str, args)], catch_exceptions=False
    )


def test_stage_src_json_then_reused(checkout: Path, s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)

    first = npa("--source", checkout, "--bucket", BUCKET, "--json")
    again = npa("--source", checkout, "--bucket", BUCKET, "--json")

    assert first.exit_code == 0, first.stderr
    payload = json.loads(first.stdout)
    assert set(payload) == STAGE_KEYS
    fp = tree.scan(checkout).fingerprint
    assert payload["uri"] == f"s3://{BUCKET}/npa-src/npa/{fp}/"
    assert (payload["fingerprint"], payload["file_count"], payload["reused"]) == (fp, 4, False)
    assert payload["status"] == "uploaded"
    assert again.exit_code == 0
    assert json.loads(again.stdout)["reused"] is True
    assert json.loads(again.stdout)["status"] == "reused"
    assert json.loads(again.stdout)["uploaded"] == 0


def test_stage_src_text_prints_uri_and_export_line_and_saves(
    checkout: Path, s3_server: MotoS3, npa_home: Path
) -> None:
    s3_server.create_bucket(BUCKET)

    result = npa("--source", checkout, "--bucket", BUCKET, "--prefix", "team/src")

    assert result.exit_code == 0, result.stderr
    fp = tree.scan(checkout).fingerprint
    uri = f"s3://{BUCKET}/team/src/{fp}/"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# uploaded 4 file(s)") and lines[0].endswith(uri)
    assert lines[1] == f"export NPA_SRC_S3_URI={uri}"
    assert npa_config.load_config({"NPA_HOME": str(npa_home)})["src_s3_uri"] == uri
    assert result.stderr == ""


def test_stage_src_saves_uri_for_the_stack(
    checkout: Path,
    s3_server: MotoS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    npa_home: Path,
) -> None:
    s3_server.create_bucket(BUCKET)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s1.yaml").write_text(
        f"config:\n  npa-infra:bucket: {BUCKET}\n  npa-infra:sourcePrefix: stacked\n"
    )
    monkeypatch.chdir(tmp_path)

    result = npa("--source", checkout, "--stack", "s1", "--json")

    assert result.exit_code == 0, result.stderr
    uri = json.loads(result.stdout)["uri"]
    assert uri.startswith(f"s3://{BUCKET}/stacked/")
    saved = npa_config.load_config({"NPA_HOME": str(npa_home)})
    assert saved["stacks"]["s1"]["src_s3_uri"] == uri


def test_stage_src_no_credentials_exit_1_error_and_hint_no_traceback(
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

    result = npa("--source", checkout, "--bucket", BUCKET)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: no usable AWS credentials to stage source to s3://")
    assert "checked: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (unset)" in result.stderr
    assert "Hint: export AWS_ACCESS_KEY_ID" in result.stderr
    assert "Traceback" not in result.stderr


def test_stage_src_no_credentials_json_error_document(
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

    result = npa("--source", checkout, "--bucket", BUCKET, "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "error"
    assert payload["error"]["category"] == "storage"
    assert payload["error"]["details"]["kind"] == "credentials"


def test_stage_src_missing_bucket_exit_1_names_bucket(checkout: Path, s3_server: MotoS3) -> None:
    result = npa("--source", checkout, "--bucket", "no-such-bucket")

    assert result.exit_code == 1
    assert "Error: bucket 'no-such-bucket' does not exist" in result.stderr
