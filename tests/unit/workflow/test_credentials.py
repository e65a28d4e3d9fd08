"""--secret-env resolution: environment first, then the stack's credentials file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.errors import ConfigError, MissingSecretError
from npa_infra.workflow.target import credentials

CANARY = "canary-value-5b1e77"
REPO = Path(__file__).resolve().parents[3]
MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"


def _write_credentials(home: Path, stack: str, text: str, mode: int = 0o600) -> Path:
    path = credentials.credentials_path(home, stack)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_resolve_sources_environment_wins_over_stack(tmp_path: Path) -> None:
    _write_credentials(tmp_path, "dev", f"HF_TOKEN={CANARY}\n")
    sources = credentials.resolve_sources(
        ["HF_TOKEN"], {"HF_TOKEN": "x"}, npa_home=tmp_path, stack="dev"
    )
    assert sources == {"HF_TOKEN": "environment"}


def test_resolve_sources_stack_file_supplies_missing_name(tmp_path: Path) -> None:
    _write_credentials(tmp_path, "dev", f"# comment\nexport HF_TOKEN={CANARY}\nEMPTY=\n")
    sources = credentials.resolve_sources(["HF_TOKEN", "EMPTY"], {}, npa_home=tmp_path, stack="dev")
    assert sources == {"HF_TOKEN": "stack:dev", "EMPTY": None}


def test_require_missing_names_what_was_checked_without_values(tmp_path: Path) -> None:
    _write_credentials(tmp_path, "dev", f"OTHER={CANARY}\n")
    sources = credentials.resolve_sources(["NGC_API_KEY"], {}, npa_home=tmp_path, stack="dev")
    with pytest.raises(MissingSecretError) as caught:
        credentials.require(sources, npa_home=tmp_path, stack="dev")
    text = f"{caught.value.message} {caught.value.remedy} {caught.value.details}"
    assert "NGC_API_KEY" in text
    assert "process environment" in text and "dev.env" in text
    assert CANARY not in text


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604], ids=["world", "group", "other-read"])
def test_resolve_sources_readable_by_others_refused(tmp_path: Path, mode: int) -> None:
    _write_credentials(tmp_path, "dev", f"HF_TOKEN={CANARY}\n", mode)
    with pytest.raises(ConfigError, match="readable by other users") as caught:
        credentials.resolve_sources(["HF_TOKEN"], {}, npa_home=tmp_path, stack="dev")
    assert CANARY not in caught.value.message


def test_resolve_sources_symlink_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.env"
    target.write_text(f"HF_TOKEN={CANARY}\n")
    target.chmod(0o600)
    link = credentials.credentials_path(tmp_path, "dev")
    link.parent.mkdir(parents=True)
    os.symlink(target, link)
    with pytest.raises(ConfigError, match="not a regular file"):
        credentials.resolve_sources(["HF_TOKEN"], {}, npa_home=tmp_path, stack="dev")


def test_submit_plan_only_reports_stack_secret_without_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    _write_credentials(home, "dev", f"HF_TOKEN={CANARY}\n")
    monkeypatch.setenv("NPA_HOME", str(home))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(
        app,
        [
            "workbench",
            "workflow",
            "submit",
            str(MINIMAL),
            "--plan-only",
            "--stack",
            "dev",
            "--secret-env",
            "HF_TOKEN",
            "--render-dir",
            str(tmp_path / "out"),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["secret_env_hints"] == [
        {"name": "HF_TOKEN", "available": True, "source": "stack:dev"}
    ]
    assert CANARY not in result.output
    for rendered in (tmp_path / "out").rglob("*.yaml"):
        assert CANARY not in rendered.read_text()
