"""A live ``submit --stack`` runs against the stack's outputs, end to end (pulumi.md §3).

The stack is "brought up" by its own dynamic providers, called as the engine
calls them: ``ControllerProvider.create`` against the Kubernetes double writes
and claims the controller's SkyPilot config (ServiceAccount, pull secret,
exact context), ``SourcePrefixProvider.create`` stages the source into moto
S3. The outputs reach ``submit`` through the real ``StackRunner`` and the
Automation API, whose ``pulumi stack output`` is replayed
(``ReplayPulumiCommand``). The launch, status and cancel then run against the
sky simulator: they must use the stack's state directory, config, controller
and staged source, and never rewrite the config the stack wrote.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_infra.errors import ConfigError, UsageError
from npa_infra.journal.store import Journal
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.source import tree
from npa_infra.stack.providers import ControllerProvider, SourcePrefixProvider
from npa_infra.stack.runner import RunnerSettings, StackRunner
from npa_infra.storage.s3 import BotoStore
from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.submission import pipeline
from tests.integration.runs.world import CONTEXT, ROOT, World
from tests.support.fakekube import FakeKube
from tests.support.motoserver import MotoS3
from tests.support.specs import one_step_spec

BUCKET = "stack-src"
NAMESPACE = "team-a"  # fake-a's namespace
SPEC = one_step_spec("stack-bound", BUCKET)


@dataclasses.dataclass
class Stack:
    project: Path
    checkout: Path
    outputs: dict[str, Any]
    command: ReplayPulumiCommand
    config_bytes: bytes

    def engine(self, settings: RunnerSettings) -> StackRunner:
        return StackRunner(settings, command=self.command)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "stack-bound.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture
def stack(world: World, fake_kube: FakeKube, s3_server: MotoS3, tmp_path: Path) -> Stack:
    """The ``dev`` stack of a project, brought up by its providers; its outputs replayed."""
    s3_server.create_bucket(BUCKET)
    fake_kube.add_service_account(NAMESPACE, "npa-runner")
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "stacks" / "Pulumi.dev.yaml").write_text(
        "config:\n"
        f"  npa-infra:context: {CONTEXT}\n"
        f"  npa-infra:namespace: {NAMESPACE}\n"
        "  npa-infra:serviceAccount: npa-runner\n"
        f"  npa-infra:bucket: {BUCKET}\n",
        encoding="utf-8",
    )
    checkout = tmp_path / "checkout"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "mod.py").write_text("VALUE = 1\n", encoding="utf-8")
    controller = ControllerProvider(env=world.env).create(
        {
            "stack": "dev",
            "state_dir": str(world.isolated.root),
            "context": CONTEXT,
            "namespace": NAMESPACE,
            "service_account": "npa-runner",
            "pull_secret_names": ["npa-nebius-registry"],
            "cpus": 2,
            "memory_gb": 8,
            "pod_config": {},
            "sky_bin": "",
        }
    )
    source = SourcePrefixProvider(
        store=lambda endpoint: BotoStore.create(endpoint), env=world.env
    ).create(
        {
            "bucket": BUCKET,
            "prefix": "npa-src/npa",
            "fingerprint": tree.scan(checkout).fingerprint,
            "source_dir": str(checkout),
            "endpoint": "",
            "stack": "dev",
            "delete_objects": False,
        }
    )
    assert controller.outs is not None and source.outs is not None
    outputs = {
        "context": CONTEXT,
        "namespace": NAMESPACE,
        "namespaces": [NAMESPACE],
        "service_account": "npa-runner",
        "pull_secret_names": ["npa-nebius-registry"],
        "src_s3_uri": source.outs["uri"],
        "controller_name": controller.outs["controller_name"],
        "skypilot_config_path": controller.outs["config_path"],
        "isolated_config_dir": str(world.isolated.root),
    }
    # the engine is never run: `pulumi` must only be on PATH for the SDK to be tried
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 97\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("canary-passphrase-7f3a", encoding="utf-8")
    passphrase.chmod(0o600)
    world.env["PATH"] = f"{bin_dir}:{world.env['PATH']}"
    world.env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(passphrase)
    command = ReplayPulumiCommand({"stack output": Replay(stdout=json.dumps(outputs))})
    config_bytes = world.isolated.config_file.read_bytes()
    return Stack(project, checkout, outputs, command, config_bytes)


def _submit(world: World, stack: Stack, spec: Path, **overrides: Any) -> liverun.LiveResult:
    values: dict[str, Any] = {
        "stack": "dev",
        "infra": None,
        "project_root": stack.project,
        "source_root": stack.checkout,
    }
    values.update(overrides)
    services = dataclasses.replace(world.services(), stack_engine=stack.engine)
    result = pipeline.submit(spec, world.options(**values), env=world.env, services=services)
    assert isinstance(result, liverun.LiveResult)
    return result


def _run_data(world: World, run_id: str) -> dict[str, Any]:
    journal = Journal.open(world.home)
    try:
        run = journal.get_run(run_id)
        assert run is not None
        return dict(run.data)
    finally:
        journal.close()


def test_submit_runs_on_the_stacks_outputs_and_keeps_its_config(
    world: World, stack: Stack, spec: Path
) -> None:
    result = _submit(world, stack, spec, run_id="bound-1")

    assert result.exit_code == 0, result.to_json()
    data = _run_data(world, "bound-1")
    assert data["context"] == CONTEXT
    assert data["isolated_config_dir"] == str(world.isolated.root)
    assert data["stack"] == {
        "name": "dev",
        "source": "stack outputs",
        "context": CONTEXT,
        "namespace": NAMESPACE,
        "service_account": "npa-runner",
        "imagePullSecrets": [{"name": "npa-nebius-registry"}],
        "src_s3_uri": stack.outputs["src_s3_uri"],
        "controller_name": stack.outputs["controller_name"],
        "skypilot_config_path": stack.outputs["skypilot_config_path"],
    }
    assert (data["source"]["origin"], data["source"]["reason"], data["source"]["uri"]) == (
        "stack",
        "stack_current",
        stack.outputs["src_s3_uri"],
    )
    task = list(
        yaml.safe_load_all(next(world.isolated.root.glob("submissions/bound-1/*.yaml")).read_text())
    )[1]
    assert task["envs"]["NPA_SRC_S3_URI"] == stack.outputs["src_s3_uri"]
    assert world.isolated.config_file.read_bytes() == stack.config_bytes
    config = yaml.safe_load(stack.config_bytes)
    assert config["kubernetes"]["remote_identity"] == "npa-runner"
    assert config["kubernetes"]["allowed_contexts"] == [CONTEXT]
    # the outputs came through the Automation API; the passphrase never reached argv
    output_calls = [c for c in stack.command.calls if c.operation == "stack output"]
    assert output_calls and all(
        "canary-passphrase-7f3a" not in " ".join(c.args) for c in output_calls
    )
    assert len(world.sim_jobs()) == 1

    # status and cancel find the run's jobs on the stack's controller, by the recorded directory
    status = world.status("bound-1")
    assert (status.status, status.queue_state) == ("STARTING", "verified")
    cancel = world.cancel("bound-1")
    assert (cancel.outcome, cancel.cancelled_job_ids) == ("cancelled", [1])
    assert world.isolated.config_file.read_bytes() == stack.config_bytes
    assert IsolatedDir(world.isolated.root).owner() == "dev"


def test_submit_to_another_cluster_than_the_stacks_refused_before_anything(
    world: World, stack: Stack, spec: Path
) -> None:
    with pytest.raises(UsageError, match="not stack dev's context") as err:
        _submit(world, stack, spec, run_id="bound-2", infra="k8s/fake-b")

    assert "drop --infra" in err.value.remedy
    assert world.sim_jobs() == []
    assert not (world.home / "journal.sqlite3").exists()


def test_submit_with_another_controller_identity_refused(
    world: World, stack: Stack, spec: Path
) -> None:
    world.env["SKYPILOT_USER_ID"] = "someone-else"

    with pytest.raises(ConfigError, match="its teardown never sees"):
        _submit(world, stack, spec, run_id="bound-3")

    assert world.sim_jobs() == []
    assert world.isolated.config_file.read_bytes() == stack.config_bytes


def test_submit_of_a_checkout_newer_than_the_stacks_source_refused(
    world: World, stack: Stack, spec: Path
) -> None:
    (stack.checkout / "pkg" / "mod.py").write_text("VALUE = 2\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="older than the checkout") as err:
        _submit(world, stack, spec, run_id="bound-4")

    assert "npa stack up --stack dev --yes" in err.value.remedy
    assert "--stage-src" in err.value.remedy
    assert world.sim_jobs() == []


def test_submit_without_outputs_falls_back_to_the_file_and_says_so(
    world: World, stack: Stack, spec: Path
) -> None:
    stack.command = ReplayPulumiCommand(
        {"stack output": Replay(code=255, stderr="error: no stack named 'dev' found")}
    )
    IsolatedDir(world.isolated.root).release()  # as after `npa stack destroy`

    result = _submit(world, stack, spec, run_id="bound-5")

    assert result.exit_code == 0, result.to_json()
    data = _run_data(world, "bound-5")
    assert data["stack"]["source"] == "configuration file"
    assert data["stack"]["controller_name"] is None
    assert data["source"]["origin"] == "checkout"
