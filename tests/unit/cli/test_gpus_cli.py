"""``npa workbench workflow gpus`` and the submit-time GPU remap, through the real typer app.

The Kubernetes side is a ``FakeCluster`` given to the CLI as
``Services.gpu_cluster`` (the root context's object); every case asserts the
exit code, parses stdout as JSON where promised, and reads stderr
separately (style.md rule 18).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.kube.base import KubeCluster
from npa_infra.kube.models import KubeErrorKind, Taint
from npa_infra.workflow.target.services import Services
from tests.support.fakecluster import FakeCluster, gpu_node, kube_error

GFD = "nvidia.com/gpu.product"
NEBIUS = "nebius.com/gpu-name"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"
CTX = "nebius-prod"
NODE_KEYS = {"name", "gpus", "eligible", "reason"}
ACCELERATOR_KEYS = {
    "name",
    "canonical",
    "label_key",
    "label_value",
    "requestable_qty_per_node",
    "nodes",
}

GPU_SPEC = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata:
      name: gpu-train
    config:
      bucket: example-bucket
    resources:
      gpu:
        cloud: kubernetes
        accelerators: RTXPRO6000:{count}
        cpus: 8
        memory: 32Gi
        image: nvcr.io/nvidia/pytorch:24.01-py3
      cpu:
        cloud: kubernetes
        cpus: 2
        memory: 4Gi
        image: busybox:1.36
    states:
      train:
        run: {{shell: python train.py}}
        resources: gpu
        next: report
      report:
        run: {{shell: echo done}}
        resources: cpu
        terminal: true
    """
)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "npa-home"
    home.mkdir()
    monkeypatch.setenv("NPA_HOME", str(home))
    for name in ("NPA_TOOL_CATALOG", "NPA_SRC_S3_URI", "NPA_WORKFLOW_GPU_ACCELERATOR", "NPA_DEBUG"):
        monkeypatch.delenv(name, raising=False)


