"""``npa workbench workflow schema`` and ``catalog`` through the real typer app.

Each case asserts the exit code, parses stdout as JSON and reads stderr
separately (style.md rules 13, 18). The catalog is the embedded one, the
external ``tool-catalog.json`` (through ``NPA_TOOL_CATALOG`` and through
``--catalog``), or a broken file.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.cli.main import app

REPO = Path(__file__).resolve().parents[3]
EXTERNAL = REPO.parent / "shared" / "design" / "tool-catalog.json"
LINEAR = REPO / "workflows" / "testing" / "linear-chain.yaml"


@pytest.fixture
def npa(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("NPA_TOOL_CATALOG", raising=False)
    return CliRunner()


@pytest.fixture
def external(tmp_path: Path) -> Path:
    if EXTERNAL.is_file():
        return EXTERNAL
    # a stand-in with the reference file's shape when the shared notes are absent
    path = tmp_path / "tool-catalog.json"
    entries = [
        {"name": "workbench.example.run", "argv_template": ["npa", "x", "{{config.k}}"]},
        {"name": "workflow.example.gate", "argv_template": ["true"], "multi_node_mode": "sharded"},
    ]
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _external_names(path: Path) -> set[str]:
    return {e["name"] for e in json.loads(path.read_text(encoding="utf-8"))}


def test_schema_default_output_is_bare_schema_document(npa: CliRunner) -> None:
    result = npa.invoke(app, ["workbench", "workflow", "schema"], catch_exceptions=False)
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert "status" not in document
    jsonschema.Draft202012Validator.check_schema(document)
    spec = yaml.safe_load(LINEAR.read_text(encoding="utf-8"))
    assert list(jsonschema.Draft202012Validator(document).iter_errors(spec)) == []


def test_schema_json_wraps_document_with_status(npa: CliRunner) -> None:
    bare = npa.invoke(app, ["workbench", "workflow", "schema"], catch_exceptions=False)
    wrapped = npa.invoke(app, ["workbench", "workflow", "schema", "--json"], catch_exceptions=False)
    assert wrapped.exit_code == 0
    assert json.loads(wrapped.stdout) == {"status": "ok", "schema": json.loads(bare.stdout)}


def test_catalog_embedded_lists_builtin_tools(npa: CliRunner) -> None:
    result = npa.invoke(app, ["workbench", "workflow", "catalog", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["status"] == "ok"
    assert payload["catalog"] == {"source": "built-in", "path": None}
    assert [t["name"] for t in payload["tools"]] == BUILTIN.names()
    envgen = next(t for t in payload["tools"] if t["name"] == "workbench.isaac_lab.envgen")
    assert envgen["image"].startswith("npa-isaac-lab:")
    assert envgen["argv"][:3] == ["python3", "-m", "npa_tools.sim2real"]
    assert "shard_index" in envgen["config_keys"]
    assert envgen["origin"] == "built-in"


def test_catalog_embedded_text_names_source_and_tools(npa: CliRunner) -> None:
    result = npa.invoke(app, ["workbench", "workflow", "catalog"], catch_exceptions=False)
    assert result.exit_code == 0
    first, header, *rows = result.stdout.splitlines()
    assert first.startswith("catalog: built-in (")
    assert header.split() == ["TOOL", "IMAGE", "COMMAND"]
    assert len(rows) == len(BUILTIN.tools)
    assert result.stderr == ""


def test_catalog_env_external_lists_both_and_names_file(
    npa: CliRunner, external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_TOOL_CATALOG", str(external))
    result = npa.invoke(app, ["workbench", "workflow", "catalog", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["catalog"] == {"source": "NPA_TOOL_CATALOG", "path": str(external)}
    names = {t["name"] for t in payload["tools"]}
    assert names == set(BUILTIN.names()) | _external_names(external)
    origins = {t["origin"] for t in payload["tools"] if t["name"] not in BUILTIN.tools}
    assert origins == {str(external)}
    text = npa.invoke(app, ["workbench", "workflow", "catalog"], catch_exceptions=False)
    assert text.stdout.splitlines()[0].startswith(
        f"catalog: built-in + {external} (from NPA_TOOL_CATALOG"
    )


def test_catalog_flag_wins_over_env(
    npa: CliRunner, external: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_TOOL_CATALOG", str(tmp_path / "missing.json"))
    args = ["workbench", "workflow", "catalog", "--catalog", str(external), "--json"]
    result = npa.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["catalog"] == {"source": "--catalog", "path": str(external)}


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "not found"), ("{not json", "unreadable"), ('{"a": 1}', "must be a JSON list")],
    ids=["missing", "not-json", "not-a-list"],
)
def test_catalog_broken_file_fails_with_remedy(
    npa: CliRunner, tmp_path: Path, content: str | None, needle: str
) -> None:
    path = tmp_path / "catalog.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    args = ["workbench", "workflow", "catalog", "--catalog", str(path)]
    text = npa.invoke(app, args, catch_exceptions=False)
    assert text.exit_code == 1
    assert needle in text.stderr and "Hint:" in text.stderr
    assert text.stdout == ""
    as_json = npa.invoke(app, [*args, "--json"], catch_exceptions=False)
    assert as_json.exit_code == 1
    payload = json.loads(as_json.stdout)
    assert payload["status"] == "error" and needle in payload["error"]["message"]
