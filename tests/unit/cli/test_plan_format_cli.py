"""``plan-spec --format text|json|mermaid|dot`` (issue 18): drawings and the text plan."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.workflow.target.services import Services
from tests.support import graphparse

REPO = Path(__file__).resolve().parents[3]
SIM2REAL = REPO / "workflows" / "main" / "sim2real.yaml"
LOOP_DECISION = REPO / "workflows" / "testing" / "loop-decision.yaml"

Invoke = Callable[..., Result]


@pytest.fixture
def npa(cli_services: Services) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        argv = ["workbench", "workflow", "plan-spec", *map(str, args)]
        return runner.invoke(app, argv, obj=cli_services, catch_exceptions=False)

    return invoke


@pytest.mark.parametrize(
    ("fmt", "parse"),
    [("mermaid", graphparse.parse_mermaid), ("dot", graphparse.parse_dot)],
    ids=["mermaid", "dot"],
)
def test_plan_spec_format_drawing_has_every_state_on_stdout(
    npa: Invoke, fmt: str, parse: Callable[[str], graphparse.Parsed]
) -> None:
    result = npa(SIM2REAL, "--format", fmt)

    assert result.exit_code == 0, result.stderr
    parsed = parse(result.stdout)
    states = {lines[0] for node_id, lines in parsed.nodes.items() if node_id.startswith("s_")}
    assert {"check-trigger", "improvement-round", "score-lanes", "report"} <= states
    assert len(states) == 17
    assert "placeholder" in result.stderr  # warnings stay on stderr


def test_plan_spec_format_mermaid_with_waves_labels_waves(npa: Invoke) -> None:
    result = npa(SIM2REAL, "--format", "mermaid", "--waves")

    assert result.exit_code == 0, result.stderr
    nodes = graphparse.parse_mermaid(result.stdout).nodes
    assert nodes["s_augment"][-1] == "wave 01"


def test_plan_spec_json_with_drawing_wraps_graph_with_status(npa: Invoke) -> None:
    result = npa(LOOP_DECISION, "--format", "dot", "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "workflow", "format", "graph", "fingerprint", "warnings"}
    assert payload["warnings"] == []
    assert (payload["status"], payload["format"]) == ("planned", "dot")
    assert "s_route" in graphparse.parse_dot(payload["graph"]).nodes
    assert payload["fingerprint"].startswith("sha256:")


def test_plan_spec_format_json_same_as_json_flag(npa: Invoke) -> None:
    by_format = npa(LOOP_DECISION, "--format", "json")
    by_flag = npa(LOOP_DECISION, "--json")

    assert by_format.exit_code == by_flag.exit_code == 0
    assert json.loads(by_format.stdout) == json.loads(by_flag.stdout)
    assert json.loads(by_format.stdout)["status"] == "planned"


def test_plan_spec_format_unknown_is_usage_error_exit_64(npa: Invoke) -> None:
    result = npa(LOOP_DECISION, "--format", "svg")

    assert result.exit_code == 64
    assert "svg" in result.stderr
    assert result.stdout == ""


def test_plan_spec_text_steps_show_loop_iterations_and_commands(npa: Invoke) -> None:
    result = npa(LOOP_DECISION)

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].startswith(
        "01. evaluate  [loop rounds#1]  toolRef=workbench.isaac_lab.evaluate"
    )
    assert lines[6].startswith("05. evaluate  [loop rounds#3]  ")
    assert lines[8].startswith("07. route  argv: python3 -c 'import sys; print(sys.argv[1])' s3://")
    assert lines[9] == (
        '08. escalate  shell: echo "no round promoted; escalating run loop-decision-plan"'
    )
    assert not any("chars" in line for line in lines)


def test_plan_spec_text_waves_show_nested_loop_place(npa: Invoke) -> None:
    result = npa(SIM2REAL, "--waves")

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "07. [serial] rollouts: rollouts  [loop improvement-round#1/training-pass#2]" in lines
