"""Every ``--json`` output is one JSON object with a string ``status`` (issue 17).

One table of invocations that need no network: the spec commands, the journal
readers on an empty home, the cluster commands with an injected ``FakeCluster``,
``npa stack`` over a replayed Pulumi engine, ``cleanup`` and ``configure --show``.
Each is run through the real typer app with the ``Services`` an embedding caller
would pass; its stdout must parse as exactly one object whose ``status`` is the
documented one, with the documented exit code.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.kube.base import KubeCluster
from npa_infra.stack.runner import RunnerSettings, StackRunner
from npa_infra.testing.pulumi import Replay, ReplayPulumiCommand, load_events
from npa_infra.workflow.target.services import Services
from tests.support.fakecluster import FakeCluster, gpu_node
from tests.unit.cli.conftest import CliFakeProber, CliFakeRegistry

REPO = Path(__file__).resolve().parents[3]
LINEAR = REPO / "workflows" / "testing" / "linear-chain.yaml"
FIXTURES = REPO / "tests" / "fixtures" / "pulumi"
CTX = "prod"
GPU = "nvidia.com/gpu.product"
GPU_SPEC = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata: {{name: gpu-train}}
    config: {{bucket: example-bucket}}
    resources:
      gpu: {{cloud: kubernetes, accelerators: "H100-80GB:{count}", cpus: 8, image: busybox:1.36}}
    states:
      train:
        run: {{shell: python train.py}}
        resources: gpu
        terminal: true
    """
)
INVALID = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: x}\nstates: {}\n"
STACK = "config:\n  npa-infra:context: prod\n  npa-infra:namespace: npa-dev\n"

# id: (argv, expected status, expected exit code)
CASES: dict[str, tuple[list[str], str, int]] = {
    "validate-spec": (["workbench", "workflow", "validate-spec", str(LINEAR)], "valid", 0),
    "validate-spec-invalid": (
        ["workbench", "workflow", "validate-spec", "{invalid}"],
        "invalid",
        1,
    ),
    "plan-spec": (["workbench", "workflow", "plan-spec", str(LINEAR)], "planned", 0),
    "plan-spec-waves": (
        ["workbench", "workflow", "plan-spec", str(LINEAR), "--waves"],
        "planned",
        0,
    ),
    # no --infra: the in-cluster pull is not proven (target_pull_unverified rows)
    "preflight-images": (["workbench", "workflow", "preflight-images", str(LINEAR)], "unproven", 2),
    "submit-plan-only": (
        ["workbench", "workflow", "submit", str(LINEAR), "--plan-only", "--render-dir", "{tmp}/r"],
        "PLANNED",
        0,
    ),
    "status-unknown": (["workbench", "workflow", "status", "nobody-1"], "NOT_FOUND", 1),
    "status-all": (["workbench", "workflow", "status", "--all"], "ok", 0),
    "cancel-unknown": (["workbench", "workflow", "cancel", "nobody-1"], "unknown_run", 1),
    "schema": (["workbench", "workflow", "schema"], "ok", 0),
    "catalog": (["workbench", "workflow", "catalog"], "ok", 0),
    "gpus": (["workbench", "workflow", "gpus", "--cluster", CTX], "ok", 0),
    "gpus-spec-ok": (
        ["workbench", "workflow", "gpus", "--cluster", CTX, "--spec", "{gpu1}"],
        "ok",
        0,
    ),
    "gpus-spec-refused": (
        ["workbench", "workflow", "gpus", "--cluster", CTX, "--spec", "{gpu16}"],
        "refused",
        1,
    ),
    "stack-preview-noop": (["stack", "preview", "--stack", "dev"], "no_changes", 0),
    "stack-preview-update": (["stack", "preview", "--stack", "dev"], "changes", 0),
    "stack-refresh": (["stack", "refresh", "--stack", "dev"], "changes", 0),
    "stack-up-unconfirmed": (["stack", "up", "--stack", "dev"], "confirmation_required", 1),
    "stack-outputs": (["stack", "outputs", "--stack", "dev"], "ok", 0),
    "stack-no-engine": (["stack", "outputs", "--stack", "dev"], "error", 3),
    "skypilot-status": (["skypilot", "status", "--sky-bin", "{tmp}/no-sky"], "not_installed", 1),
    "cleanup": (["cleanup"], "report", 0),
    "configure-show": (["configure", "--show"], "ok", 0),
    "cluster-down": (["cluster", "down", "--cluster", CTX], "preview", 0),
    "cluster-down-unknown-context": (["cluster", "down", "--cluster", "ghost"], "error", 1),
}
# the replayed engine's script per case (the rest never reach it)
ENGINE: dict[str, dict[str, Replay | list[Replay]]] = {
    "stack-preview-noop": {"preview": Replay(events=load_events(FIXTURES / "noop.jsonl"))},
    "stack-preview-update": {"preview": Replay(events=load_events(FIXTURES / "update.jsonl"))},
    "stack-refresh": {"refresh": Replay(events=load_events(FIXTURES / "drift.jsonl"))},
    "stack-up-unconfirmed": {"preview": Replay(events=load_events(FIXTURES / "noop.jsonl"))},
    "cleanup": {"stack output": Replay(stdout="{}")},  # dev never brought up
    "stack-outputs": {
        "stack output": [
            Replay(stdout=json.dumps({"controller_name": "c", "token": "[secret]"})),
            Replay(stdout=json.dumps({"controller_name": "c", "token": "hunter2"})),
        ]
    },
}


