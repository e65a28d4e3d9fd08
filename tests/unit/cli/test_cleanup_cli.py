"""``npa cleanup [--yes] [--json]`` through the real typer app: schema, exit codes, no secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app

CANARY = "canary-7f3e9b21-never-print-me"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "npa-home"
    credentials = home / "credentials"
    credentials.mkdir(parents=True)
    (credentials / "dev.env").write_text(
        f"# registry\nexport REGISTRY_PASSWORD={CANARY}\nAWS_SECRET_ACCESS_KEY='{CANARY}'\n",
        encoding="utf-8",
    )
    (credentials / "dev.env").chmod(0o600)
    rendered = home / "rendered" / "old-run"
    rendered.mkdir(parents=True)
    (rendered / "a.yaml").write_bytes(b"x" * 2048)
    return home


def _invoke(home: Path, *args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["cleanup", *args],
        env={"NPA_HOME": str(home), "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": ""},
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


def test_cleanup_cli_json_is_one_report_object_with_the_documented_keys(home: Path) -> None:
    code, stdout, _ = _invoke(home, "--json")
    payload = json.loads(stdout)
    assert code == 0
    assert set(payload) == {
        "status", "caches", "stacks", "projects", "credentials", "managed_jobs",
        "cluster_resources", "runbook", "errors",
    }  # fmt: skip
    assert payload["status"] == "report"
    [cache] = payload["caches"]
    assert set(cache) == {"kind", "path", "bytes", "needed_by", "removed", "reason", "detail"}
    assert (cache["kind"], cache["bytes"], cache["removed"]) == ("rendered_yaml", 2048, False)
    [cred] = payload["credentials"]
    assert cred["names"] == ["AWS_SECRET_ACCESS_KEY", "REGISTRY_PASSWORD"]
    assert payload["runbook"][-1] == "npa cleanup --yes"
    assert (home / "rendered" / "old-run" / "a.yaml").is_file()  # without --yes nothing changes


def test_cleanup_cli_yes_removes_the_cache_and_keeps_credentials(home: Path) -> None:
    code, stdout, _ = _invoke(home, "--yes", "--json")
    payload = json.loads(stdout)
    assert (code, payload["status"], payload["caches"][0]["removed"]) == (0, "cleaned", True)
    assert not (home / "rendered" / "old-run").exists()
    assert CANARY in (home / "credentials" / "dev.env").read_text(encoding="utf-8")


def test_cleanup_cli_text_shows_sizes_and_the_runbook(home: Path) -> None:
    code, stdout, _ = _invoke(home)
    assert code == 0
    assert "rendered_yaml" in stdout and "2.0 KiB, 2048 bytes" in stdout
    assert "credentials: dev" in stdout and "REGISTRY_PASSWORD" in stdout
    assert stdout.rstrip().endswith("npa cleanup --yes")


@pytest.mark.parametrize(
    "args",
    [(), ("--json",), ("--yes",), ("--yes", "--json")],
    ids=["text", "json", "yes", "yes-json"],
)
def test_cleanup_cli_credentials_value_never_in_any_output(
    home: Path, args: tuple[str, ...]
) -> None:
    code, stdout, stderr = _invoke(home, *args)
    assert code == 0
    assert CANARY not in stdout and CANARY not in stderr
