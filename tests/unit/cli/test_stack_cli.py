"""``npa stack …`` through the real typer app (cli.md §0, §6).

The engine is the real ``StackRunner`` over a ``ReplayPulumiCommand``, injected as
``Services.stack_engine`` in the root context (as an embedding caller would);
``PATH`` holds a stand-in ``pulumi`` so the
binary check passes, or not, as each test needs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.stack.runner import RunnerSettings, StackRunner
from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand, load_events
from npa_infra.workflow.target.services import Services
from tests.support.stackjournal import journal_run

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "pulumi"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: kind-npa-dev, context: {cluster: c, user: u, namespace: npa-dev}}]
"""
STACK = """config:
  npa-infra:context: kind-npa-dev
  npa-infra:namespace: npa-dev
  npa-infra:serviceAccount: npa-runner
"""
Invoke = Callable[..., Result]
Scripts = dict[str, Replay | list[Replay]]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    (root / "stacks" / "Pulumi.dev.yaml").write_text(STACK, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG, encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "passphrase"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    return root


@pytest.fixture
def given() -> list[Services]:
    """The services the next ``npa`` call runs with (the real ones until ``engine`` scripts one)."""
    return [Services()]


@pytest.fixture
def engine(given: list[Services]) -> Callable[[Scripts], list[ReplayPulumiCommand]]:
    def script(scripts: Scripts) -> list[ReplayPulumiCommand]:
        made: list[ReplayPulumiCommand] = []

        def factory(settings: RunnerSettings) -> StackRunner:
            command = ReplayPulumiCommand(scripts)
            made.append(command)
            return StackRunner(settings, command=command)

        given[0] = dataclasses.replace(given[0], stack_engine=factory)
        return made

    return script


@pytest.fixture
def npa(project: Path, given: list[Services]) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(app, ["stack", *map(str, args)], obj=given[0], catch_exceptions=False)

    return invoke


def events(name: str) -> Replay:
    return Replay(events=load_events(FIXTURES / f"{name}.jsonl"))


# -- no engine: exit 3, never a traceback ------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    ["preview", "up", "refresh", "destroy", "outputs"],
    ids=["preview", "up", "refresh", "destroy", "outputs"],
)
def test_no_pulumi_exit_3_install_hint(
    npa: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    result = npa(command, "--stack", "dev")

    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "Error: pulumi CLI not found"
    assert lines[1].startswith("Hint: install the Pulumi CLI: curl -fsSL https://get.pulumi.com")
    assert "https://www.pulumi.com/docs/iac/download-install/" in lines[1]


def test_no_pulumi_json_error_document(
    npa: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    result = npa("preview", "--json")

    assert result.exit_code == 3
    assert json.loads(result.stdout)["error"]["category"] == "engine_unavailable"


# -- preview --------------------------------------------------------------------------------------
def test_preview_json_schema_no_changes_exit_0(
    npa: Invoke, engine: Callable[[Scripts], object]
) -> None:
    engine({"preview": events("noop")})

    result = npa("preview", "--json", "--detailed-exitcode")

    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "npa.stack.preview.v1"
    assert (doc["project"], doc["stack"], doc["changes_present"]) == ("npa-infra", "dev", False)
    assert doc["backend_url"].startswith("file://") and doc["backend_url"].endswith("pulumi-state")
    assert doc["output_changes_counted"] is False


@pytest.mark.parametrize(
    ("flags", "code"),
    [([], 0), (["--detailed-exitcode"], 2), (["--expect-no-changes"], 2)],
    ids=["plain", "detailed", "expect-no-changes"],
)
def test_preview_changes_exit_code(
    npa: Invoke, engine: Callable[[Scripts], object], flags: list[str], code: int
) -> None:
    engine({"preview": events("update")})

    result = npa("preview", "--json", *flags)

    assert result.exit_code == code
    assert json.loads(result.stdout)["changes_present"] is True
    if "--expect-no-changes" in flags:
        assert "Error: stack dev has changes, and --expect-no-changes was given" in result.stderr
        assert "Hint: npa stack up --stack dev --yes" in result.stderr


def test_preview_markdown_body(npa: Invoke, engine: Callable[[Scripts], object]) -> None:
    engine({"preview": events("replace")})

    result = npa("preview", "--markdown")

    assert result.exit_code == 0
    assert result.stdout.startswith("<!-- npa-stack-preview npa-infra/dev -->\n")
    assert "| replace | `source` |" in result.stdout


def test_preview_text_lists_steps(npa: Invoke, engine: Callable[[Scripts], object]) -> None:
    engine({"preview": events("update")})

    result = npa("preview")

    assert result.exit_code == 0
    assert (
        "update    kubernetes:core/v1:Secret  pull-npa-dev-npa-nebius-registry  [stringData]"
        in result.stdout
    )
    assert result.stdout.rstrip().endswith("(0 create, 1 update, 0 replace, 0 delete, 8 same)")


def test_preview_json_and_markdown_usage_error(npa: Invoke) -> None:
    result = npa("preview", "--json", "--markdown")

    assert (result.exit_code, result.stdout) == (64, "")
    assert "exclude each other" in result.stderr


def test_preview_config_mistake_located_with_caret(npa: Invoke, project: Path) -> None:
    path = project / "stacks" / "Pulumi.dev.yaml"
    path.write_text(STACK + "  npa-infra:controllerCpus: zero\n", encoding="utf-8")

    result = npa("preview")

    assert result.exit_code == 1
    assert (
        f"{path}:5:29: npa-infra:controllerCpus: must be a positive integer, got 'zero'"
        in result.stderr
    )
    assert "     5 |   npa-infra:controllerCpus: zero\n       | " + " " * 28 + "^" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("Hint: ")


def test_preview_lock_error_message_and_hint(
    npa: Invoke, engine: Callable[[Scripts], object]
) -> None:
    engine(
        {"preview": Replay(code=255, stderr="error: the stack is currently locked by 1 lock(s).")}
    )

    result = npa("preview")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: another Pulumi operation holds stack dev's lock")
    assert "pulumi cancel --stack dev" in result.stderr
    assert "Traceback" not in result.stderr


def test_preview_missing_plugin_exit_3(npa: Invoke, engine: Callable[[Scripts], object]) -> None:
    text = (
        "error: no resource plugin 'pulumi-resource-kubernetes' found in the workspace "
        "at version v4.34.2 or on your $PATH"
    )
    engine({"preview": Replay(code=255, stderr=text)})

    result = npa("preview")

    assert result.exit_code == 3
    assert "Error: the Pulumi kubernetes provider plugin v4.34.2 is not installed" in result.stderr
    assert "pulumi plugin install resource kubernetes 4.34.2" in result.stderr


def test_preview_context_flag_mismatch_refused(npa: Invoke) -> None:
    result = npa("preview", "--context", "prod")

    assert result.exit_code == 1
    assert "--context prod is not stack dev's context (kind-npa-dev)" in result.stderr


# -- up / refresh / destroy / outputs ----------------------------------------------------------------
def test_up_without_yes_confirmation_required(
    npa: Invoke, engine: Callable[[Scripts], object]
) -> None:
    engine({"preview": events("create")})

    result = npa("up", "--stack", "dev", "--json")

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["status"] == "confirmation_required"
    assert doc["preview"]["change_summary"]["create"] == 9


def test_refresh_drift_expect_no_changes_exit_2(
    npa: Invoke, engine: Callable[[Scripts], object]
) -> None:
    engine({"refresh": events("drift")})

    result = npa("refresh", "--json", "--expect-no-changes")

    assert result.exit_code == 2
    assert json.loads(result.stdout)["steps"][0]["name"] == "sa-npa-dev"


def test_destroy_blocked_active_runs_json(
    npa: Invoke, engine: Callable[[Scripts], list[ReplayPulumiCommand]], tmp_path: Path
) -> None:
    made = engine({"destroy": events("delete")})
    journal_run(tmp_path / "home", "r-live", status="SUBMITTED")

    result = npa("destroy", "--stack", "dev", "--yes", "--json")

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["gate"]["verdict"]) == ("blocked_active_jobs", "blocked_active_jobs")
    assert doc["gate"]["active_runs"] == [{"run_id": "r-live", "status": "SUBMITTED"}]
    assert made[0].calls == []


def test_destroy_blocked_text_hint_cancel_runs(
    npa: Invoke, engine: Callable[[Scripts], object], tmp_path: Path
) -> None:
    engine({})
    journal_run(tmp_path / "home", "r-live", status="LAUNCHING")

    result = npa("destroy", "--stack", "dev", "--yes")

    assert result.exit_code == 1
    assert "active run: r-live (LAUNCHING)" in result.stderr
    assert result.stderr.rstrip().endswith(
        "Hint: npa stack destroy --stack dev --cancel-runs --yes"
    )


def test_outputs_json_secret_masked(npa: Invoke, engine: Callable[[Scripts], object]) -> None:
    values = {"controller_name": "sky-jobs-controller-x", "token": "[secret]"}
    plain = {**values, "token": "hunter2"}
    engine({"stack output": [Replay(stdout=json.dumps(values)), Replay(stdout=json.dumps(plain))]})

    result = npa("outputs", "--json")

    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["outputs"] == {"controller_name": "sky-jobs-controller-x", "token": "[secret]"}
    assert "hunter2" not in result.stdout + result.stderr
