"""The README's drawing of the reference workflow is what ``plan-spec --format mermaid`` prints.

Regenerate it with ``npa workbench workflow plan-spec workflows/main/sim2real.yaml
--format mermaid`` when the spec or the drawing changes (issue 18).
"""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from npa_infra.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
_MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)


def test_readme_mermaid_block_equals_plan_spec_output() -> None:
    blocks = _MERMAID.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    argv = ["workbench", "workflow", "plan-spec", str(ROOT / "workflows/main/sim2real.yaml")]

    result = CliRunner().invoke(app, [*argv, "--format", "mermaid"], catch_exceptions=False)

    assert result.exit_code == 0, result.stderr
    assert len(blocks) == 1
    assert blocks[0] == result.stdout
