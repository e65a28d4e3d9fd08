"""Raw SkyPilot task YAML given to ``submit`` (cli.md §1.4, dsl.md §2.4).

``--var K=V`` substitutes ``${K}``; a placeholder without a value and keys
outside the SkyPilot 0.12.2 task and resources schemas are located issues.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from npa_infra.render.raw import is_workflow_spec, load_raw_task

TASK = textwrap.dedent(
    """\
    name: smoke
    resources:
      cloud: kubernetes
      cpus: 2+
    envs:
      MESSAGE: ${MESSAGE}
      BANNER: "raw task says: ${MESSAGE} from ${TEAM}"
    run: |
      echo "$BANNER"
    """
)


def test_load_raw_task_vars_substitute_every_placeholder() -> None:
    docs, issues = load_raw_task(TASK, "task.yaml", {"MESSAGE": "hello", "TEAM": "qa"})

    assert issues == []
    assert docs == [
        {
            "name": "smoke",
            "resources": {"cloud": "kubernetes", "cpus": "2+"},
            "envs": {"MESSAGE": "hello", "BANNER": "raw task says: hello from qa"},
            "run": 'echo "$BANNER"\n',
        }
    ]


def test_load_raw_task_extra_vars_ignored() -> None:
    docs, issues = load_raw_task(TASK, "task.yaml", {"MESSAGE": "m", "TEAM": "t", "UNUSED": "u"})

    assert issues == []
    assert docs[0]["envs"]["MESSAGE"] == "m"


def test_load_raw_task_missing_var_located_issue_per_occurrence() -> None:
    _docs, issues = load_raw_task(TASK, "task.yaml", {"TEAM": "qa"})

    assert [(i.line, i.column) for i in issues] == [(6, 12), (7, 27)]
    assert all("${MESSAGE}" in i.message for i in issues)
    assert all("--var MESSAGE=" in i.hint for i in issues)


def test_load_raw_task_two_missing_vars_each_named() -> None:
    _docs, issues = load_raw_task(TASK, "task.yaml", {})

    named = sorted({m for i in issues for m in ("MESSAGE", "TEAM") if "${" + m + "}" in i.message})
    assert named == ["MESSAGE", "TEAM"]
    assert all(i.line > 0 and i.column > 0 for i in issues)


def test_load_raw_task_placeholder_in_comment_not_required() -> None:
    text = "# pass --var TOKEN=... to fill ${TOKEN}\nname: a\nrun: echo hi\n"

    docs, issues = load_raw_task(text, "task.yaml", {})

    assert issues == []
    assert docs == [{"name": "a", "run": "echo hi"}]


@pytest.mark.parametrize(
    "value", ["hello # world", "key: value", 'it\'s "quoted"'], ids=["hash", "colon", "quotes"]
)
def test_load_raw_task_var_value_with_yaml_syntax_substituted_verbatim(value: str) -> None:
    text = "name: a\nenvs:\n  MESSAGE: ${MESSAGE}\nrun: echo\n"

    docs, issues = load_raw_task(text, "task.yaml", {"MESSAGE": value})

    assert issues == []
    assert docs[0]["envs"]["MESSAGE"] == value


def test_load_raw_task_task_env_referenced_in_run_not_a_missing_var() -> None:
    # SkyPilot exports envs to the run script; bash expands ${MODEL} at run time.
    text = "name: a\nenvs:\n  MODEL: llama\nrun: python train.py --model ${MODEL}\n"

    docs, issues = load_raw_task(text, "task.yaml", {})

    assert issues == []
    assert docs[0]["run"] == "python train.py --model ${MODEL}"


def test_load_raw_task_unknown_task_key_located_at_key() -> None:
    text = "name: a\nresources:\n  cpus: 2\nfile_mount: {}\nrun: echo\n"

    _docs, issues = load_raw_task(text, "task.yaml", {})

    assert [(i.path, i.line, i.column) for i in issues] == [("$.file_mount", 4, 1)]
    assert "unknown SkyPilot task key 'file_mount'" in issues[0].message


def test_load_raw_task_unknown_resources_key_located_at_key() -> None:
    text = "name: a\nresources:\n  cpus: 2\n  gpus: H100:1\nrun: echo\n"

    _docs, issues = load_raw_task(text, "task.yaml", {})

    assert [(i.path, i.line, i.column) for i in issues] == [("$.resources.gpus", 4, 3)]
    assert "unknown resources key 'gpus'" in issues[0].message


def test_load_raw_task_known_keys_no_issues() -> None:
    text = textwrap.dedent(
        """\
        name: a
        workdir: .
        num_nodes: 2
        resources:
          infra: k8s/ctx
          accelerators: H100:1
          image_id: docker:registry.example.com/img:1
          disk_size: 100
          use_spot: false
        envs: {A: "1"}
        secrets: {HF_TOKEN: null}
        config: {kubernetes: {provision_timeout: 60}}
        setup: pip install x
        run: python x.py
        """
    )

    docs, issues = load_raw_task(text, "task.yaml", {})

    assert issues == []
    assert docs[0]["num_nodes"] == 2


def test_load_raw_task_second_document_issue_located_at_file_line() -> None:
    text = textwrap.dedent(
        """\
        name: pipeline
        execution: serial
        ---
        name: first
        run: echo 1
        ---
        name: second
        resources:
          cpus: 2
          bogus: 1
        nonsense: 2
        run: echo 2
        """
    )

    _docs, issues = load_raw_task(text, "task.yaml", {})

    located = {i.message.split("'")[1]: (i.line, i.column) for i in issues}
    assert located == {"bogus": (10, 3), "nonsense": (11, 1)}


def test_load_raw_task_multi_document_pipeline_all_documents_returned() -> None:
    text = "name: pipeline\n---\nname: a\nrun: echo a\n---\nname: b\nrun: echo b\n"

    docs, issues = load_raw_task(text, "task.yaml", {})

    assert issues == []
    assert [d["name"] for d in docs] == ["pipeline", "a", "b"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "no SkyPilot task"),
        ("# only a comment\n", "no SkyPilot task|must be a mapping"),
        ("- a\n- b\n", "must be a mapping"),
        ("name: a\nresources: [cpus]\n", "resources must be a mapping"),
        ("name: [unclosed\n", "YAML"),
    ],
    ids=["empty", "comment-only", "list", "resources-list", "invalid-yaml"],
)
def test_load_raw_task_malformed_file_reports_issue_not_exception(text: str, fragment: str) -> None:
    _docs, issues = load_raw_task(text, "task.yaml", {})

    assert issues
    assert any(re.search(fragment, i.message) for i in issues)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\n", True),
        ("apiVersion: 'npa.workflow/v0.0.1-beta'\n", True),
        ("# apiVersion: npa.workflow/v0.0.1\nname: a\nrun: echo\n", False),
        ("name: a\nrun: echo\n", False),
    ],
    ids=["spec", "quoted-beta", "commented", "raw-task"],
)
def test_is_workflow_spec_api_version_line_detected(text: str, expected: bool) -> None:
    assert is_workflow_spec(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nstates: {}\n", True),
        ("apiVersion: v9\nstates:\n  a: {}\n", True),
        ("kind: Workflow\n", True),
        ("name: t\nrun: |\n  echo 'states: are fine inside a script'\n", False),
        ("name: a\n---\nname: b\nresources: {cloud: kubernetes}\n", False),
    ],
    ids=[
        "spec",
        "wrong-api-version-still-spec",
        "kind-only",
        "states-text-in-run",
        "multi-doc-task",
    ],
)
def test_is_workflow_spec_top_level_keys_decide(text: str, expected: bool) -> None:
    assert is_workflow_spec(text) is expected
