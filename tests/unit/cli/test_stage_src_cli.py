"""``stage-src`` and the submit source flags: usage errors, without any S3 (cli.md §1.4, §1.10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app

BARE = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: bare}
config: {bucket: src-bucket}
resources:
  default: {cloud: kubernetes, cpus: 1}
states:
  train:
    run: {shell: echo train}
    terminal: true
"""


@pytest.fixture(autouse=True)
def npa_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "npa-home"
    monkeypatch.setenv("NPA_HOME", str(home))
    for name in ("NPA_SRC_S3_URI", "NPA_E2E_NPA_SRC_S3_URI", "NPA_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return home


def npa(*args: object) -> Result:
    return CliRunner().invoke(
        app, ["workbench", "workflow", *map(str, args)], catch_exceptions=False
    )


@pytest.fixture
def bare_spec(tmp_path: Path) -> Path:
    path = tmp_path / "bare.yaml"
    path.write_text(BARE, encoding="utf-8")
    return path


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    return root


def test_stage_src_no_bucket_usage_exit_64_no_json(checkout: Path) -> None:
    result = npa("stage-src", "--source", checkout, "--json")

    assert result.exit_code == 64
    assert result.stdout == ""
    assert "Error: no bucket to stage into" in result.stderr
    assert "Hint: pass --bucket BUCKET" in result.stderr


def test_stage_src_missing_source_dir_exit_1(tmp_path: Path) -> None:
    result = npa("stage-src", "--source", tmp_path / "absent", "--bucket", "b-1")

    assert result.exit_code == 1
    assert "is not a directory" in result.stderr


def test_submit_stage_src_with_image_usage_exit_64(bare_spec: Path, checkout: Path) -> None:
    result = npa(
        "submit",
        bare_spec,
        "--plan-only",
        "--no-preflight-images",
        "--stage-src",
        "--image",
        "registry.example.com/x:1",
        "--source",
        checkout,
        "--json",
    )

    assert result.exit_code == 64
    assert result.stdout == ""
    assert "--stage-src conflicts with --image" in result.stderr


def test_submit_plan_only_json_source_says_what_it_would_stage(
    bare_spec: Path, checkout: Path, tmp_path: Path
) -> None:
    result = npa(
        "submit",
        bare_spec,
        "--plan-only",
        "--no-preflight-images",
        "--source",
        checkout,
        "--render-dir",
        tmp_path / "r",
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    source = json.loads(result.stdout)["source"]
    assert source["status"] == "stage" and source["would_stage"] is True
    assert source["uri"] == f"s3://src-bucket/npa-src/npa/{source['fingerprint']}/"


def test_submit_no_stage_src_nothing_exported_exit_1(bare_spec: Path, checkout: Path) -> None:
    result = npa(
        "submit",
        bare_spec,
        "--plan-only",
        "--no-preflight-images",
        "--no-stage-src",
        "--source",
        checkout,
    )

    assert result.exit_code == 1
    assert "--no-stage-src forbids staging" in result.stderr
    assert "Hint: export NPA_SRC_S3_URI" in result.stderr


def test_submit_no_stage_src_exported_uri_kept(
    bare_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_SRC_S3_URI", "s3://team/src/custom")

    result = npa(
        "submit",
        bare_spec,
        "--plan-only",
        "--no-preflight-images",
        "--no-stage-src",
        "--render-dir",
        tmp_path / "r",
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    source = json.loads(result.stdout)["source"]
    assert (source["status"], source["uri"], source["origin"]) == (
        "keep",
        "s3://team/src/custom",
        "environment",
    )


def test_submit_plan_only_text_says_what_it_would_stage(
    bare_spec: Path, checkout: Path, tmp_path: Path
) -> None:
    result = npa(
        "submit",
        bare_spec,
        "--plan-only",
        "--no-preflight-images",
        "--source",
        checkout,
        "--render-dir",
        tmp_path / "r",
    )

    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("source:"))
    assert line.startswith(f"source: would stage {checkout} to s3://src-bucket/npa-src/npa/")