class Installed:
    """The fake cluster ``open_cluster`` hands out, and the contexts it was asked for."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.asked: list[str] = []

    def __call__(self, context: str, env: Mapping[str, str]) -> KubeCluster:
        self.asked.append(context)
        return self.cluster


def _race() -> FakeCluster:
    return FakeCluster(
        CTX,
        [
            gpu_node(
                "gpu-a", {NEBIUS: "RTX6000", GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}
            ),
            gpu_node("gpu-b", {NEBIUS: "RTX6000"}),
            gpu_node(
                "gpu-c",
                {GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"},
                8,
                unschedulable=True,
            ),
            gpu_node("cpu-a", {"kubernetes.io/os": "linux"}, 0),
        ],
    )


@pytest.fixture
def cluster() -> Installed:
    """The cluster the CLI is given (``Services.gpu_cluster``) in every test that asks for it."""
    return Installed(_race())


Invoke = Callable[..., Result]


@pytest.fixture
def npa(request: pytest.FixtureRequest) -> Invoke:
    """The CLI; with the ``cluster`` fixture it is injected, else the real kubeconfig is read."""
    runner = CliRunner()
    given = (
        Services(gpu_cluster=request.getfixturevalue("cluster"))
        if "cluster" in request.fixturenames
        else None
    )

    def invoke(*args: object) -> Result:
        return runner.invoke(
            app, ["workbench", "workflow", *map(str, args)], obj=given, catch_exceptions=False
        )

    return invoke


def spec_file(tmp_path: Path, count: int = 1) -> Path:
    path = tmp_path / f"gpu-{count}.yaml"
    path.write_text(GPU_SPEC.format(count=count), encoding="utf-8")
    return path


def stdout_json(result: Result) -> Any:
    return json.loads(result.stdout)


# -- gpus ------------------------------------------------------------------------------


def test_gpus_json_exact_shape_exit_0(npa: Invoke, cluster: Installed) -> None:
    result = npa("gpus", "--cluster", CTX, "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert set(payload) == {"status", "context", "accelerators", "not_yet_labelled"}
    assert payload["status"] == "ok"
    assert payload["context"] == CTX
    assert payload["not_yet_labelled"] == ["gpu-b"]
    (acc,) = payload["accelerators"]
    assert set(acc) == ACCELERATOR_KEYS
    assert (acc["name"], acc["canonical"], acc["label_key"]) == (
        RTXPRO,
        "rtxpro6000blackwellserveredition",
        GFD,
    )
    assert acc["requestable_qty_per_node"] == 1
    assert all(set(n) == NODE_KEYS for n in acc["nodes"])
    assert {n["name"]: n["reason"] for n in acc["nodes"]} == {"gpu-a": None, "gpu-c": "cordoned"}
    assert cluster.asked == [CTX]


def test_gpus_context_alias_same_catalog(npa: Invoke, cluster: Installed) -> None:
    result = npa("gpus", "--context", CTX, "--json")

    assert result.exit_code == 0
    assert stdout_json(result)["context"] == CTX


def test_gpus_text_table_and_not_yet_labelled(npa: Invoke, cluster: Installed) -> None:
    result = npa("gpus", "--cluster", CTX)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"context: {CTX}"
    assert any(line.startswith("ACCELERATOR") and "QTY/NODE" in line for line in lines)
    assert any(line.startswith(RTXPRO) and " 1 " in line and "1/2" in line for line in lines)
    assert "gpu-c" in result.stdout and "cordoned" in result.stdout
    assert "not yet labelled (invisible to SkyPilot): gpu-b" in result.stdout


def test_gpus_spec_json_steps_remapped_exit_0(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = npa("gpus", "--cluster", CTX, "--spec", spec_file(tmp_path), "--json")

    assert result.exit_code == 0, result.stderr
    (step,) = stdout_json(result)["steps"]
    assert {k: step[k] for k in ("state", "requested", "resolved", "verdict")} == {
        "state": "train",
        "requested": "RTXPRO6000:1",
        "resolved": f"{RTXPRO}:1",
        "verdict": "remapped",
    }


def test_gpus_spec_text_shows_remap_arrow(npa: Invoke, cluster: Installed, tmp_path: Path) -> None:
    result = npa("gpus", "--cluster", CTX, "--spec", spec_file(tmp_path))

    assert result.exit_code == 0
    assert f"step train: RTXPRO6000:1: remapped → {RTXPRO}" in result.stdout


def test_gpus_spec_exceeds_per_node_exit_1(npa: Invoke, cluster: Installed, tmp_path: Path) -> None:
    result = npa("gpus", "--cluster", CTX, "--spec", spec_file(tmp_path, 8), "--json")

    assert result.exit_code == 1
    assert stdout_json(result)["status"] == "refused"
    (step,) = stdout_json(result)["steps"]
    assert step["verdict"] == "exceeds_per_node"
    assert step["resolved"] is None
    assert "at most 1" in step["message"]


def test_gpus_node_listing_forbidden_exit_1_error_on_stderr(
    npa: Invoke, cluster: Installed
) -> None:
    cluster.cluster.fail_on["nodes"] = kube_error(
        KubeErrorKind.FORBIDDEN, "nodes is forbidden", 403
    )

    result = npa("gpus", "--cluster", CTX)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Error: nodes is forbidden" in result.stderr


def test_gpus_unknown_context_exit_1_lists_contexts(
    npa: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncontexts:\n- name: alpha\n  context: {cluster: c, user: u}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("KUBECONFIG", str(config))

    result = npa("gpus", "--cluster", "missing", "--json")

    assert result.exit_code == 1
    payload = stdout_json(result)
    assert payload["error"]["category"] == "kubernetes"
    assert "alpha" in payload["error"]["message"]


def test_gpus_missing_cluster_usage_error_exit_64(npa: Invoke) -> None:
    result = npa("gpus", "--json")

    assert result.exit_code == 64
    assert not result.stdout.strip().startswith("{")


# -- submit: accelerator resolution ----------------------------------------------------------


def _submit(npa: Invoke, spec: Path, tmp_path: Path, *extra: object) -> Result:
    return npa(
        "submit", spec, "--plan-only", "--run-id", "gpu-1", "--render-dir", tmp_path / "out", *extra
    )


def _rendered_accelerators(tmp_path: Path) -> list[str]:
    (path,) = (tmp_path / "out" / "gpu-1").glob("*.yaml")
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    return [d["resources"].get("accelerators") for d in docs[1:]]


def test_submit_plan_only_json_shows_remap_and_renders_cluster_name(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = _submit(npa, spec_file(tmp_path), tmp_path, "--infra", f"k8s/{CTX}", "--json")

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert payload["accelerators"] == [
        {
            "state": "train",
            "requested": "RTXPRO6000:1",
            "resolved": f"{RTXPRO}:1",
            "verdict": "remapped",
        }
    ]
    assert payload["accelerator_resolution"]["status"] == "resolved"
    assert payload["plan"]["steps"][0]["resources_profile"]["accelerators"] == "RTXPRO6000:1"
    assert _rendered_accelerators(tmp_path) == [f"{RTXPRO}:1", None]
    assert cluster.asked == [CTX]


def test_submit_plan_only_text_shows_remap(npa: Invoke, cluster: Installed, tmp_path: Path) -> None:
    result = _submit(npa, spec_file(tmp_path), tmp_path, "--infra", f"k8s/{CTX}")

    assert result.exit_code == 0, result.stderr
    assert f"accelerator train: RTXPRO6000:1 -> {RTXPRO}:1 (remapped → {RTXPRO})" in result.stdout


def test_submit_exceeds_per_node_exit_1_names_quantity(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = _submit(npa, spec_file(tmp_path, 2), tmp_path, "--infra", f"k8s/{CTX}")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"at most 1 {RTXPRO} GPU(s) per node" in result.stderr
    assert f"npa workbench workflow gpus --cluster {CTX}" in result.stderr
    assert not (tmp_path / "out").exists()


def test_submit_exceeds_per_node_json_error_category_preflight(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = _submit(npa, spec_file(tmp_path, 2), tmp_path, "--infra", f"k8s/{CTX}", "--json")

    assert result.exit_code == 1
    payload = stdout_json(result)
    assert payload["error"]["category"] == "preflight"
    assert payload["run_id"] == "gpu-1"
    assert payload["launch_transaction"] is None


def test_submit_live_exceeds_refused_before_launch_check(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = npa("submit", spec_file(tmp_path, 2), "--infra", f"k8s/{CTX}")

    assert result.exit_code == 1
    assert "per node" in result.stderr
    assert "not available" not in result.stderr


def test_submit_no_resolve_accelerators_verbatim_no_cluster(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = _submit(
        npa,
        spec_file(tmp_path, 2),
        tmp_path,
        "--infra",
        f"k8s/{CTX}",
        "--no-resolve-accelerators",
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    payload = stdout_json(result)
    assert payload["accelerators"] == []
    assert payload["accelerator_resolution"]["status"] == "skipped"
    assert _rendered_accelerators(tmp_path) == ["RTXPRO6000:2", None]
    assert cluster.asked == []


def test_submit_without_infra_no_cluster_contacted(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    result = _submit(npa, spec_file(tmp_path), tmp_path, "--json")

    assert result.exit_code == 0, result.stderr
    assert stdout_json(result)["accelerators"] == []
    assert _rendered_accelerators(tmp_path) == ["RTXPRO6000:1", None]
    assert cluster.asked == []


def test_submit_gpu_env_override_wins_no_cluster(
    npa: Invoke, cluster: Installed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_WORKFLOW_GPU_ACCELERATOR", "B200")

    result = _submit(npa, spec_file(tmp_path), tmp_path, "--infra", f"k8s/{CTX}", "--json")

    assert result.exit_code == 0, result.stderr
    assert "NPA_WORKFLOW_GPU_ACCELERATOR" in stdout_json(result)["accelerator_resolution"]["reason"]
    assert _rendered_accelerators(tmp_path) == ["B200:1", None]
    assert cluster.asked == []


def test_submit_no_execute_taint_only_node_exit_1(
    npa: Invoke, cluster: Installed, tmp_path: Path
) -> None:
    taint = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
    fake = FakeCluster(CTX, [gpu_node("g", {NEBIUS: "RTX6000"}, 8, taints=[taint])])
    cluster.cluster = fake

    result = _submit(npa, spec_file(tmp_path), tmp_path, "--infra", f"k8s/{CTX}")

    assert result.exit_code == 1
    assert "per-node quantity 0" in result.stderr
