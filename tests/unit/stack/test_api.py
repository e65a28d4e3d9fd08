"""The stack SDK: engine check, config, context, backend, passphrase, and the teardown order.

The engine is the real ``StackRunner`` over a ``ReplayPulumiCommand``; ``PATH``
holds a stand-in ``pulumi`` only so the binary check passes (it is never run).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import ConfigError, EngineUnavailableError, KubeError, StackConfigError
from npa_infra.stack import api
from npa_infra.stack.models import DestroyStatus, UpStatus
from npa_infra.stack.runner import RunnerSettings, StackRunner
from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand, load_events
from npa_infra.workflow.operations import teardown
from npa_infra.workflow.target import stackfile
from tests.support.stackjournal import journal_run

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "pulumi"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts:
  - {name: kind-npa-dev, context: {cluster: c, user: u, namespace: npa-dev}}
  - {name: other, context: {cluster: c, user: u}}
current-context: other
"""
STACK = """config:
  npa-infra:context: kind-npa-dev
  npa-infra:namespace: npa-dev
  npa-infra:serviceAccount: npa-runner
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    (root / "stacks" / "Pulumi.dev.yaml").write_text(STACK, encoding="utf-8")
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "pulumi"
    stand_in.write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    stand_in.chmod(0o755)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG, encoding="utf-8")
    return {
        "PATH": str(bin_dir),
        "NPA_HOME": str(tmp_path / "home"),
        "KUBECONFIG": str(kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "passphrase"),
    }


def replaying(
    scripts: dict[str, Replay | list[Replay]], sink: list[ReplayPulumiCommand]
) -> Callable[[RunnerSettings], StackRunner]:
    def factory(settings: RunnerSettings) -> StackRunner:
        command = ReplayPulumiCommand(scripts)
        sink.append(command)
        return StackRunner(settings, command=command)

    return factory


def request(project: Path, **extra: Any) -> api.StackRequest:
    return api.StackRequest(stack="dev", project_root=project, **extra)


def _history(changes: dict[str, int]) -> Replay:
    entry = {
        "kind": "update",
        "startTime": "2026-01-01T00:00:00.000000Z",
        "message": "",
        "environment": {},
        "config": {},
        "result": "succeeded",
        "resourceChanges": changes,
    }
    return Replay(stdout=json.dumps([entry]))


# -- the engine first ---------------------------------------------------------------------------
def test_no_pulumi_binary_exit_3_before_reading_config(project: Path, env: dict[str, str]) -> None:
    (project / "stacks" / "Pulumi.dev.yaml").write_text("config: [broken\n", encoding="utf-8")

    with pytest.raises(EngineUnavailableError) as caught:
        api.preview(request(project), env={**env, "PATH": "/nonexistent"})

    assert (caught.value.message, caught.value.exit_code) == ("pulumi CLI not found", 3)
    assert "https://www.pulumi.com/docs/iac/download-install/" in caught.value.remedy
    assert "get.pulumi.com" in caught.value.remedy


# -- settings: backend, home, passphrase, context ---------------------------------------------
def test_settings_default_file_backend_under_npa_home(project: Path, env: dict[str, str]) -> None:
    settings = api.settings_for(request(project), env)

    state = Path(env["NPA_HOME"]) / "pulumi-state"
    assert settings.backend_url == f"file://{state}"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert settings.pulumi_home == Path(env["NPA_HOME"]) / "pulumi-home"
    assert settings.env_vars["PULUMI_BACKEND_URL"] == settings.backend_url
    assert (
        settings.env_vars["PULUMI_CONFIG_PASSPHRASE_FILE"] == env["PULUMI_CONFIG_PASSPHRASE_FILE"]
    )
    assert settings.project_root == project


def test_settings_backend_env_then_flag(project: Path, env: dict[str, str]) -> None:
    from_env = api.settings_for(request(project), {**env, "PULUMI_BACKEND_URL": "s3://team-state"})
    from_flag = api.settings_for(
        request(project, backend_url="file:///flag"), {**env, "PULUMI_BACKEND_URL": "s3://x"}
    )

    assert (from_env.backend_url, from_flag.backend_url) == ("s3://team-state", "file:///flag")
    assert not (Path(env["NPA_HOME"]) / "pulumi-state").exists()


def test_settings_no_passphrase_refused_with_remedy(project: Path, env: dict[str, str]) -> None:
    del env["PULUMI_CONFIG_PASSPHRASE_FILE"]

    with pytest.raises(ConfigError, match="no passphrase") as caught:
        api.settings_for(request(project), env)

    assert "PULUMI_CONFIG_PASSPHRASE_FILE" in caught.value.remedy


def test_settings_npa_home_passphrase_file_private_only(project: Path, env: dict[str, str]) -> None:
    del env["PULUMI_CONFIG_PASSPHRASE_FILE"]
    secret = Path(env["NPA_HOME"]) / "pulumi-passphrase"
    secret.parent.mkdir(parents=True)
    secret.write_text("pass", encoding="utf-8")
    secret.chmod(0o644)

    with pytest.raises(ConfigError, match="readable by other users"):
        api.settings_for(request(project), env)
    secret.chmod(0o600)
    assert api.settings_for(request(project), env).env_vars["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(
        secret
    )


def test_settings_passphrase_value_never_in_argv_fields(project: Path, env: dict[str, str]) -> None:
    del env["PULUMI_CONFIG_PASSPHRASE_FILE"]

    settings = api.settings_for(request(project), {**env, "PULUMI_CONFIG_PASSPHRASE": "hunter2"})

    assert settings.env_vars["PULUMI_CONFIG_PASSPHRASE"] == "hunter2"  # env only (not os.environ's)
    assert "hunter2" not in repr(settings.program) + str(settings.project_root)


def test_settings_other_secrets_provider_needs_no_passphrase(
    project: Path, env: dict[str, str]
) -> None:
    del env["PULUMI_CONFIG_PASSPHRASE_FILE"]
    path = project / "stacks" / "Pulumi.dev.yaml"
    path.write_text("secretsprovider: awskms://alias/npa\n" + STACK, encoding="utf-8")

    settings = api.settings_for(request(project), env)

    assert "PULUMI_CONFIG_PASSPHRASE_FILE" not in settings.env_vars


def test_settings_context_flag_must_match(project: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="--context other is not stack dev's context"):
        api.settings_for(request(project, context="other"), env)


def test_settings_context_namespace_must_match(project: Path, env: dict[str, str]) -> None:
    text = (
        (project / "stacks" / "Pulumi.dev.yaml")
        .read_text()
        .replace("namespace: npa-dev", "namespace: elsewhere")
    )
    (project / "stacks" / "Pulumi.dev.yaml").write_text(text)

    with pytest.raises(ConfigError, match="uses namespace npa-dev") as caught:
        api.settings_for(request(project), env)

    assert caught.value.remedy == "kubectl config set-context kind-npa-dev --namespace elsewhere"


def test_settings_unknown_context_lists_existing(project: Path, env: dict[str, str]) -> None:
    text = (project / "stacks" / "Pulumi.dev.yaml").read_text().replace("kind-npa-dev", "ghost")
    (project / "stacks" / "Pulumi.dev.yaml").write_text(text)

    with pytest.raises(KubeError) as caught:
        api.settings_for(request(project), env)

    assert "kind-npa-dev" in caught.value.remedy + caught.value.message


def test_settings_stack_config_mistake_located(project: Path, env: dict[str, str]) -> None:
    (project / "stacks" / "Pulumi.dev.yaml").write_text(STACK + "  npa-infra:controllerCpus: 0\n")

    with pytest.raises(StackConfigError) as caught:
        api.settings_for(request(project), env)

    assert caught.value.issues[0].line == 5


# -- preview / up through the replaying engine ----------------------------------------------------
def test_preview_report_from_engine(project: Path, env: dict[str, str]) -> None:
    sink: list[ReplayPulumiCommand] = []
    factory = replaying({"preview": Replay(events=load_events(FIXTURES / "update.jsonl"))}, sink)

    report = api.preview(request(project), env=env, engine_factory=factory)

    assert [s.name for s in report.steps] == ["pull-npa-dev-npa-nebius-registry"]
    (command,) = sink
    assert {c.cwd for c in command.calls} == {str(project)}


def test_up_without_yes_previews_only(project: Path, env: dict[str, str]) -> None:
    sink: list[ReplayPulumiCommand] = []
    factory = replaying({"preview": Replay(events=load_events(FIXTURES / "create.jsonl"))}, sink)

    result = api.up(request(project), env=env, yes=False, engine_factory=factory)

    assert (result.status, result.exit_code) == (UpStatus.CONFIRMATION_REQUIRED, 1)
    assert result.preview is not None and result.preview.change_summary.create == 9
    assert [c.operation for c in sink[0].calls] == ["stack select", "preview"]


def test_up_with_yes_outputs_masked(project: Path, env: dict[str, str]) -> None:
    sink: list[ReplayPulumiCommand] = []
    masked = Replay(stdout=json.dumps({"namespace": "npa-dev", "token": "[secret]"}))
    plain = Replay(stdout=json.dumps({"namespace": "npa-dev", "token": "hunter2"}))
    factory = replaying(
        {
            "up": Replay(events=load_events(FIXTURES / "create.jsonl")),
            "stack output": [masked, plain],
            "stack history": _history({"create": 9}),
        },
        sink,
    )

    result = api.up(request(project), env=env, yes=True, engine_factory=factory)

    assert (result.status, result.exit_code) == (UpStatus.UPDATED, 0)
    assert result.outputs == {"namespace": "npa-dev", "token": "[secret]"}
    assert "hunter2" not in result.model_dump_json()


# -- destroy: the teardown order ------------------------------------------------------------------
def _destroy_scripts() -> dict[str, Replay | list[Replay]]:
    return {
        "destroy": Replay(events=load_events(FIXTURES / "delete.jsonl")),
        "stack history": _history({"delete": 9}),
        "stack output": Replay(stdout="{}"),  # the engine proven usable before any cancel
    }


def test_destroy_blocked_by_active_run_engine_untouched(project: Path, env: dict[str, str]) -> None:
    journal_run(Path(env["NPA_HOME"]), "r-live", status="SUBMITTED")
    sink: list[ReplayPulumiCommand] = []

    result = api.destroy(
        request(project), env=env, yes=True, engine_factory=replaying(_destroy_scripts(), sink)
    )

    assert (result.status, result.exit_code) == (DestroyStatus.BLOCKED_ACTIVE_JOBS, 1)
    assert result.gate.active_runs == [{"run_id": "r-live", "status": "SUBMITTED"}]
    assert sink[0].calls == []


def test_destroy_cancel_runs_then_destroys(project: Path, env: dict[str, str]) -> None:
    home = Path(env["NPA_HOME"])
    journal_run(home, "r-live", status="SUBMITTED")
    cancelled: list[str] = []

    def cancel(run_id: str) -> str:  # what cancellation.cancel_run records when it succeeds
        from npa_infra.journal.store import Journal

        with Journal.open(home) as journal:
            journal.append_event(run_id, "cancel", {"outcome": "already_absent"}, now=1e9)
        cancelled.append(run_id)
        return "already_absent"

    sink: list[ReplayPulumiCommand] = []
    result = teardown.destroy_stack(
        request(project),
        env=env,
        yes=True,
        cancel_runs=True,
        cancel_run=cancel,
        engine_factory=replaying(_destroy_scripts(), sink),
    )

    assert (result.status, result.exit_code) == (DestroyStatus.DESTROYED, 0)
    assert cancelled == ["r-live"]
    assert result.cancelled_runs == [{"run_id": "r-live", "outcome": "already_absent"}]
    assert result.summary is not None and result.summary.resource_changes == {"delete": 9}
    assert [c.operation for c in sink[0].calls][-2:] == ["destroy", "stack history"]


def test_destroy_cancel_unproven_stays_blocked(project: Path, env: dict[str, str]) -> None:
    journal_run(Path(env["NPA_HOME"]), "r-live", status="SUBMITTED")
    sink: list[ReplayPulumiCommand] = []

    result = teardown.destroy_stack(
        request(project),
        env=env,
        yes=True,
        cancel_runs=True,
        cancel_run=lambda run_id: "partial_cancellation",
        engine_factory=replaying(_destroy_scripts(), sink),
    )

    assert result.status is DestroyStatus.BLOCKED_ACTIVE_JOBS
    assert result.cancelled_runs == [{"run_id": "r-live", "outcome": "partial_cancellation"}]
    assert "destroy" not in [c.operation for c in sink[0].calls]


def test_destroy_cancel_runs_unusable_engine_cancels_nothing(
    project: Path, env: dict[str, str]
) -> None:
    journal_run(Path(env["NPA_HOME"]), "r-live", status="SUBMITTED")
    calls: list[str] = []
    broken = {
        **_destroy_scripts(),
        "stack output": Replay(
            code=255,
            stderr="error: getting secrets manager: passphrase must be set with "
            "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables",
        ),
    }

    with pytest.raises(ConfigError):
        teardown.destroy_stack(
            request(project),
            env=env,
            yes=True,
            cancel_runs=True,
            cancel_run=lambda run_id: calls.append(run_id) or "cancelled",
            engine_factory=replaying(broken, []),
        )

    assert calls == []  # the engine failed before any run was touched


def test_destroy_cancel_runs_only_this_stacks_runs(project: Path, env: dict[str, str]) -> None:
    home = Path(env["NPA_HOME"])
    journal_run(home, "r-mine", status="SUBMITTED")
    journal_run(home, "r-prod", stack="prod", status="SUBMITTED")
    calls: list[str] = []

    teardown.destroy_stack(
        request(project),
        env=env,
        yes=True,
        cancel_runs=True,
        cancel_run=lambda run_id: calls.append(run_id) or "partial_cancellation",
        engine_factory=replaying(_destroy_scripts(), []),
    )

    assert calls == ["r-mine"]


def test_destroy_cancel_runs_without_yes_cancels_nothing(
    project: Path, env: dict[str, str]
) -> None:
    journal_run(Path(env["NPA_HOME"]), "r-live", status="SUBMITTED")
    calls: list[str] = []

    result = teardown.destroy_stack(
        request(project),
        env=env,
        yes=False,
        cancel_runs=True,
        cancel_run=lambda run_id: calls.append(run_id) or "cancelled",
        engine_factory=replaying(_destroy_scripts(), []),
    )

    assert (result.status, calls) == (DestroyStatus.BLOCKED_ACTIVE_JOBS, [])


def test_destroy_clear_without_yes_confirmation(project: Path, env: dict[str, str]) -> None:
    journal_run(Path(env["NPA_HOME"]), "r-old", status="SUCCEEDED")
    sink: list[ReplayPulumiCommand] = []

    result = api.destroy(
        request(project), env=env, yes=False, engine_factory=replaying(_destroy_scripts(), sink)
    )

    assert (result.status, result.gate.verdict) == (DestroyStatus.CONFIRMATION_REQUIRED, "clear")
    assert sink[0].calls == []


# -- outputs, and what submit consumes --------------------------------------------------------------
OUTPUTS = {
    "context": "kind-npa-dev",
    "namespace": "npa-dev",
    "namespaces": ["npa-dev"],
    "service_account": "npa-runner",
    "pull_secret_names": ["npa-nebius-registry"],
    "src_s3_uri": "s3://b/npa-src/npa/" + "a" * 64 + "/",
    "controller_name": "sky-jobs-controller-npa-0123456789",
    "skypilot_config_path": "/h/skypilot-state/dev/config.yaml",
    "isolated_config_dir": "/h/skypilot-state/dev",
}


def _outputs_scripts(values: dict[str, Any]) -> dict[str, Replay | list[Replay]]:
    return {"stack output": [Replay(stdout=json.dumps(values))] * 2}


def test_outputs_masked_unless_show_secrets(project: Path, env: dict[str, str]) -> None:
    values = {"namespace": "npa-dev", "token": "[secret]"}
    scripts: dict[str, Replay | list[Replay]] = {
        "stack output": [
            Replay(stdout=json.dumps(values)),
            Replay(stdout=json.dumps({**values, "token": "hunter2"})),
        ]
    }

    hidden = api.outputs(request(project), env=env, engine_factory=replaying(dict(scripts), []))
    shown = api.outputs(
        request(project), env=env, show_secrets=True, engine_factory=replaying(dict(scripts), [])
    )

    assert hidden.outputs == {"namespace": "npa-dev", "token": "[secret]"}
    assert hidden.secret_keys == ["token"]
    assert shown.outputs["token"] == "hunter2"


def test_stack_outputs_typed_for_submit(project: Path, env: dict[str, str]) -> None:
    got = api.stack_outputs(
        request(project), env=env, engine_factory=replaying(_outputs_scripts(OUTPUTS), [])
    )

    assert got.model_dump() == OUTPUTS


def test_resolve_stack_prefers_outputs_and_says_so(project: Path, env: dict[str, str]) -> None:
    settings = stackfile.resolve_stack(
        "dev", project, env, engine_factory=replaying(_outputs_scripts(OUTPUTS), [])
    )

    assert settings.source == stackfile.FROM_OUTPUTS
    assert (settings.controller_name, settings.src_s3_uri) == (
        OUTPUTS["controller_name"],
        OUTPUTS["src_s3_uri"],
    )
    assert settings.pull_secret_names == ("npa-nebius-registry",)


def test_resolve_stack_without_engine_uses_file(project: Path, env: dict[str, str]) -> None:
    settings = stackfile.resolve_stack("dev", project, {**env, "PATH": "/nonexistent"})

    assert (settings.source, settings.context, settings.controller_name) == (
        stackfile.FROM_FILE,
        "kind-npa-dev",
        "",
    )


def test_resolve_stack_never_brought_up_uses_file(project: Path, env: dict[str, str]) -> None:
    settings = stackfile.resolve_stack(
        "dev", project, env, engine_factory=replaying(_outputs_scripts({}), [])
    )

    assert settings.source == stackfile.FROM_FILE


def test_inline_program_is_the_same_build_under_mocks(project: Path, env: dict[str, str]) -> None:
    import pulumi

    from tests.unit.stack.test_program import Mocks, Recorder

    settings = api.settings_for(request(project), env)
    recorder = Recorder(Mocks())
    pulumi.runtime.set_mocks(Mocks(), project="npa-infra", stack="dev", monitor=recorder)

    @pulumi.runtime.test  # type: ignore[misc]  # the SDK's decorator is untyped
    def body() -> None:
        settings.program()

    body()
    props = recorder.props("controller")
    assert (props["context"], props["namespace"]) == ("kind-npa-dev", "npa-dev")
    assert props["state_dir"] == str(Path(env["NPA_HOME"]) / "skypilot-state" / "dev")
    assert {r.name for r in recorder.requests} >= {"k8s", "ns-npa-dev", "sa-npa-dev", "controller"}
