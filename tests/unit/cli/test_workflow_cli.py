"""``npa workbench workflow`` through the real typer app (cli.md §0, §1.1, §1.2, §1.4).

Every case asserts the exact exit code, parses stdout as JSON where the
command promises JSON, and reads stderr separately: data on stdout, messages
on stderr (style.md rules 9, 13, 18). Local state goes to a temporary
``NPA_HOME``; rendered YAML to a temporary ``--render-dir``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.workflow.target.services import Services

REPO = Path(__file__).resolve().parents[3]
TESTING = REPO / "workflows" / "testing"
MINIMAL = TESTING / "minimal.yaml"
LOOP_DECISION = TESTING / "loop-decision.yaml"
RUNTIME_MODE = TESTING / "runtime-mode.yaml"
PARALLEL_FANOUT = TESTING / "parallel-fanout.yaml"
RAW = TESTING / "raw-skypilot.yaml"
CANARY_NAME = "NPA_CANARY_SECRET"
CANARY_VALUE = "canary-7f3a9"

INVALID_SPEC = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata:
      name: broken
    states:
      start:
        run:
          shell: echo start
        next: nowhere
      finish:
        run:
          shell: echo finish
        terminal: true
    """
)
ISSUE_KEYS = {"path", "state", "line", "column", "message", "hint"}
STEP_KEYS = {
    "state",
    "iteration",
    "loop_label",
    "group",
    "argv",
    "shell",
    "tool_ref",
    "resources",
    "resources_profile",
    "inputs",
    "outputs",
}
PLAN_ONLY_KEYS = {
    "status",
    "lifecycle_state",
    "submission_state",
    "submission_receipt",
    "run_id",
    "workflow",
    "steps",
    "secret_env_hints",
    "source",
    "preflight",
    "infrastructure",
    "plan",
    "skypilot_yaml",
    "warnings",
}
_ISOLATED_ENV = (
    "NPA_TOOL_CATALOG",
    "NPA_SRC_S3_URI",
    "NPA_E2E_NPA_SRC_S3_URI",
    "NPA_WORKFLOW_GPU_ACCELERATOR",
    "NPA_WORKFLOW_GPU_MEMORY",
    "NPA_REGISTRY",
    "NPA_DEBUG",
    CANARY_NAME,
)


@pytest.fixture(autouse=True)
def npa_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "npa-home"
    home.mkdir()
    monkeypatch.setenv("NPA_HOME", str(home))
    for name in _ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def render_dir(tmp_path: Path) -> Path:
    return tmp_path / "rendered"


@pytest.fixture
def invalid_spec(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(INVALID_SPEC, encoding="utf-8")
    return path


Invoke = Callable[..., Result]


@pytest.fixture
def npa(cli_services: Services) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(
            app,
            ["workbench", "workflow", *map(str, args)],
            obj=cli_services,
            catch_exceptions=False,
        )

    return invoke


def stdout_json(result: Result) -> Any:
    return json.loads(result.stdout)


def assert_no_json_on_stdout(result: Result) -> None:
    text = result.stdout.strip()
    assert not text.startswith(("{", "[")), f"usage error printed JSON on stdout: {text[:200]}"


# -- validate-spec -------------------------------------------------------------------


def test_validate_spec_valid_spec_json_shape_exit_0(npa: Invoke) -> None:
    result = npa("validate-spec", LOOP_DECISION, "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert set(payload) - {"bucket_is_placeholder"} == {
        "warnings",
        "apiVersion",
        "initial",
        "name",
        "states",
        "status",
    }
    assert payload["status"] == "valid"
    assert payload["apiVersion"] == "npa.workflow/v0.0.1"
    assert payload["name"] == "loop-decision"
    assert payload["initial"] == "rounds"
    assert payload["states"] == ["decide", "escalate", "evaluate", "publish", "rounds", "route"]


def test_validate_spec_valid_spec_text_names_workflow_and_sorted_states(npa: Invoke) -> None:
    result = npa("validate-spec", LOOP_DECISION, "--var", "bucket=real-bucket")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "valid: loop-decision (npa.workflow/v0.0.1)",
        "states: decide, escalate, evaluate, publish, rounds, route",
    ]
    assert result.stderr == ""


