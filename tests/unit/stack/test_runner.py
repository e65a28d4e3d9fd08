"""``StackRunner`` through the real Automation API with a replaying ``PulumiCommand`` (pulumi.md §5.2).

Only the process is replaced: the SDK builds the argv, starts its event-log
watcher and parses the replayed events (tests/fixtures/pulumi); the runner
turns them into the diff report and maps every failure to an ``NpaError``.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from pulumi.automation import errors as auto_errors

from npa_infra.errors import (
    ConfigError,
    EngineUnavailableError,
    ExternalError,
    NpaError,
    StackLockedError,
)
from npa_infra.stack.runner import RunnerSettings, StackRunner, translate
from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand, load_events

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "pulumi"
PASSPHRASE = "correct horse battery staple"


def events(name: str) -> list[dict[str, object]]:
    return load_events(FIXTURES / f"{name}.jsonl")


@pytest.fixture
def settings(tmp_path: Path) -> RunnerSettings:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        (REPO / "Pulumi.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    secret = tmp_path / "passphrase"
    secret.write_text(PASSPHRASE, encoding="utf-8")
    backend = f"file://{tmp_path / 'state'}"
    return RunnerSettings(
        stack="dev",
        project_root=project,
        backend_url=backend,
        pulumi_home=tmp_path / "pulumi-home",
        program=lambda: None,
        env_vars={
            "PULUMI_BACKEND_URL": backend,
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(secret),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
        },
    )


def _history(result: str = "succeeded", changes: dict[str, int] | None = None) -> Replay:
    entry = {
        "kind": "update",
        "startTime": "2026-01-01T00:00:00.000000Z",
        "endTime": "2026-01-01T00:00:31.000000Z",
        "message": "",
        "environment": {},
        "config": {},
        "result": result,
        "version": 2,
        "resourceChanges": changes or {"create": 9},
    }
    return Replay(stdout=json.dumps([entry]))


# -- argv, working directory, backend and passphrase ------------------------------------------
def test_preview_argv_backend_passphrase_exact(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=events("create"))})

    StackRunner(settings, command=command).preview()

    select, preview = command.calls
    assert list(select.args) == ["--non-interactive", "stack", "select", "--stack", "dev"]
    args = list(preview.args)
    assert args[:2] == ["--non-interactive", "preview"]
    assert args[args.index("--exec-kind") + 1] == "auto.inline"
    assert any(a.startswith("--client=127.0.0.1:") for a in args)
    assert args[args.index("--color") + 1] == "never"
    assert args[-2:] == ["--stack", "dev"]
    assert "--event-log" in args
    for call in command.calls:
        assert call.cwd == str(settings.project_root)
        assert call.env["PULUMI_BACKEND_URL"] == settings.backend_url
        assert call.env["PULUMI_HOME"] == str(settings.pulumi_home)
        assert call.env["PULUMI_CONFIG_PASSPHRASE_FILE"].endswith("passphrase")
        assert not any(PASSPHRASE in a for a in call.args)
        assert PASSPHRASE not in json.dumps(dict(call.env))


def test_preview_config_file_and_diff_forwarded(settings: RunnerSettings, tmp_path: Path) -> None:
    config = tmp_path / "Pulumi.ci.yaml"
    runner = StackRunner(
        RunnerSettings(**{**_fields(settings), "config_file": config}),
        command=(command := ReplayPulumiCommand({"preview": Replay(events=events("noop"))})),
    )

    runner.preview(diff=True)

    args = list(command.calls[-1].args)
    assert "--diff" in args
    assert args[args.index("--config-file") + 1] == str(config)


def _fields(settings: RunnerSettings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


def test_stack_missing_then_init_with_passphrase_provider(settings: RunnerSettings) -> None:
    missing = Replay(code=255, stderr="error: no stack named 'dev' found")
    command = ReplayPulumiCommand(
        {"stack select": missing, "preview": Replay(events=events("create"))}
    )

    StackRunner(settings, command=command).preview()

    assert [c.operation for c in command.calls] == ["stack select", "stack init", "preview"]
    init = list(command.calls[1].args)
    assert init[init.index("--secrets-provider") + 1] == "passphrase"


def test_constructor_runs_nothing(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({})

    StackRunner(settings, command=command)

    assert command.calls == []


# -- the diff report from each scenario ---------------------------------------------------------
def test_preview_create_every_resource_once(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=events("create"))})

    report = StackRunner(settings, command=command).preview()

    assert report.changes_present is True
    assert report.change_summary.create == 9
    assert [s.op for s in report.steps] == ["create"] * 9  # pre + outputs events: one step each
    assert report.steps[2].name == "ns-npa-dev"
    assert report.backend_url == settings.backend_url


def test_preview_noop_no_steps_no_changes(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=events("noop"))})

    report = StackRunner(settings, command=command).preview()

    assert (report.changes_present, report.steps, report.change_summary.same) == (False, [], 9)


def test_preview_password_rotation_is_in_place_update(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=events("update"))})

    report = StackRunner(settings, command=command).preview()

    (step,) = report.steps
    assert (step.op, step.type) == ("update", "kubernetes:core/v1:Secret")
    assert (step.diff_keys, step.replace_keys) == (["stringData"], [])
    assert step.detailed_diff == {"stringData": "update"}
    assert "[secret]" not in json.dumps(report.to_json())  # masked inputs never reach the report


def test_preview_replace_folds_halves_and_names_keys(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=events("replace"))})

    report = StackRunner(settings, command=command).preview()

    (step,) = report.steps
    assert (step.op, step.name, step.replace_keys) == ("replace", "source", ["fingerprint"])
    assert step.detailed_diff["fingerprint"] == "update-replace"
    assert report.change_summary.replace == 1


def test_refresh_preview_reports_drift_only(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"refresh": Replay(events=events("drift"))})

    report = StackRunner(settings, command=command).refresh_preview()

    (step,) = report.steps
    assert (step.op, step.name, step.diff_keys) == ("refresh", "sa-npa-dev", ["imagePullSecrets"])
    assert report.changes_present is True
    assert "--preview-only" in command.calls[-1].args


def test_destroy_summary_and_exclude_protected(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand(
        {
            "destroy": Replay(events=events("delete")),
            "stack history": _history(changes={"delete": 9}),
        }
    )

    summary = StackRunner(settings, command=command).destroy(exclude_protected=True)

    assert (summary.result, summary.resource_changes) == ("succeeded", {"delete": 9})
    destroy = next(c for c in command.calls if c.operation == "destroy")
    assert {"--skip-preview", "--yes", "--exclude-protected"} <= set(destroy.args)
    history = next(c for c in command.calls if c.operation == "stack history")
    assert "--show-secrets" not in history.args


def test_up_outputs_secret_masked_in_repr(settings: RunnerSettings) -> None:
    masked = Replay(
        stdout=json.dumps({"controller_name": "sky-jobs-controller-x", "pw": "[secret]"})
    )
    plain = Replay(stdout=json.dumps({"controller_name": "sky-jobs-controller-x", "pw": "hunter2"}))
    command = ReplayPulumiCommand(
        {
            "up": Replay(events=events("create")),
            "stack output": [masked, plain],
            "stack history": _history(),
        }
    )

    update = StackRunner(settings, command=command).up()

    assert update.summary.result == "succeeded"
    assert update.outputs["pw"].secret is True
    assert update.outputs["controller_name"].value == "sky-jobs-controller-x"
    assert "hunter2" not in repr(update.outputs)
    up = next(c for c in command.calls if c.operation == "up")
    assert {"--yes", "--skip-preview"} <= set(up.args)


# -- failures: one message with the fix, never the SDK's exception -------------------------------
PLUGIN_TEXT = (
    "error: could not load plugin for kubernetes provider "
    "'urn:pulumi:dev::npa-infra::pulumi:providers:kubernetes::k8s': no resource plugin "
    "'pulumi-resource-kubernetes' found in the workspace at version v4.34.2 or on your $PATH, "
    "install the plugin using `pulumi plugin install resource kubernetes v4.34.2`"
)
LOCK_TEXT = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) "
    "to end or delete the lock file with `pulumi cancel`.\n  file:///state/.pulumi/locks/"
    "organization/npa-infra/dev/1.json: created by op@host (pid 42) at 2026-01-01T00:00:00Z"
)
PASSPHRASE_TEXT = (
    "error: getting stack configuration: get stack secrets manager: incorrect passphrase, "
    "please set PULUMI_CONFIG_PASSPHRASE to the correct passphrase or set "
    "PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase"
)
PROTECTED_TEXT = (
    'error: resource "urn:pulumi:dev::npa-infra::kubernetes:core/v1:Namespace::ns-npa-dev" '
    "cannot be deleted because it is protected. To unprotect the resource, either remove the "
    "`protect` flag from the resource in your Pulumi program and run `pulumi up`, or use the "
    "command: `pulumi state unprotect`"
)
NO_PASSPHRASE_TEXT = (
    "error: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or "
    "PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
)


@pytest.mark.parametrize(
    ("operation", "stderr", "error", "fragment"),
    [
        ("preview", PLUGIN_TEXT, EngineUnavailableError, "kubernetes provider plugin v4.34.2"),
        ("preview", LOCK_TEXT, StackLockedError, "holds stack dev's lock"),
        ("stack select", PASSPHRASE_TEXT, ConfigError, "does not decrypt"),
        ("stack select", NO_PASSPHRASE_TEXT, ConfigError, "no passphrase"),
        ("preview", PROTECTED_TEXT, ConfigError, "would delete a protected resource"),
        ("preview", "error: an unhandled error occurred: boom", ExternalError, "failed"),
    ],
    ids=["plugin", "lock", "wrong-passphrase", "no-passphrase", "protected", "other"],
)
def test_preview_engine_failure_mapped_with_remedy(
    settings: RunnerSettings,
    operation: str,
    stderr: str,
    error: type[NpaError],
    fragment: str,
) -> None:
    command = ReplayPulumiCommand({operation: Replay(code=255, stderr=stderr)})

    with pytest.raises(error, match=fragment) as caught:
        StackRunner(settings, command=command).preview()

    assert caught.value.remedy
    assert isinstance(caught.value.__cause__, auto_errors.CommandError)
    assert caught.value.details["code"] == 255


def test_missing_plugin_exit_3_remedy_names_install_and_home(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(code=255, stderr=PLUGIN_TEXT)})

    with pytest.raises(EngineUnavailableError) as caught:
        StackRunner(settings, command=command).preview()

    assert caught.value.exit_code == 3
    assert caught.value.remedy == (
        f"PULUMI_HOME={settings.pulumi_home} pulumi plugin install resource kubernetes 4.34.2"
    )


def test_up_failure_names_the_engine_diagnostic(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand(
        {"up": Replay(events=events("failure"), code=255, stderr="error: update failed")}
    )

    with pytest.raises(ExternalError, match="secrets is forbidden") as caught:
        StackRunner(settings, command=command).up()

    assert "\x1b[" not in caught.value.message


def test_no_summary_event_mapped(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand({"preview": Replay(events=[])})

    with pytest.raises(ExternalError, match="without reporting a summary"):
        StackRunner(settings, command=command).preview()


def _sdk_error_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = [auto_errors.InvalidVersionError]
    pending: list[type[BaseException]] = [auto_errors.CommandError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _sdk_error_classes(), ids=lambda c: c.__name__)
def test_translate_every_sdk_error_class_to_npa_error(cls: type[BaseException]) -> None:
    from pulumi.automation import CommandResult

    if issubclass(cls, auto_errors.CommandError):
        exc: BaseException = cls(CommandResult(stdout="", stderr="error: x", code=1))
    else:
        exc = cls("the CLI is too old")

    mapped = translate(exc, operation="preview", stack="dev", pulumi_home=Path("/h"))

    assert isinstance(mapped, NpaError)
    assert not isinstance(mapped, cls)
    assert mapped.message and mapped.remedy


def test_translate_missing_binary_is_engine_unavailable() -> None:
    mapped = translate(
        FileNotFoundError("pulumi"), operation="preview", stack="dev", pulumi_home=Path("/h")
    )

    assert (type(mapped), mapped.message, mapped.exit_code) == (
        EngineUnavailableError,
        "pulumi CLI not found",
        3,
    )


# -- up/destroy are journaled mutations (faults.md invariant 5) ---------------------------------
class _DiesInUp(ReplayPulumiCommand):
    """The engine call of ``up`` never returns: npa is SIGKILLed inside it."""

    def run(self, args: list[str], *rest: Any, **kwargs: Any) -> Any:
        if "up" in args:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(args, *rest, **kwargs)


@pytest.mark.parametrize("operation", ["up", "destroy"])
def test_engine_mutation_killed_then_next_one_refreshes_first(
    settings: RunnerSettings, operation: str
) -> None:
    pid = os.fork()
    if pid == 0:  # a real npa process dying inside `pulumi up`
        try:
            StackRunner(settings, command=_DiesInUp({})).up()
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    probe = StackRunner(settings, command=ReplayPulumiCommand({}))
    [left] = probe.interrupted()
    assert left["operation"] == "up" and left["pid"] == pid

    answer = (
        {"up": Replay(events=events("create")), "stack output": Replay(stdout="{}")}
        if operation == "up"
        else {"destroy": Replay(events=events("delete"))}
    )
    command = ReplayPulumiCommand(
        {"refresh": Replay(events=events("noop")), "stack history": _history(), **answer}
    )
    runner = StackRunner(settings, command=command)
    runner.up() if operation == "up" else runner.destroy()
    operations = [c.operation for c in command.calls if c.operation in ("refresh", operation)]
    assert operations == ["refresh", operation]  # the interrupted checkpoint is reconciled first
    assert runner.interrupted() == []
    assert not any((settings.pulumi_home / "npa-operations" / "dev").glob("*.json"))


def test_engine_mutation_that_answered_leaves_no_record(settings: RunnerSettings) -> None:
    command = ReplayPulumiCommand(
        {"up": Replay(code=255, stderr=LOCK_TEXT), "stack history": _history()}
    )
    runner = StackRunner(settings, command=command)
    with pytest.raises(StackLockedError):
        runner.up()
    assert runner.interrupted() == []
    assert not any((settings.pulumi_home / "npa-operations" / "dev").glob("*.json"))
    assert "refresh" not in [c.operation for c in command.calls]


# -- secret config (issue 17: a stack-backed project's credentials) ---------------------------
def test_secret_config_decrypted_value_and_absent_key_none(settings: RunnerSettings) -> None:
    found = Replay(stdout=json.dumps({"value": "canary-77", "secret": True}))
    missing = Replay(
        code=255, stderr="error: configuration key 'npa-credentials:B' not found for stack 'dev'"
    )
    command = ReplayPulumiCommand({"config": [found, missing]})
    runner = StackRunner(settings, command=command)

    value = runner.secret_config("npa-credentials:A")
    absent = runner.secret_config("npa-credentials:B")

    assert value is not None and value.get_secret_value() == "canary-77"
    assert "canary-77" not in repr(value)
    assert absent is None
    gets = [c.args for c in command.calls if c.operation == "config"]
    assert gets[0][-5:] == ("get", "npa-credentials:A", "--json", "--stack", "dev")


def test_set_secret_config_value_on_stdin_not_argv(settings: RunnerSettings) -> None:
    from pydantic import SecretStr

    read: list[bytes] = []

    class Reading(ReplayPulumiCommand):
        def run(self, args: list[str], cwd: str, additional_env: Any, *rest: Any) -> Any:
            if "config" in args:
                read.append(os.read(0, 1024))
            return super().run(args, cwd, additional_env, *rest)

    command = Reading({"config": Replay()})

    StackRunner(settings, command=command).set_secret_config("k:A", SecretStr("canary-88"))

    (call,) = [c for c in command.calls if c.operation == "config"]
    assert call.args == ("--non-interactive", "config", "set", "k:A", "--secret", "--stack", "dev")
    assert read == [b"canary-88"]
    assert call.env["PULUMI_HOME"] == str(settings.pulumi_home)
