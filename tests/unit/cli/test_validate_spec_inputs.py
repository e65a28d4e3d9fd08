"""``validate-spec`` on hostile files and on keys written twice (issue 18).

A FIFO, a device or a directory is a located refusal with exit 1, never a hang
or a read without end; a key written twice is reported with every other
problem of the spec in the same run.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.cli.main import app
from npa_infra.errors import SpecError
from npa_infra.workflow.planning import loading
from npa_infra.workflow.target.services import Services

MINIMAL = Path(__file__).resolve().parents[3] / "workflows" / "testing" / "minimal.yaml"

TWICE = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata:
      name: twice
    states:
      start:
        run:
          shell: echo start
          shell: echo again
        next: nowhere
      finish:
        run: {shell: echo finish}
        terminal: true
      finish:
        run: {shell: echo finish}
        terminal: true
    """
)


@pytest.fixture(autouse=True)
def npa_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    monkeypatch.delenv("NPA_TOOL_CATALOG", raising=False)


def _validate(services: Services, path: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        app,
        ["workbench", "workflow", "validate-spec", str(path), *extra],
        obj=services,
        catch_exceptions=False,
    )


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"], ids=["fifo", "device", "dir"])
def test_validate_spec_non_regular_file_json_is_invalid_naming_what_it_is(
    cli_services: Services, tmp_path: Path, kind: str
) -> None:
    path = {"fifo": tmp_path / "pipe.yaml", "device": Path("/dev/zero"), "directory": tmp_path}[
        kind
    ]
    if kind == "fifo":
        os.mkfifo(path)
    what = {
        "fifo": "a FIFO (named pipe)",
        "device": "a character device",
        "directory": "a directory",
    }
    result = _validate(cli_services, path, "--json")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["status"] == "invalid"
    assert [e["message"] for e in body["errors"]] == [f"{path} is {what[kind]}, not a regular file"]


def test_validate_spec_fifo_text_names_the_file_and_a_remedy(
    cli_services: Services, tmp_path: Path
) -> None:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    result = _validate(cli_services, path)
    assert result.exit_code == 1
    assert f"{path} is a FIFO (named pipe), not a regular file" in result.stderr
    assert "hint: a workflow spec is a small file" in result.stderr


def test_validate_spec_duplicate_keys_reported_with_other_problems_in_one_run(
    cli_services: Services, tmp_path: Path
) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(TWICE, encoding="utf-8")
    result = _validate(cli_services, path, "--json")
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    located = {(e["path"], e["line"], e["column"]) for e in errors}
    assert ("$.states.start.run.shell", 9, 7) in located
    assert ("$.states.finish", 14, 3) in located
    assert any(e["path"] == "$.states.start.next" for e in errors)  # the unknown state, too


def test_load_validated_duplicate_key_in_otherwise_valid_spec_is_spec_error(
    tmp_path: Path,
) -> None:
    text = MINIMAL.read_text(encoding="utf-8").replace(
        "    terminal: true", "    terminal: true\n    terminal: true"
    )
    with pytest.raises(SpecError) as caught:
        loading.load_validated(tmp_path / "spec.yaml", BUILTIN, text=text)
    (issue,) = caught.value.issues
    assert issue.path == "$.states.report.terminal"
    assert issue.message.startswith("duplicate key 'terminal': already defined at line ")