def _cluster(context: str) -> FakeCluster:
    return FakeCluster(context, node_list=[gpu_node("n1", {GPU: "NVIDIA-H100-80GB-HBM3"}, 8)])


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A project directory, an empty npa home, a kubeconfig and a stand-in ``pulumi``."""
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    (root / "stacks" / "Pulumi.dev.yaml").write_text(STACK, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": CTX, "context": {"cluster": "c", "user": "u", "namespace": "npa-dev"}}
        ],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
    (tmp_path / "invalid.yaml").write_text(INVALID, encoding="utf-8")
    for count in (1, 16):
        (tmp_path / f"gpu{count}.yaml").write_text(GPU_SPEC.format(count=count))
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "passphrase"))
    monkeypatch.setenv("NPA_DEBUG", "")
    monkeypatch.setenv("NPA_SKYPILOT_ISOLATED_CONFIG_DIR", "")
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "NPA_TOOL_CATALOG"):
        monkeypatch.delenv(name, raising=False)
    for name in ("NPA_REGISTRY", "NPA_SRC_S3_URI", "NPA_WORKFLOW_GPU_ACCELERATOR"):
        monkeypatch.delenv(name, raising=False)
    return {
        "tmp": str(tmp_path),
        "invalid": str(tmp_path / "invalid.yaml"),
        "gpu1": str(tmp_path / "gpu1.yaml"),
        "gpu16": str(tmp_path / "gpu16.yaml"),
        "bin": str(bin_dir),
    }


def _services(case: str) -> Services:
    def gpu_cluster(context: str, env: Mapping[str, str]) -> KubeCluster:
        return _cluster(context)

    def cluster(path: Path, context: str) -> FakeCluster:
        return _cluster(context)

    def engine(settings: RunnerSettings) -> StackRunner:
        return StackRunner(settings, command=ReplayPulumiCommand(ENGINE.get(case, {})))

    base = Services(registry=CliFakeRegistry().open, prober=CliFakeProber().open)
    return dataclasses.replace(base, gpu_cluster=gpu_cluster, cluster=cluster, stack_engine=engine)


@pytest.mark.parametrize(("case"), list(CASES), ids=list(CASES))
def test_json_output_one_object_with_string_status(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    argv, status, code = CASES[case]
    if case == "stack-no-engine":
        monkeypatch.setenv("PATH", str(Path(world["tmp"]) / "empty"))
    args = [a.format(**world) for a in argv]

    result = CliRunner().invoke(app, [*args, "--json"], obj=_services(case), catch_exceptions=False)

    document = json.loads(result.stdout)  # exactly one document: trailing data fails
    assert isinstance(document, dict), result.stdout
    assert isinstance(document["status"], str)
    assert (document["status"], result.exit_code) == (status, code), result.output