def test_validate_spec_placeholder_bucket_json_flag_and_no_warning(npa: Invoke) -> None:
    result = npa("validate-spec", MINIMAL, "--json")

    assert result.exit_code == 0
    assert stdout_json(result)["bucket_is_placeholder"] is True
    assert "placeholder" not in result.stderr


def test_validate_spec_placeholder_bucket_text_warns_on_stderr(npa: Invoke) -> None:
    result = npa("validate-spec", MINIMAL)

    assert result.exit_code == 0
    assert "placeholder" in result.stderr
    assert "placeholder" not in result.stdout


def test_validate_spec_var_bucket_clears_placeholder_flag(npa: Invoke) -> None:
    result = npa("validate-spec", MINIMAL, "--var", "bucket=real-bucket", "--json")

    assert result.exit_code == 0
    assert stdout_json(result).get("bucket_is_placeholder", False) is False


def test_validate_spec_invalid_spec_json_every_error_located_exit_1(
    npa: Invoke, invalid_spec: Path
) -> None:
    result = npa("validate-spec", invalid_spec, "--json")

    assert result.exit_code == 1
    payload = stdout_json(result)
    assert set(payload) == {"status", "errors", "warnings"}
    assert payload["status"] == "invalid"
    assert all(set(e) == ISSUE_KEYS for e in payload["errors"])
    first = payload["errors"][0]
    assert (first["path"], first["state"], first["line"], first["column"]) == (
        "$.states.start.next",
        "start",
        9,
        11,
    )
    assert first["message"] == "unknown state 'nowhere'"
    assert first["hint"]
    assert any(
        e["path"] == "$.states.finish" and "unreachable" in e["message"] for e in payload["errors"]
    )


def test_validate_spec_invalid_spec_text_located_blocks_on_stderr_exit_1(
    npa: Invoke, invalid_spec: Path
) -> None:
    result = npa("validate-spec", invalid_spec)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{invalid_spec}:9:11: $.states.start.next: unknown state 'nowhere'" in result.stderr
    assert "    next: nowhere" in result.stderr
    assert "hint:" in result.stderr
    assert "Error:" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_spec_missing_file_error_exit_1(npa: Invoke, tmp_path: Path) -> None:
    result = npa("validate-spec", tmp_path / "absent.yaml")

    assert result.exit_code == 1
    assert "absent.yaml" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["directory", "fifo", "oversize"], ids=str)
def test_validate_spec_file_refusal_hint_names_a_regular_file(
    npa: Invoke, tmp_path: Path, kind: str
) -> None:
    import os

    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b"# " + b"x" * (8 * 1024 * 1024) + b"\n")

    result = npa("validate-spec", path)

    assert result.exit_code == 1
    assert "Hint: pass the path of a regular spec file" in result.stderr
    assert "fix the listed fields" not in result.stderr  # issue 18: a hint that fits


def test_submit_plan_only_fifo_refused_without_reading(npa: Invoke, tmp_path: Path) -> None:
    import os

    path = tmp_path / "spec.yaml"
    os.mkfifo(path)  # reading a FIFO with no writer would hang

    result = npa("submit", path, "--plan-only", "--json")

    assert result.exit_code == 1
    payload = stdout_json(result)
    assert payload["status"] == "invalid"
    assert "FIFO" in payload["errors"][0]["message"]


