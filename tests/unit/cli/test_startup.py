"""Fast start-up (style.md rule 6): heavy SDKs load only inside the functions that use them.

Each case runs in a fresh interpreter, because this test process has long
since imported everything. The child runs the command, then reports its exit
code and which of the heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"
HEAVY = ("kubernetes", "boto3", "httpx", "pulumi", "pulumi.automation", "pydantic")

_CLI_CHILD = textwrap.dedent(
    """\
    import json, sys
    from npa_infra.cli.main import app
    report, heavy, args = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    try:
        app(args, prog_name="npa")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    with open(report, "w") as fh:
        json.dump({"code": code, "loaded": [m for m in heavy if m in sys.modules]}, fh)
    """
)

_SDK_CHILD = textwrap.dedent(
    """\
    import json, sys
    from pathlib import Path
    from npa_infra.workflow.planning import api
    report, heavy, spec = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    api.validate_spec(Path(spec), env={})
    api.plan_spec(Path(spec), with_waves=True, env={})
    with open(report, "w") as fh:
        json.dump({"code": 0, "loaded": [m for m in heavy if m in sys.modules]}, fh)
    """
)


def _run_child(
    script: str,
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    modules: tuple[str, ...] = HEAVY,
) -> dict[str, object]:
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [sys.executable, "-c", script, str(report), json.dumps(modules), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.is_file(), completed.stderr
    result: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    result["stdout"] = completed.stdout
    return result


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    if MINIMAL.is_file():
        return MINIMAL
    path = tmp_path / "minimal.yaml"
    path.write_text(
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: tiny}\n"
        "states:\n  only:\n    run: {shell: echo hi}\n    terminal: true\n",
        encoding="utf-8",
    )
    return path


def test_npa_help_fresh_interpreter_loads_no_heavy_module(tmp_path: Path) -> None:
    result = _run_child(_CLI_CHILD, tmp_path, "--help")

    assert result["code"] == 0
    assert "Usage" in str(result["stdout"])
    assert result["loaded"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["workbench", "--help"],
        ["workbench", "workflow", "--help"],
        ["workbench", "workflow", "submit", "--help"],
        ["workbench", "workflow", "stage-src", "--help"],
        ["skypilot", "--help"],
        ["skypilot", "bootstrap", "--help"],
        ["skypilot", "status", "--help"],
        ["workbench", "workflow", "gpus", "--help"],
        ["skypilot", "verify", "--help"],
        ["workbench", "workflow", "preflight-images", "--help"],
        ["stack", "--help"],
        ["stack", "preview", "--help"],
        ["stack", "destroy", "--help"],
    ],
    ids=[
        "workbench",
        "workflow",
        "submit",
        "stage-src",
        "skypilot",
        "skypilot-bootstrap",
        "skypilot-status",
        "workflow-gpus",
        "skypilot-verify",
        "workflow-preflight-images",
        "stack",
        "stack-preview",
        "stack-destroy",
    ],
)
def test_subcommand_help_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path, args: list[str]
) -> None:
    result = _run_child(_CLI_CHILD, tmp_path, *args)

    assert result["code"] == 0
    assert "Usage" in str(result["stdout"])
    assert result["loaded"] == []


def test_validate_spec_command_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path, spec_path: Path
) -> None:
    result = _run_child(
        _CLI_CHILD, tmp_path, "workbench", "workflow", "validate-spec", str(spec_path)
    )

    assert result["code"] == 0
    assert "valid:" in str(result["stdout"])
    assert result["loaded"] == []


def test_skypilot_status_bin_path_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path,
) -> None:
    result = _run_child(
        _CLI_CHILD, tmp_path, "skypilot", "status", "--bin-path", "--sky-bin", sys.executable
    )

    assert result["code"] == 0
    assert str(result["stdout"]).strip() == sys.executable
    assert result["loaded"] == []


def test_validate_and_plan_sdk_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path, spec_path: Path
) -> None:
    result = _run_child(_SDK_CHILD, tmp_path, str(spec_path))

    assert result["code"] == 0
    assert result["loaded"] == []


def test_stack_preview_without_engine_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path,
) -> None:
    """Exit 3 for a missing `pulumi` is decided before the pulumi SDK is imported."""
    script = _CLI_CHILD.replace(
        "import json, sys", "import json, os, sys; os.environ['PATH'] = '/nonexistent'"
    )
    result = _run_child(script, tmp_path, "stack", "preview")

    assert result["code"] == 3
    assert isinstance(result["loaded"], list)
    assert not {"pulumi", "pulumi.automation", "kubernetes", "boto3"} & set(result["loaded"])


SIM2REAL = REPO / "workflows" / "main" / "sim2real.yaml"
PLAN_ONLY = ["workbench", "workflow", "submit", str(SIM2REAL), "--plan-only"]


def _home_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NPA_HOME", "NPA_TOOL_CATALOG")}
    env["NPA_HOME"] = str(tmp_path / "home")
    return env


def test_submit_plan_only_demo_fresh_interpreter_loads_no_heavy_module(tmp_path: Path) -> None:
    """``make demo``: plan, render and record; pydantic and every client stay unloaded."""
    env = _home_env(tmp_path)
    args = [*PLAN_ONLY, "--no-preflight-images", "--run-id", "light-1"]

    result = _run_child(_CLI_CHILD, tmp_path, *args, env=env)

    assert result["code"] == 0
    assert "not submitted (--plan-only)" in str(result["stdout"])
    assert result["loaded"] == []


# What --plan-only of the demo never uses (issue 19): the run lock (and socket), the
# project resolver (no --stack/--project), the pull probe (--no-preflight-images), the
# checkout scanner, source marker and S3 URI model (every step has an image) and the
# checkpoint rules (no step declares one).
PLAN_ONLY_UNUSED = (
    "npa_infra.journal.lock",
    "socket",
    "npa_infra.projects.resolve",
    "npa_infra.projects.selection",
    "npa_infra.workflow.planning.pullcheck",
    "npa_infra.source.tree",
    "npa_infra.source.marker",
    "npa_infra.storage.models",
    "npa_infra.runs.checkpoints",
)


def test_submit_plan_only_demo_fresh_interpreter_loads_no_unused_module(tmp_path: Path) -> None:
    env = _home_env(tmp_path)
    args = [*PLAN_ONLY, "--no-preflight-images", "--run-id", "light-3"]

    result = _run_child(_CLI_CHILD, tmp_path, *args, env=env, modules=PLAN_ONLY_UNUSED)

    assert result["code"] == 0
    assert "not submitted (--plan-only)" in str(result["stdout"])
    assert result["loaded"] == []


def test_status_of_planned_run_fresh_interpreter_loads_no_heavy_module(tmp_path: Path) -> None:
    env = _home_env(tmp_path)
    planned = [*PLAN_ONLY, "--no-preflight-images", "--run-id", "light-2"]
    assert _run_child(_CLI_CHILD, tmp_path, *planned, env=env)["code"] == 0

    result = _run_child(_CLI_CHILD, tmp_path, "workbench", "workflow", "status", "light-2", env=env)

    assert result["code"] == 0
    assert "status: PLANNED" in str(result["stdout"])
    assert result["loaded"] == []
