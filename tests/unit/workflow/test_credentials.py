"""--secret-env resolution: environment first, then the stack's credentials file."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
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


# -- the selected project's credentials (issue 17) -----------------------------------------------
def _project(
    home: Path, text: str, stack_names: frozenset[str] = frozenset()
) -> tuple[credentials.ProjectSecrets, list[list[str]]]:
    path = home / "credentials" / "projects" / "lab.env"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    asked: list[list[str]] = []

    def read(names: Sequence[str]) -> dict[str, str]:
        asked.append(list(names))
        return {n: f"{CANARY}-stack" for n in asked[-1]}

    secrets = credentials.ProjectSecrets(
        alias="lab", file=path, stack="dev", stack_names=stack_names, read_stack=read
    )
    return secrets, asked


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"A": "env"}, ("environment", "env")),
        ({}, ("project:lab", "project")),
    ],
    ids=["environment-first", "project-file-next"],
)
def test_resolve_project_file_after_environment_before_stack_file(
    tmp_path: Path, env: dict[str, str], expected: tuple[str, str]
) -> None:
    _write_credentials(tmp_path, "dev", "A=stackfile\nB=stackfile\n")
    project, asked = _project(tmp_path, "A=project\n")

    sources = credentials.resolve_sources(
        ["A", "B"], env, npa_home=tmp_path, stack="dev", project=project
    )
    values = credentials.resolve_values(
        ["A", "B"], env, npa_home=tmp_path, stack="dev", project=project
    )

    assert (sources["A"], values["A"]) == expected
    assert (sources["B"], values["B"]) == ("stack:dev", "stackfile")
    assert asked == []  # the engine is never asked for what another source supplies


def test_resolve_project_stack_secret_before_stack_file_engine_asked_once(tmp_path: Path) -> None:
    _write_credentials(tmp_path, "dev", "S=stackfile\n")
    project, asked = _project(tmp_path, "F=project\n", frozenset({"S", "T"}))

    sources = credentials.resolve_sources(
        ["F", "S", "T"], {}, npa_home=tmp_path, stack="dev", project=project
    )
    values = credentials.resolve_values(
        ["F", "S", "T"], {}, npa_home=tmp_path, stack="dev", project=project
    )

    assert sources == {"F": "project:lab", "S": "pulumi:dev", "T": "pulumi:dev"}
    assert values == {"F": "project", "S": f"{CANARY}-stack", "T": f"{CANARY}-stack"}
    assert asked == [["S", "T"]]


def test_require_missing_with_project_names_project_and_configure(tmp_path: Path) -> None:
    project, _ = _project(tmp_path, "")
    sources = credentials.resolve_sources(
        ["HF_TOKEN"], {}, npa_home=tmp_path, stack=None, project=project
    )

    with pytest.raises(MissingSecretError) as caught:
        credentials.require(sources, npa_home=tmp_path, stack=None, project=project)

    assert "project lab credentials" in caught.value.message
    assert "npa configure -p lab --credential HF_TOKEN" in (caught.value.remedy or "")


def test_project_credentials_readable_by_others_refused(tmp_path: Path) -> None:
    project, _ = _project(tmp_path, "A=x\n")
    project.file.chmod(0o640)

    with pytest.raises(ConfigError, match="readable by other users"):
        credentials.resolve_sources(["A"], {}, npa_home=tmp_path, stack=None, project=project)


@pytest.mark.parametrize(
    ("explicit", "env", "release", "expected"),
    [
        ("cli.example/x", {"NPA_REGISTRY": "env.example/y"}, "proj.example/z", "cli.example/x"),
        (None, {"NPA_REGISTRY": "env.example/y"}, "proj.example/z", "env.example/y"),
        (None, {}, "proj.example/z", "proj.example/z"),
        (None, {}, None, "ghcr.io/nebius/nebius-physical-ai"),
    ],
    ids=["flag", "env", "project", "default"],
)
def test_catalog_registry_project_release_namespace_after_env_before_default(
    explicit: str | None, env: dict[str, str], release: str | None, expected: str
) -> None:
    from npa_infra.workflow.planning import imagecheck

    assert imagecheck.catalog_registry(explicit, None, env, release) == expected