WARNED_SPEC = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata:
      name: warned
    config:
      bucket: real-bucket
    states:
      start:
        run:
          shell: echo start
        nxt: finish
        next: finish
      finish:
        run:
          shell: echo finish
        terminal: true
    """
)


@pytest.fixture
def warned_spec(tmp_path: Path) -> Path:
    path = tmp_path / "warned.yaml"
    path.write_text(WARNED_SPEC, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "extra",
    [
        ("plan-spec", "--json"),
        ("plan-spec", "--waves", "--json"),
        ("plan-spec", "--format", "mermaid", "--json"),
        ("submit", "--plan-only", "--json"),
    ],
    ids=["plan", "waves", "drawing", "submit-plan-only"],
)
def test_plan_json_unknown_key_listed_in_warnings(
    npa: Invoke, warned_spec: Path, render_dir: Path, extra: tuple[str, ...]
) -> None:
    command, *flags = extra
    more = ["--render-dir", render_dir] if command == "submit" else []

    result = npa(command, warned_spec, *flags, *more)

    assert result.exit_code == 0, result.stderr
    warnings = stdout_json(result)["warnings"]
    assert [(w["path"], w["line"]) for w in warnings] == [("$.states.start.nxt", 11)]
    assert all(set(w) == ISSUE_KEYS for w in warnings)
    assert "did you mean 'next'?" in warnings[0]["hint"]


@pytest.mark.parametrize("command", ["plan-spec", "submit"], ids=str)
def test_plan_text_unknown_key_warned_on_stderr(
    npa: Invoke, warned_spec: Path, render_dir: Path, command: str
) -> None:
    more = ["--plan-only", "--render-dir", render_dir] if command == "submit" else []

    result = npa(command, warned_spec, *more)

    assert result.exit_code == 0, result.stderr
    assert f"warning: {warned_spec}:11:5: $.states.start.nxt" in result.stderr
    assert "nxt" not in result.stdout


# -- plan-spec -----------------------------------------------------------------------


def test_plan_spec_json_shape_default_assumption_exit_0(npa: Invoke) -> None:
    result = npa("plan-spec", LOOP_DECISION, "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert {"workflow", "api_version", "initial", "assume_decision", "steps"} <= set(payload)
    assert payload["warnings"] == []  # issue 18: always present
    assert payload["workflow"] == "loop-decision"
    assert payload["api_version"] == "npa.workflow/v0.0.1"
    assert payload["initial"] == "rounds"
    assert payload["assume_decision"] == "loop_back_to_inner_loop"
    assert len(payload["steps"]) == 8
    assert all(set(s) == STEP_KEYS for s in payload["steps"])
    assert payload["steps"][-1]["state"] == "escalate"
    assert all(set(o) == {"uri", "schema"} for s in payload["steps"] for o in s["outputs"])


@pytest.mark.parametrize(
    ("flag", "normalised", "count", "last"),
    [
        ("promote", "promote_checkpoint", 4, "publish"),
        ("promote_checkpoint", "promote_checkpoint", 4, "publish"),
        ("loop_back", "loop_back_to_inner_loop", 8, "escalate"),
        ("loop_back_to_inner_loop", "loop_back_to_inner_loop", 8, "escalate"),
    ],
    ids=["promote", "promote_checkpoint", "loop_back", "loop_back_to_inner_loop"],
)
def test_plan_spec_assume_decision_normalised_and_routes_plan(
    npa: Invoke, flag: str, normalised: str, count: int, last: str
) -> None:
    result = npa("plan-spec", LOOP_DECISION, "--assume-decision", flag, "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert payload["assume_decision"] == normalised
    assert len(payload["steps"]) == count
    assert payload["steps"][-1]["state"] == last


def test_plan_spec_text_numbered_steps_with_tool_ref(npa: Invoke) -> None:
    result = npa("plan-spec", MINIMAL)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "workflow: minimal"
    assert lines[1].startswith("01. report  toolRef=workbench.rerun.report argv: python3 -m ")
    assert not any(line.startswith("assume_decision:") for line in lines)


def test_plan_spec_text_assume_decision_line_when_set(npa: Invoke) -> None:
    result = npa("plan-spec", LOOP_DECISION, "--assume-decision", "promote")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == ["workflow: loop-decision", "assume_decision: promote_checkpoint"]
    assert sum(1 for line in lines if line[:2].isdigit() and line[2:4] == ". ") == 4


def test_plan_spec_waves_json_shape(npa: Invoke) -> None:
    result = npa("plan-spec", PARALLEL_FANOUT, "--waves", "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert {
        "workflow",
        "run_id",
        "assume_decision",
        "wave_count",
        "parallel_waves",
        "waves",
        "warnings",
    } <= set(payload)
    assert payload["warnings"] == []
    assert payload["run_id"] == "parallel-fanout-plan"
    assert (payload["wave_count"], payload["parallel_waves"]) == (2, 1)
    fan, agg = payload["waves"]
    assert {"index", "kind", "group", "name", "max_concurrency", "batches", "steps"} <= set(fan)
    assert (fan["index"], fan["kind"], fan["group"], fan["name"]) == (
        0,
        "parallel",
        "envgen",
        "envgen",
    )
    assert (fan["max_concurrency"], fan["batches"]) == (2, 2)
    assert [s["state"] for s in fan["steps"]] == ["shard-0", "shard-1", "shard-2"]
    assert all(
        set(s) >= {"state", "iteration", "tool_ref", "resources", "outputs"} for s in fan["steps"]
    )
    assert all(isinstance(uri, str) for s in fan["steps"] for uri in s["outputs"])
    assert (agg["index"], agg["kind"], agg["name"]) == (1, "serial", "aggregate")


@pytest.mark.parametrize(
    ("cap", "batches"), [("0", 2), ("1", 3), ("3", 2)], ids=["none", "one", "above-group"]
)
def test_plan_spec_waves_max_concurrency_cap_sets_batches(
    npa: Invoke, cap: str, batches: int
) -> None:
    result = npa("plan-spec", PARALLEL_FANOUT, "--waves", "--max-concurrency", cap, "--json")

    assert result.exit_code == 0
    assert stdout_json(result)["waves"][0]["batches"] == batches


def test_plan_spec_waves_text_lines(npa: Invoke) -> None:
    result = npa("plan-spec", PARALLEL_FANOUT, "--waves")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "waves: 2" in lines
    assert "00. [parallel] envgen: shard-0, shard-1, shard-2 maxConcurrency=2 batches=2" in lines
    assert "01. [serial] aggregate: aggregate" in lines


def test_plan_spec_explicit_run_id_used(npa: Invoke) -> None:
    result = npa("plan-spec", PARALLEL_FANOUT, "--waves", "--run-id", "nightly.7", "--json")

    assert result.exit_code == 0
    assert stdout_json(result)["run_id"] == "nightly.7"


def test_plan_spec_invalid_spec_exit_1_json_errors(npa: Invoke, invalid_spec: Path) -> None:
    result = npa("plan-spec", invalid_spec, "--json")

    assert result.exit_code == 1
    assert stdout_json(result)["status"] == "invalid"


# -- usage errors ---------------------------------------------------------------------


USAGE_CASES = {
    "validate-var": (["validate-spec", MINIMAL, "--var", "bad"], "Invalid --var format"),
    "plan-var": (["plan-spec", MINIMAL, "--var", "bad"], "Invalid --var format"),
    "submit-var": (["submit", MINIMAL, "--plan-only", "--var", "bad"], "Invalid --var format"),
    "plan-assume": (["plan-spec", MINIMAL, "--assume-decision", "bogus"], "promote_checkpoint"),
    "submit-assume": (
        ["submit", MINIMAL, "--plan-only", "--assume-decision", "bogus"],
        "promote_checkpoint",
    ),
    "run-id-and-resume": (
        ["submit", MINIMAL, "--plan-only", "--run-id", "a", "--resume-run", "b"],
        "mutually exclusive",
    ),
    "plan-bad-run-id": (["plan-spec", MINIMAL, "--run-id", "bad id!"], "run id"),
    "submit-bad-run-id": (["submit", MINIMAL, "--plan-only", "--run-id", "bad/id"], "run id"),
    "secret-env-not-a-name": (
        ["submit", MINIMAL, "--plan-only", "--secret-env", "sk-live=abc"],
        "--secret-env",
    ),
    "image-override-format": (
        ["submit", MINIMAL, "--plan-only", "--image-override", "no-equals"],
        "--image-override",
    ),
    "output-format": (["submit", MINIMAL, "--plan-only", "--output-format", "xml"], "xml"),
}


@pytest.mark.parametrize(
    ("args", "fragment"), list(USAGE_CASES.values()), ids=list(USAGE_CASES.keys())
)
def test_workflow_cli_usage_error_exit_64_message_on_stderr(
    npa: Invoke, args: list[object], fragment: str, render_dir: Path
) -> None:
    result = npa(*args, "--render-dir", render_dir) if args[0] == "submit" else npa(*args)

    assert result.exit_code == 64
    assert fragment in result.stderr
    assert result.stdout.strip() == ""
    assert not render_dir.exists()


@pytest.mark.parametrize(
    "given",
    [f"A={CANARY_VALUE}", CANARY_VALUE, f"{CANARY_VALUE}=x", f"A B={CANARY_VALUE}"],
    ids=["name-equals-value", "bare-value", "value-before-equals", "spaced-name"],
)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_workflow_cli_secret_env_value_never_echoed_in_its_error(
    npa: Invoke, render_dir: Path, given: str, as_json: bool
) -> None:
    """Issue 24: ``--secret-env 'A=value'`` echoed the value in its usage error."""
    result = npa(
        "submit", MINIMAL, "--plan-only", "--render-dir", render_dir, "--secret-env", given,
        *(["--json"] if as_json else []),
    )  # fmt: skip
    assert result.exit_code == 64
    assert "--secret-env" in result.stderr and "never a value" in result.stderr
    assert CANARY_VALUE not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["validate-spec", MINIMAL, "--var", "bad", "--json"],
        ["plan-spec", MINIMAL, "--assume-decision", "bogus", "--json"],
        ["submit", MINIMAL, "--plan-only", "--run-id", "a", "--resume-run", "b", "--json"],
    ],
    ids=["validate-var", "plan-assume", "submit-run-id-and-resume"],
)
def test_workflow_cli_usage_error_with_json_prints_no_json_on_stdout(
    npa: Invoke, args: list[object]
) -> None:
    # cli.md §0: a usage error prints usage text and no JSON on stdout, so a
    # usage error (exit 2) is told apart from an exit-2 verdict by the output.
    result = npa(*args)

    assert result.exit_code == 64
    assert_no_json_on_stdout(result)


# -- submit --plan-only ----------------------------------------------------------------


def test_submit_plan_only_json_shape_status_planned(
    npa: Invoke, render_dir: Path, npa_home: Path
) -> None:
    result = npa(
        "submit",
        LOOP_DECISION,
        "--plan-only",
        "--run-id",
        "r-7",
        "--render-dir",
        render_dir,
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert set(payload) >= PLAN_ONLY_KEYS
    assert payload["status"] == "PLANNED"
    assert payload["lifecycle_state"] == "PLAN_ONLY"
    assert payload["submission_state"] == "NOT_SUBMITTED"
    assert payload["submission_receipt"] is None
    assert (payload["run_id"], payload["workflow"]) == ("r-7", "loop-decision")
    assert payload["steps"] == 8
    assert {"status", "uri"} <= set(payload["source"])
    assert {"decision", "checks"} <= set(payload["preflight"])
    assert isinstance(payload["preflight"]["checks"], list)
    assert payload["plan"]["assume_decision"] == "loop_back_to_inner_loop"
    assert len(payload["plan"]["steps"]) == 8
    assert len(payload["skypilot_yaml"]) == 1


def test_submit_plan_only_writes_parseable_yaml_only_under_render_dir(
    npa: Invoke, render_dir: Path, npa_home: Path
) -> None:
    result = npa(
        "submit",
        LOOP_DECISION,
        "--plan-only",
        "--run-id",
        "r-8",
        "--render-dir",
        render_dir,
        "--json",
    )

    assert result.exit_code == 0
    (entry,) = stdout_json(result)["skypilot_yaml"]
    path = Path(entry["path"])
    assert path.is_file()
    assert render_dir in path.parents
    documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    assert documents[0]["execution"] == "serial"
    assert len(documents) == 1 + 8 == 1 + entry["tasks"]
    # under the home only the journal, holding the run id as a plan (issue 17)
    journal_files = {"journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"}
    assert {p.name for p in npa_home.rglob("*")} <= journal_files


def test_submit_plan_only_runtime_mode_spec_one_job_per_wave(npa: Invoke, render_dir: Path) -> None:
    result = npa("submit", RUNTIME_MODE, "--plan-only", "--render-dir", render_dir, "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert payload["steps"] == 4
    assert [j["execution"] for j in payload["skypilot_yaml"]] == ["serial"] * 4
    assert [j["wave"] for j in payload["skypilot_yaml"]] == [0, 1, 2, 3]


def test_submit_plan_only_runtime_mode_spec_accepts_assume_decision_preview(
    npa: Invoke, render_dir: Path
) -> None:
    result = npa(
        "submit",
        RUNTIME_MODE,
        "--plan-only",
        "--assume-decision",
        "promote",
        "--render-dir",
        render_dir,
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert payload["plan"]["assume_decision"] == "promote_checkpoint"
    assert payload["plan"]["steps"][-1]["state"] == "accept"


def test_submit_plan_only_runtime_flag_parallel_batches(npa: Invoke, render_dir: Path) -> None:
    result = npa(
        "submit", PARALLEL_FANOUT, "--plan-only", "--runtime", "--render-dir", render_dir, "--json"
    )

    assert result.exit_code == 0, result.stderr
    jobs = stdout_json(result)["skypilot_yaml"]
    assert [(j["execution"], j["tasks"]) for j in jobs] == [
        ("parallel", 2),
        ("parallel", 1),
        ("serial", 1),
    ]


def test_submit_plan_only_output_format_json_alias_same_shape(
    npa: Invoke, render_dir: Path
) -> None:
    result = npa(
        "submit", MINIMAL, "--plan-only", "--render-dir", render_dir, "--output-format", "json"
    )

    assert result.exit_code == 0
    assert stdout_json(result)["status"] == "PLANNED"


def test_submit_plan_only_text_says_nothing_launched(npa: Invoke, render_dir: Path) -> None:
    result = npa("submit", MINIMAL, "--plan-only", "--run-id", "r-9", "--render-dir", render_dir)

    assert result.exit_code == 0
    assert "r-9" in result.stdout
    assert "not submitted" in result.stdout
    assert (render_dir / "r-9").is_dir()


def test_submit_plan_only_raw_skypilot_task_with_var_planned(npa: Invoke, render_dir: Path) -> None:
    result = npa(
        "submit", RAW, "--var", "MESSAGE=hello", "--plan-only", "--render-dir", render_dir, "--json"
    )

    assert result.exit_code == 0, result.stderr
    (entry,) = stdout_json(result)["skypilot_yaml"]
    (doc,) = yaml.safe_load_all(Path(entry["path"]).read_text(encoding="utf-8"))
    assert doc["envs"]["MESSAGE"] == "hello"


def test_submit_plan_only_raw_skypilot_task_missing_var_invalid_exit_1(
    npa: Invoke, render_dir: Path
) -> None:
    result = npa("submit", RAW, "--plan-only", "--render-dir", render_dir, "--json")

    assert result.exit_code == 1
    payload = stdout_json(result)
    assert payload["status"] == "invalid"
    assert payload["errors"]
    assert all("MESSAGE" in e["message"] and e["line"] > 0 for e in payload["errors"])


# -- submit that would execute ------------------------------------------------------------


def test_submit_runtime_mode_spec_with_assume_decision_executing_exit_64(npa: Invoke) -> None:
    result = npa("submit", RUNTIME_MODE, "--assume-decision", "loop_back")

    assert result.exit_code == 64
    assert "executionMode: runtime" in result.stderr
    assert "--plan-only" in result.stderr


def test_submit_one_shot_transitions_without_assumption_executing_exit_64(npa: Invoke) -> None:
    result = npa("submit", LOOP_DECISION)

    assert result.exit_code == 64
    assert "workflow 'loop-decision' has dynamic transitions" in result.stderr
    assert "--assume-decision" in result.stderr


@pytest.fixture
def one_context_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig with one context, ``only-ctx``; the npa home under tmp_path."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: only-ctx, context: {cluster: c, user: u}}]\n"
        "current-context: only-ctx\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    return path


@pytest.mark.parametrize(
    "args",
    [
        [MINIMAL],
        [LOOP_DECISION, "--assume-decision", "promote"],
        [LOOP_DECISION, "--runtime"],
        [RUNTIME_MODE],
    ],
    ids=["minimal", "assumed-decision", "runtime-flag", "runtime-mode-spec"],
)
def test_submit_live_without_exact_context_exit_64_no_ambient_fallback(
    npa: Invoke, args: list[object], render_dir: Path, one_context_kubeconfig: Path
) -> None:
    result = npa("submit", *args, "--render-dir", render_dir)

    assert result.exit_code == 64
    assert "Error:" in result.stderr
    assert "--infra k8s/<context>" in result.stderr
    assert "current context" in result.stderr
    assert result.stdout == ""
    assert not render_dir.exists()


def test_submit_live_unknown_context_json_failure_shape(
    npa: Invoke, one_context_kubeconfig: Path
) -> None:
    # cli.md §0: submit failures under --json print
    # {status, run_id, error: {category, message, remedy}, launch_transaction}.
    result = npa("submit", MINIMAL, "--run-id", "live-1", "--infra", "k8s/nope", "--json")

    assert result.exit_code == 1, result.stderr
    payload = stdout_json(result)
    assert {"status", "run_id", "error", "launch_transaction"} <= set(payload)
    assert {"category", "message", "remedy"} <= set(payload["error"])
    assert payload["run_id"] == "live-1"
    assert payload["launch_transaction"] is None
    assert "nope" in payload["error"]["message"]
    assert "only-ctx" in payload["error"]["message"] + payload["error"]["remedy"]


def test_submit_live_missing_secret_env_exit_1_names_it(npa: Invoke) -> None:
    result = npa(
        "submit", MINIMAL, "--secret-env", "NPA_TEST_ABSENT_TOKEN", "--infra", "k8s/only-ctx"
    )

    assert result.exit_code == 1
    assert "NPA_TEST_ABSENT_TOKEN" in result.stderr


def test_submit_plan_only_missing_secret_env_reported_not_available(
    npa: Invoke, render_dir: Path
) -> None:
    result = npa(
        "submit",
        MINIMAL,
        "--plan-only",
        "--secret-env",
        "NPA_TEST_ABSENT_TOKEN",
        "--render-dir",
        render_dir,
        "--json",
    )

    assert result.exit_code == 0
    hints = stdout_json(result)["secret_env_hints"]
    assert {k: hints[0][k] for k in ("name", "available")} == {
        "name": "NPA_TEST_ABSENT_TOKEN",
        "available": False,
    }


# -- secrets never leak ------------------------------------------------------------------


def _all_text_under(root: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file()
    )


@pytest.mark.parametrize(
    "extra",
    [["--plan-only", "--json"], ["--plan-only"], ["--json"], []],
    ids=["plan-only-json", "plan-only-text", "live-json", "live-text"],
)
def test_submit_canary_secret_value_never_in_output_or_files(
    npa: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    render_dir: Path,
    extra: list[str],
    one_context_kubeconfig: Path,
) -> None:
    monkeypatch.setenv(CANARY_NAME, CANARY_VALUE)

    result = npa(
        "submit",
        LOOP_DECISION,
        "--assume-decision",
        "promote",
        "--secret-env",
        CANARY_NAME,
        "--run-id",
        "canary-run",
        "--render-dir",
        render_dir,
        "--infra",
        "k8s/nope",
        *extra,
    )

    assert result.exit_code == (0 if "--plan-only" in extra else 1), result.stderr
    assert CANARY_VALUE not in result.stdout
    assert CANARY_VALUE not in result.stderr
    assert CANARY_VALUE not in _all_text_under(tmp_path)


def test_submit_plan_only_secret_env_declared_by_name_in_yaml(
    npa: Invoke, monkeypatch: pytest.MonkeyPatch, render_dir: Path
) -> None:
    monkeypatch.setenv(CANARY_NAME, CANARY_VALUE)

    result = npa(
        "submit",
        MINIMAL,
        "--plan-only",
        "--secret-env",
        CANARY_NAME,
        "--render-dir",
        render_dir,
        "--json",
    )

    assert result.exit_code == 0
    payload = stdout_json(result)
    assert payload["secret_env_hints"][0]["name"] == CANARY_NAME
    assert payload["secret_env_hints"][0]["available"] is True
    path = Path(payload["skypilot_yaml"][0]["path"])
    task = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))[1]
    assert task["secrets"][CANARY_NAME] == f"<{CANARY_NAME}>"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
