"""The GPU catalog, the submit-time remap and ``skypilot verify`` through the real ``KubeApi``.

Each case drives the official ``kubernetes`` client (via ``npa_infra.kube``)
against the in-process API double (kubernetes.md §10), with nodes labelled
the way the NVIDIA GPU operator and Nebius label them. Time never passes
for real: ``verify`` gets a fake clock, and the double answers at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.skypilot import verify
from npa_infra.skypilot.checkoutput import CheckResult, CheckVerdict
from npa_infra.skypilot.models import CommandResult, ErrorKind
from npa_infra.skypilot.status import ApiServerState, StatusReport
from npa_infra.workflow.planning import accelerators
from npa_infra.workflow.target import services
from tests.support.fakecluster import FakeClock
from tests.support.fakekube import FakeKube

GFD = "nvidia.com/gpu.product"
NEBIUS = "nebius.com/gpu-name"
RTXPRO_RAW = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"
Invoke = Callable[..., Result]
# The registry check has its own tests (tests/integration/preflight); these stay offline.
SUBMIT = (
    "workbench",
    "workflow",
    "submit",
    "--plan-only",
    "--no-preflight-images",
    "--infra",
    "k8s/fake-a",
)

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: gpu-train}}
config: {{bucket: example-bucket}}
resources:
  gpu:
    cloud: kubernetes
    accelerators: RTXPRO6000:{count}
    cpus: 8
    memory: 32Gi
    image: nvcr.io/nvidia/pytorch:24.01-py3
states:
  train:
    run: {{shell: python train.py}}
    resources: gpu
    terminal: true
"""


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    fake = FakeKube.start(tmp_path / "kube")
    monkeypatch.setenv("KUBECONFIG", str(fake.kubeconfig))
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    for name in ("NPA_WORKFLOW_GPU_ACCELERATOR", "NPA_TOOL_CATALOG", "NPA_SRC_S3_URI"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def race(kube: FakeKube) -> FakeKube:
    """The labelling race: one node fully labelled, one still Nebius-only, plus the awkward ones."""
    kube.add_node("gpu-a", labels={NEBIUS: "RTX6000", GFD: RTXPRO_RAW}, gpus=1)
    kube.add_node("gpu-b", labels={NEBIUS: "RTX6000"}, gpus=1)
    kube.add_node("gpu-cordoned", labels={GFD: RTXPRO_RAW}, gpus=8, unschedulable=True)
    kube.add_node(
        "gpu-evicting",
        labels={GFD: RTXPRO_RAW},
        gpus=4,
        taints=[{"key": "maintenance", "value": "true", "effect": "NoExecute"}],
    )
    kube.add_node("cpu-a", labels={"node-role": "cpu"})
    return kube


@pytest.fixture
def npa() -> Invoke:
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(app, [*map(str, args)], catch_exceptions=False)

    return invoke


def _nodes(payload: Mapping[str, object]) -> dict[str, tuple[int, bool, str | None]]:
    (acc,) = payload["accelerators"]  # type: ignore[misc]  # JSON document
    return {n["name"]: (n["gpus"], n["eligible"], n["reason"]) for n in acc["nodes"]}


def test_gpus_real_client_race_catalog(race: FakeKube) -> None:
    report = accelerators.gpus("fake-a")

    payload = report.to_json()
    assert payload["context"] == "fake-a"
    assert payload["not_yet_labelled"] == ["gpu-b"]
    (acc,) = payload["accelerators"]
    assert (acc["name"], acc["label_key"], acc["label_value"]) == (RTXPRO, GFD, RTXPRO_RAW)
    assert acc["requestable_qty_per_node"] == 1
    assert _nodes(payload) == {
        "gpu-a": (1, True, None),
        # A cordon also carries the node controller's unschedulable taint.
        "gpu-cordoned": (8, False, "cordoned; NoSchedule taint node.kubernetes.io/unschedulable"),
        "gpu-evicting": (4, False, "NoExecute taint maintenance"),
    }
    assert race.calls(user="ambient") == []


def test_gpus_cli_json_real_client(race: FakeKube, npa: Invoke) -> None:
    result = npa("workbench", "workflow", "gpus", "--cluster", "fake-a", "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "context", "accelerators", "not_yet_labelled"}
    assert payload["accelerators"][0]["requestable_qty_per_node"] == 1


def test_gpus_labelling_completes_node_joins_catalog(race: FakeKube) -> None:
    race.set_node_labels("gpu-b", {GFD: RTXPRO_RAW})

    payload = accelerators.gpus("fake-a").to_json()

    assert payload["not_yet_labelled"] == []
    assert "gpu-b" in _nodes(payload)


def test_gpus_uncordon_raises_per_node_quantity(race: FakeKube) -> None:
    race.cordon("gpu-cordoned", False)

    payload = accelerators.gpus("fake-a").to_json()

    assert payload["accelerators"][0]["requestable_qty_per_node"] == 8


def test_gpus_not_ready_node_ineligible(kube: FakeKube) -> None:
    kube.add_node("gpu-x", labels={GFD: "NVIDIA-H100-80GB-HBM3"}, gpus=8, ready=False)

    payload = accelerators.gpus("fake-a").to_json()

    (acc,) = payload["accelerators"]
    assert acc["name"] == "H100-80GB"
    assert acc["requestable_qty_per_node"] == 0
    gpus, eligible, reason = _nodes(payload)["gpu-x"]
    assert (gpus, eligible) == (8, False)
    assert reason is not None and reason.startswith("NotReady")


def test_gpus_unknown_context_cli_exit_1(race: FakeKube, npa: Invoke) -> None:
    result = npa("workbench", "workflow", "gpus", "--cluster", "nope")

    assert result.exit_code == 1
    assert "fake-a" in result.stderr
    assert race.calls() == []


def test_gpus_forbidden_context_cli_exit_1(race: FakeKube, npa: Invoke) -> None:
    result = npa("workbench", "workflow", "gpus", "--cluster", "forbidden", "--json")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["category"] == "kubernetes"


def _spec(tmp_path: Path, count: int) -> Path:
    path = tmp_path / f"spec-{count}.yaml"
    path.write_text(SPEC.format(count=count), encoding="utf-8")
    return path


def test_submit_plan_only_remaps_through_real_client(
    race: FakeKube, npa: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = npa(*SUBMIT, _spec(tmp_path, 1), "--run-id", "r1", "--render-dir", out, "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["accelerators"] == [
        {
            "state": "train",
            "requested": "RTXPRO6000:1",
            "resolved": f"{RTXPRO}:1",
            "verdict": "remapped",
        }
    ]
    (path,) = (out / "r1").glob("*.yaml")
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    assert docs[1]["resources"]["accelerators"] == f"{RTXPRO}:1"
    assert race.calls("GET", r"/api/v1/nodes", user="fake-a")


def test_submit_exceeds_per_node_real_client_exit_1(
    race: FakeKube, npa: Invoke, tmp_path: Path
) -> None:
    result = npa(*SUBMIT, _spec(tmp_path, 8), "--render-dir", tmp_path / "out")

    assert result.exit_code == 1
    assert f"at most 1 {RTXPRO} GPU(s) per node" in result.stderr
    assert "npa workbench workflow gpus --cluster fake-a" in result.stderr


def _gate() -> StatusReport:
    return StatusReport(
        ok=True,
        bin_path="/venv/bin/sky",
        source=None,
        skypilot_version="0.12.2",
        python="3.11.7",
        kubernetes_client_version="35.0.0",
        fastapi_version="0.119.1",
        click_version="8.1.8",
        api_server=ApiServerState(listening=False, owner_matches=None),
        warnings=(),
        remedies=(),
    )


def _enabled() -> CheckResult:
    """SkyPilot's own check agreeing (tests/integration/skypilot/test_verify_sim.py runs it)."""
    command = CommandResult(("sky", "check", "kubernetes"), 0, "", "")
    endpoint = "http://127.0.0.1:46580"
    return CheckResult(
        "kubernetes", CheckVerdict.ENABLED, "", (), endpoint, ErrorKind.NONE, "", command
    )


def _verify(context: str) -> verify.VerifyReport:
    clock = FakeClock()
    return verify.verify(
        context,
        cluster_factory=services.open_cluster,
        status_probe=lambda _env: _gate(),
        clock=clock,
        sleep=clock.sleep,
        sky_check=_enabled,
        which=lambda name: f"/usr/bin/{name}",
    )


def test_verify_real_client_ok_default_service_account_absent(kube: FakeKube) -> None:
    report = _verify("fake-a")

    assert report.status == "ok", report.checks
    assert (report.namespace, report.service_account) == ("team-a", "skypilot-service-account")
    assert report.readiness.state == "ready"
    assert len(report.readiness.samples) == 3
    assert kube.calls(user="ambient") == []


def test_verify_real_client_service_account_present(kube: FakeKube) -> None:
    kube.add_service_account("team-a", "skypilot-service-account")

    check = next(c for c in _verify("fake-a").checks if c.name == "service_account")

    assert check.ok is True
    assert check.detail.endswith("exists")


def test_verify_real_client_context_without_namespace_uses_default(kube: FakeKube) -> None:
    report = _verify("fake-default")

    assert report.namespace == "default"
    assert report.status == "ok"


def test_verify_real_client_forbidden_namespace_check_fails(kube: FakeKube) -> None:
    report = _verify("forbidden")

    by_name = {c.name: c for c in report.checks}
    assert by_name["readiness"].ok is True
    assert by_name["namespace"].ok is False
    assert report.status == "failed"


def test_verify_real_client_bad_token_readiness_terminal(kube: FakeKube) -> None:
    report = _verify("bad-token")

    assert report.readiness.state == "terminal"
    assert report.readiness.samples[0]["status"] == 401
    assert report.exit_code == 1


def test_verify_real_client_readyz_500_resets_then_ready(kube: FakeKube) -> None:
    kube.script_readyz([200, 500, 200, 200, 200])

    report = _verify("fake-a")

    assert report.readiness.state == "ready"
    assert [s["classification"] for s in report.readiness.samples] == [
        "ok",
        "transient",
        "ok",
        "ok",
        "ok",
    ]
