"""A submit bound to its stack's outputs: context, state directory, controller, pull secrets."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from npa_infra.errors import ConfigError, UsageError
from npa_infra.render.documents import RenderedJob
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.workflow.target import stackbinding
from npa_infra.workflow.target.stackfile import FROM_FILE, FROM_OUTPUTS, StackSettings

ENV = {"HOME": "/nonexistent", "PATH": "/usr/bin"}


def _stack(tmp_path: Path, **overrides: object) -> tuple[StackSettings, IsolatedDir]:
    iso = IsolatedDir(tmp_path / "state")
    iso.prepare(
        ENV,
        context="ctx-a",
        controller=ControllerSettings(remote_identity="npa-runner"),
        stack="dev",
        own=True,
    )
    stack = StackSettings(
        name="dev",
        path="stacks/Pulumi.dev.yaml",
        context="ctx-a",
        namespace="npa-dev",
        service_account="npa-runner",
        pull_secret_names=("npa-nebius-registry",),
        controller_name=iso.controller_name(ENV),
        skypilot_config_path=str(iso.config_file),
        isolated_config_dir=str(iso.root),
        source=FROM_OUTPUTS,
    )
    return replace(stack, **overrides), iso  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("infra", "stack_context", "expected"),
    [
        (None, "ctx-a", "ctx-a"),
        ("k8s/ctx-a", "ctx-a", "ctx-a"),
        ("k8s/ctx-b", "", "ctx-b"),
        (None, "", None),
    ],
)
def test_context_is_the_flag_or_the_stacks(
    infra: str | None, stack_context: str, expected: str | None
) -> None:
    stack = StackSettings(name="dev", path="p", context=stack_context)
    assert stackbinding.context(infra, stack) == expected


@pytest.mark.parametrize("source", [FROM_FILE, FROM_OUTPUTS])
def test_context_other_than_the_stacks_refused(source: str) -> None:
    stack = StackSettings(name="dev", path="p", context="ctx-a", source=source)
    with pytest.raises(UsageError, match="not stack dev's context") as err:
        stackbinding.context("k8s/ctx-b", stack)
    assert "drop --infra" in err.value.remedy


@pytest.mark.parametrize("infra", ["ctx-a", "k8s/", "aws/us-east-1"])
def test_context_flag_shape_refused(infra: str) -> None:
    with pytest.raises(UsageError, match="is not k8s/<context>"):
        stackbinding.context(infra, None)


def test_verify_adopted_accepts_the_stacks_own_directory(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    stackbinding.verify_adopted(stack, iso, ENV)


def test_verify_adopted_refuses_an_unclaimed_directory(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    iso.release()
    with pytest.raises(ConfigError, match="holds no config written by `npa stack up`") as err:
        stackbinding.verify_adopted(stack, iso, ENV)
    assert err.value.remedy.startswith("npa stack up --stack dev --yes")


def test_verify_adopted_refuses_a_config_other_than_the_outputs_name(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path, skypilot_config_path="/elsewhere/config.yaml")
    with pytest.raises(ConfigError, match=r"outputs name /elsewhere/config\.yaml"):
        stackbinding.verify_adopted(stack, iso, ENV)


def test_verify_adopted_refuses_another_controller_identity(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    with pytest.raises(ConfigError, match="its teardown never sees") as err:
        stackbinding.verify_adopted(stack, iso, {**ENV, "SKYPILOT_USER_ID": "someone-else"})
    assert "SKYPILOT_USER_ID" in err.value.remedy


def test_verify_adopted_ignores_a_stack_read_from_its_file(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path, source=FROM_FILE)
    iso.release()
    stackbinding.verify_adopted(stack, iso, ENV)
    stackbinding.verify_adopted(None, iso, ENV)


def test_sky_config_is_the_stacks_file_from_outputs(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    config = stackbinding.sky_config(stack, "ctx-a")
    assert config == yaml.safe_load(iso.config_file.read_text())
    assert config["kubernetes"]["remote_identity"] == "npa-runner"


def test_sky_config_missing_file_says_bring_the_stack_up(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    iso.config_file.unlink()
    with pytest.raises(ConfigError, match="does not exist") as err:
        stackbinding.sky_config(stack, "ctx-a")
    assert err.value.remedy == "npa stack up --stack dev --yes"


def test_sky_config_generated_without_outputs() -> None:
    stack = StackSettings(name="dev", path="p", context="ctx-a", controller_cpus=4)
    config = stackbinding.sky_config(stack, "ctx-a")
    assert config["kubernetes"]["allowed_contexts"] == ["ctx-a"]
    assert config["jobs"]["controller"]["resources"]["cpus"] == 4


def _job(*secrets: str) -> RenderedJob:
    pod = {"spec": {"imagePullSecrets": [{"name": n} for n in secrets]}}
    doc = {"name": "t", "config": {"kubernetes": {"pod_config": pod}}}
    return RenderedJob("t", 0, "one-shot", (doc,), (), "")


def test_uncovered_pull_secrets_names_only_undeclared(tmp_path: Path) -> None:
    stack, _ = _stack(tmp_path)
    jobs = [_job("npa-nebius-registry"), _job("npa-nebius-registry", "team-cred")]
    assert stackbinding.uncovered_pull_secrets(jobs, stack) == ["team-cred"]
    assert stackbinding.uncovered_pull_secrets([_job("npa-nebius-registry")], stack) == []
    assert stackbinding.uncovered_pull_secrets(jobs, replace(stack, source=FROM_FILE)) == []


def test_require_pull_secrets_refuses_with_the_stack_fix(tmp_path: Path) -> None:
    stack, _ = _stack(tmp_path)
    stackbinding.require_pull_secrets([_job("npa-nebius-registry")], stack)
    with pytest.raises(ConfigError, match=r"Secret\(s\) team-cred, which stack dev") as err:
        stackbinding.require_pull_secrets([_job("team-cred")], stack)
    assert "npa-infra:registries" in err.value.remedy
    assert err.value.remedy.endswith("npa stack up --stack dev --yes")


def test_record_names_the_binding_and_no_secret_value(tmp_path: Path) -> None:
    stack, iso = _stack(tmp_path)
    assert stackbinding.record(None) == {}
    bound = stackbinding.record(stack)["stack"]
    assert bound["source"] == FROM_OUTPUTS
    assert bound["controller_name"] == iso.controller_name(ENV)
    assert bound["imagePullSecrets"] == [{"name": "npa-nebius-registry"}]
