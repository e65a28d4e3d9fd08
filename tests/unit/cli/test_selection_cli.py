"""``-s/--stack`` and ``-p/--project`` through the real typer app (issue 16).

A project entry (``projects.store.save``) binds an alias to a stack or a
context; with no entry, a stack of that name is the project; otherwise the
command refuses with ``Error:``, the known names and a ``Hint:`` (exit 1),
before anything is read or launched. Each case asserts the exit code, stdout
(JSON where promised) and stderr separately (style.md rule 18).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.journal.records import RunRow
from npa_infra.journal.store import Journal
from npa_infra.kube.base import KubeCluster
from npa_infra.projects import store
from npa_infra.projects.record import Project
from npa_infra.workflow.target.services import Services
from tests.support.fakecluster import FakeCluster, gpu_node

REPO = Path(__file__).resolve().parents[3]
LINEAR = REPO / "workflows" / "testing" / "linear-chain.yaml"
CANCEL_KEYS = {
    "status",
    "run_id",
    "outcome",
    "cancelled_job_ids",
    "already_terminal_job_ids",
    "absent_job_ids",
    "remaining_job_ids",
    "errors",
    "cluster_down",
    "receipt_path",
}
Invoke = Callable[..., Result]


def _stack_file(context: str) -> str:
    return f"config:\n  npa-infra:context: {context}\n  npa-infra:namespace: ns-{context}\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A project root with stacks dev and prod (cwd), and an empty npa home."""
    root = tmp_path / "root"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    (root / "stacks" / "Pulumi.dev.yaml").write_text(_stack_file("kind-dev"), encoding="utf-8")
    (root / "stacks" / "Pulumi.prod.yaml").write_text(_stack_file("kind-prod"), encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no pulumi, no sky: nothing live
    for name in ("NPA_TOOL_CATALOG", "NPA_REGISTRY", "NPA_SRC_S3_URI", "NPA_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return {"NPA_HOME": str(tmp_path / "npa-home")}


class Installed:
    """``Services.gpu_cluster``: a fake cluster, and the contexts it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, context: str, env: Mapping[str, str]) -> KubeCluster:
        self.asked.append(context)
        return FakeCluster(context, [gpu_node("gpu-a", {"nvidia.com/gpu.product": "H100"})])


@pytest.fixture
def cluster() -> Installed:
    return Installed()


@pytest.fixture
def npa(home: dict[str, str], cluster: Installed) -> Invoke:
    """The CLI with a fake GPU cluster; no test here reaches a registry or a probe pod."""
    runner = CliRunner()
    given = Services(gpu_cluster=cluster)

    def invoke(*args: object) -> Result:
        return runner.invoke(app, [*map(str, args)], obj=given, catch_exceptions=False)

    return invoke


def _run(home: dict[str, str], run_id: str, stack: str | None, tmp_state: Path) -> None:
    with Journal.open(Path(home["NPA_HOME"])) as journal:
        journal.create_run(
            RunRow(
                run_id=run_id,
                stack=stack,
                workflow="linear-chain",
                mode="one-shot",
                spec_path=str(LINEAR),
                fingerprint="f" * 16,
                resume_argv=["npa", "workbench", "workflow", "submit", "--resume-run", run_id],
                status="RUNNING",
                lifecycle_state="SUBMITTED",
                created_at=1.0,
                updated_at=1.0,
                data={"context": "kind-dev", "isolated_config_dir": str(tmp_state)},
            )
        )


WF = ("workbench", "workflow")


# -- cancel ----------------------------------------------------------------------------------------
def test_cancel_project_json_accepted_never_launched_no_op(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    _run(home, "r1", "dev", tmp_path / "state")

    result = npa(*WF, "cancel", "r1", "--project", "dev", "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == CANCEL_KEYS  # the shape of a cancel without --project
    assert (payload["run_id"], payload["outcome"]) == ("r1", "not_submitted")


def test_cancel_run_of_another_stack_unknown_run_untouched(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="team", stack="prod"), home)
    _run(home, "r1", "dev", tmp_path / "state")

    result = npa(*WF, "cancel", "r1", "-p", "team", "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert set(payload) == CANCEL_KEYS
    assert payload["outcome"] == "unknown_run"
    assert "project team (stack prod)" in payload["errors"][0]
    with Journal.open(Path(home["NPA_HOME"])) as journal:
        run = journal.get_run("r1")
    assert run is not None and "cancel_requested" not in run.data


# -- status ----------------------------------------------------------------------------------------
def test_status_all_project_bound_to_stack_lists_only_its_runs(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="team", stack="prod"), home)
    _run(home, "r-dev", "dev", tmp_path / "s1")
    _run(home, "r-prod", "prod", tmp_path / "s2")

    result = npa(*WF, "status", "--all", "--cached", "-p", "team", "--json")

    assert result.exit_code == 0, result.stderr  # the journal's status: no job to verify
    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "runs", "queue_state"}
    assert (payload["status"], payload["runs"][0]["status"]) == ("ok", "RUNNING")
    assert [r["run_id"] for r in payload["runs"]] == ["r-prod"]


def test_status_run_of_another_project_not_found(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="team", stack="prod"), home)
    _run(home, "r-dev", "dev", tmp_path / "s1")

    result = npa(*WF, "status", "r-dev", "--cached", "--project", "team", "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "NOT_FOUND"
    assert "not of project team (stack prod)" in payload["detail"]


def test_status_stack_with_run_id_scopes_the_run(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    _run(home, "r-dev", "dev", tmp_path / "s1")

    own = npa(*WF, "status", "r-dev", "--cached", "-s", "dev", "--json")
    other = npa(*WF, "status", "r-dev", "--cached", "--stack", "prod", "--json")

    assert json.loads(own.stdout)["status"] != "NOT_FOUND"
    assert (other.exit_code, json.loads(other.stdout)["status"]) == (1, "NOT_FOUND")


# -- submit --plan-only ------------------------------------------------------------------------
def _plan(npa: Invoke, tmp_path: Path, run_id: str, *selection: str) -> Result:
    return npa(
        *WF,
        "submit",
        LINEAR,
        "--plan-only",
        "--no-preflight-images",
        "--no-resolve-accelerators",
        "--run-id",
        run_id,
        "--render-dir",
        tmp_path / "out",
        *selection,
        "--json",
    )


def test_submit_plan_only_project_bound_to_stack_same_as_stack(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="team", stack="prod"), home)

    by_project = _plan(npa, tmp_path, "p-1", "-p", "team")
    by_stack = _plan(npa, tmp_path, "p-2", "-s", "prod")

    assert by_project.exit_code == 0, by_project.stderr
    assert by_stack.exit_code == 0, by_stack.stderr
    project_doc, stack_doc = json.loads(by_project.stdout), json.loads(by_stack.stdout)
    assert set(project_doc) == set(stack_doc)  # JSON shape unchanged
    assert project_doc["infrastructure"] == stack_doc["infrastructure"]
    assert project_doc["infrastructure"]["stack"] == "prod"
    assert project_doc["infrastructure"]["context"] == "kind-prod"


def test_submit_plan_only_context_project_supplies_infra(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="lab", context="kind-lab"), home)

    result = _plan(npa, tmp_path, "p-3", "--project", "lab")

    assert result.exit_code == 0, result.stderr
    infrastructure = json.loads(result.stdout)["infrastructure"]
    assert (infrastructure["infra"], infrastructure["stack"]) == ("k8s/kind-lab", None)


def test_submit_project_and_other_infra_refused_json(
    npa: Invoke, home: dict[str, str], tmp_path: Path
) -> None:
    store.save(Project(alias="lab", context="kind-lab"), home)

    result = _plan(npa, tmp_path, "p-4", "-p", "lab", "--infra", "k8s/kind-other")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert (payload["status"], payload["run_id"]) == ("FAILED", "p-4")
    assert payload["error"]["details"]["reason"] == "context_disagrees"
    assert not (tmp_path / "out").exists()  # refused before anything was rendered


# -- unknown projects: one clear error everywhere; -p is not a stack alias ---------------------------
@pytest.mark.parametrize(
    "argv",
    [
        (*WF, "submit", str(LINEAR), "--plan-only"),
        (*WF, "preflight-images", str(LINEAR)),
        (*WF, "status", "--all"),
        (*WF, "cancel", "r1"),
        (*WF, "gpus"),
        (*WF, "stage-src", "--bucket", "b"),
        ("skypilot", "verify"),
        ("stack", "preview"),
        ("stack", "destroy"),
    ],
    ids=[
        "submit",
        "preflight_images",
        "status",
        "cancel",
        "gpus",
        "stage_src",
        "verify",
        "stack_preview",
        "stack_destroy",
    ],
)
def test_unknown_project_error_lists_known_exit_1(
    npa: Invoke, home: dict[str, str], argv: tuple[str, ...]
) -> None:
    store.save(Project(alias="alpha", context="kind-a"), home)

    result = npa(*argv, "-p", "ghost")

    assert result.exit_code == 1, result.stderr
    assert result.stdout == ""
    assert "Error: no project ghost: neither a project entry nor a stack of that name" in (
        result.stderr
    )
    assert "(projects: alpha; stacks: dev, prod)" in result.stderr
    assert "Hint: " in result.stderr and "-s/--stack NAME" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreadable_project_entry_names_the_file(npa: Invoke, home: dict[str, str]) -> None:
    path = Path(home["NPA_HOME"]) / "projects" / "dev.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("alias: dev\npassword: hunter2\n", encoding="utf-8")

    result = npa(*WF, "status", "--all", "-p", "dev")  # never the stack dev instead

    assert result.exit_code == 1
    assert f"Error: project dev's entry {path} cannot be read" in result.stderr
    assert "hunter2" not in result.stderr
    assert f"Hint: fix or remove {path}" in result.stderr


# -- npa stack ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["up", "destroy"], ids=["up", "destroy"])
def test_stack_destructive_commands_have_no_default_stack(npa: Invoke, command: str) -> None:
    result = npa("stack", command, "--yes", "--json")

    assert result.exit_code == 64
    assert result.stdout == ""
    assert f"Error: `npa stack {command}` has no default stack" in result.stderr
    assert f"Hint: npa stack {command} --stack NAME" in result.stderr


def test_stack_command_context_project_binds_no_stack(npa: Invoke, home: dict[str, str]) -> None:
    store.save(Project(alias="lab", context="kind-lab"), home)

    result = npa("stack", "destroy", "-p", "lab")

    assert result.exit_code == 1
    assert "Error: project lab (context kind-lab) binds no stack" in result.stderr


def test_stack_command_project_reaches_the_engine(npa: Invoke, home: dict[str, str]) -> None:
    store.save(Project(alias="team", stack="prod"), home)

    result = npa("stack", "up", "-p", "team", "--json")

    assert result.exit_code == 3  # past the selection: only the missing engine stops it
    assert json.loads(result.stdout)["error"]["category"] == "engine_unavailable"


# -- gpus / verify: a context-bound project supplies the context ---------------------------------
def test_gpus_context_project_supplies_cluster(
    npa: Invoke, home: dict[str, str], cluster: Installed
) -> None:
    store.save(Project(alias="lab", context="kind-lab"), home)

    result = npa(*WF, "gpus", "-p", "lab", "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["context"] == "kind-lab"
    assert cluster.asked == ["kind-lab"]


def test_gpus_stack_backed_project_uses_stack_context(npa: Invoke, cluster: Installed) -> None:
    result = npa(*WF, "gpus", "-p", "prod", "--json")

    assert result.exit_code == 0, result.stderr
    assert cluster.asked == ["kind-prod"]


@pytest.mark.parametrize(
    "argv", [(*WF, "gpus", "--json"), ("skypilot", "verify", "--json")], ids=["gpus", "verify"]
)
def test_no_context_anywhere_usage_error_exit_64(npa: Invoke, argv: tuple[str, ...]) -> None:
    result = npa(*argv)

    assert result.exit_code == 64
    assert result.stdout == ""
    assert "Error: no context: --cluster was not given" in result.stderr


def test_help_documents_stack_and_project_once(npa: Invoke) -> None:
    result = npa(*WF, "cancel", "--help")

    assert result.exit_code == 0
    assert "-s, --stack NAME" in result.stdout
    assert "-p, --project ALIAS" in result.stdout


@pytest.mark.parametrize("context", [None, "ctx-a"], ids=["no-context", "context"])
def test_select_nothing_given_same_selection_as_the_resolver(
    tmp_path: Path, context: str | None
) -> None:
    """No --stack and no --project: rule 1, decided without loading the resolver (issue 19)."""
    from npa_infra.cli import selection as cli_selection
    from npa_infra.projects import selection

    expected = selection.select(stack=None, project=None, env={}, root=tmp_path, context=context)

    assert cli_selection.select(None, None, as_json=True, context=context) == expected
