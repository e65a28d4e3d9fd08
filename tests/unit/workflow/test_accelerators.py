"""The submit-time GPU remap and the ``gpus`` SDK call against a fake cluster (runtime-reference.md §14)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from npa_infra.errors import KubeError, PreflightError, SpecError
from npa_infra.gpus.resolve import Verdict
from npa_infra.kube.base import KubeCluster
from npa_infra.kube.models import KubeErrorKind
from npa_infra.plan.model import Plan, PlanStep
from npa_infra.workflow.planning import accelerators
from npa_infra.workflow.target import services
from npa_infra.workflow.target.services import Services
from tests.support.fakecluster import FakeCluster, gpu_node, kube_error

GFD = "nvidia.com/gpu.product"
NEBIUS = "nebius.com/gpu-name"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"


def _step(state: str, accelerators_value: object, cloud: str = "kubernetes") -> PlanStep:
    profile = {"cloud": cloud, "accelerators": accelerators_value, "cpus": 8}
    return PlanStep(state, None, "", "", (), "echo", "", "gpu", profile, (), ())


def _plan(*steps: PlanStep) -> Plan:
    return Plan("wf", "npa.workflow/v0.0.1", steps[0].state, "run-1", "", steps)


def _race_cluster(context: str = "nebius-prod") -> FakeCluster:
    return FakeCluster(
        context,
        [
            gpu_node(
                "gpu-a", {NEBIUS: "RTX6000", GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}
            ),
            gpu_node("gpu-b", {NEBIUS: "RTX6000"}),
        ],
    )


class Factory:
    """A cluster factory that hands out one fake and records the contexts asked for."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.asked: list[str] = []

    def __call__(self, context: str, env: Mapping[str, str]) -> KubeCluster:
        self.asked.append(context)
        return self.cluster


def test_resolve_for_plan_remaps_and_rewrites_profiles() -> None:
    factory = Factory(_race_cluster())
    plan = _plan(_step("train", "RTXPRO6000:1"), _step("eval", {"RTX6000": 1}))

    out = accelerators.resolve_for_plan(
        plan, infra="k8s/nebius-prod", enabled=True, env={}, services=Services(gpu_cluster=factory)
    )

    assert out.status == "resolved"
    assert factory.asked == ["nebius-prod"]
    assert factory.cluster.closed
    assert out.to_json() == [
        {
            "state": "train",
            "requested": "RTXPRO6000:1",
            "resolved": f"{RTXPRO}:1",
            "verdict": "remapped",
        },
        {
            "state": "eval",
            "requested": "RTX6000:1",
            "resolved": f"{RTXPRO}:1",
            "verdict": "remapped",
        },
    ]
    assert out.plan.steps[0].resources_profile["accelerators"] == f"{RTXPRO}:1"
    assert out.plan.steps[1].resources_profile["accelerators"] == {RTXPRO: 1}
    assert plan.steps[0].resources_profile["accelerators"] == "RTXPRO6000:1"


@pytest.mark.parametrize(
    ("infra", "enabled", "env", "reason"),
    [
        (None, True, {}, "no --infra k8s/<context>"),
        ("k8s/", True, {}, "no --infra k8s/<context>"),
        ("nebius", True, {}, "no --infra k8s/<context>"),
        ("k8s/nebius-prod", False, {}, "--no-resolve-accelerators"),
        (
            "k8s/nebius-prod",
            True,
            {"NPA_WORKFLOW_GPU_ACCELERATOR": "B200"},
            "NPA_WORKFLOW_GPU_ACCELERATOR",
        ),
    ],
    ids=["no-infra", "empty-context", "not-k8s", "disabled", "env-override"],
)
def test_resolve_for_plan_skip_conditions_no_cluster_contacted(
    infra: str | None, enabled: bool, env: dict[str, str], reason: str
) -> None:
    factory = Factory(_race_cluster())
    plan = _plan(_step("train", "RTXPRO6000:1"))

    out = accelerators.resolve_for_plan(
        plan, infra=infra, enabled=enabled, env=env, services=Services(gpu_cluster=factory)
    )

    assert (out.status, out.plan) == ("skipped", plan)
    assert reason in out.reason
    assert factory.asked == []


def test_resolve_for_plan_no_gpu_step_no_cluster_contacted() -> None:
    factory = Factory(_race_cluster())
    plan = _plan(_step("vm", "RTXPRO6000:1", cloud="nebius"))

    out = accelerators.resolve_for_plan(
        plan, infra="k8s/nebius-prod", enabled=True, env={}, services=Services(gpu_cluster=factory)
    )

    assert (out.status, out.reason) == ("skipped", "no Kubernetes GPU step")
    assert factory.asked == []


def test_resolve_for_plan_exceeds_per_node_preflight_error_names_quantity() -> None:
    factory = Factory(_race_cluster())
    plan = _plan(_step("train", "RTXPRO6000:2"))

    with pytest.raises(PreflightError) as caught:
        accelerators.resolve_for_plan(
            plan,
            infra="k8s/nebius-prod",
            enabled=True,
            env={},
            services=Services(gpu_cluster=factory),
        )

    err = caught.value
    assert err.exit_code == 1
    assert "state 'train'" in err.message
    assert f"at most 1 {RTXPRO} GPU(s) per node" in err.message
    assert "npa workbench workflow gpus --cluster nebius-prod" in err.message
    assert err.remedy == f"request {RTXPRO}:1 or fewer per step"
    assert err.details["accelerators"][0]["verdict"] == "exceeds_per_node"  # type: ignore[index]  # details is JSON


def test_resolve_for_plan_several_failures_all_named() -> None:
    factory = Factory(_race_cluster())
    plan = _plan(_step("train", "H100:1"), _step("eval", "RTXPRO6000:4"))

    with pytest.raises(PreflightError) as caught:
        accelerators.resolve_for_plan(
            plan,
            infra="k8s/nebius-prod",
            enabled=True,
            env={},
            services=Services(gpu_cluster=factory),
        )

    assert "2 GPU requests cannot run on context 'nebius-prod'" in caught.value.message
    assert "'train' H100:1" in caught.value.message
    assert "--no-resolve-accelerators" in caught.value.remedy


def test_resolve_for_plan_node_listing_failure_kube_error_propagates() -> None:
    cluster = _race_cluster()
    cluster.fail_on["nodes"] = kube_error(KubeErrorKind.FORBIDDEN, "nodes is forbidden", 403)

    with pytest.raises(KubeError, match="forbidden"):
        accelerators.resolve_for_plan(
            _plan(_step("train", "RTXPRO6000:1")),
            infra="k8s/nebius-prod",
            enabled=True,
            env={},
            services=Services(gpu_cluster=Factory(cluster)),
        )
    assert cluster.closed


def test_gpus_spec_steps_verdicts(tmp_path: Path) -> None:
    spec = tmp_path / "gpu.yaml"
    spec.write_text(
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: gpu}\n"
        "resources:\n  gpu: {cloud: kubernetes, accelerators: 'RTXPRO6000:1', image: 'busybox:1'}\n"
        "states:\n  train: {run: {shell: echo}, resources: gpu, terminal: true}\n",
        encoding="utf-8",
    )

    report = accelerators.gpus(
        "nebius-prod",
        spec_path=spec,
        env={},
        services=Services(gpu_cluster=Factory(_race_cluster())),
    )

    assert report.exit_code == 0
    assert report.steps is not None
    assert report.steps[0].resolution.verdict is Verdict.REMAPPED
    assert report.to_json()["not_yet_labelled"] == ["gpu-b"]


def test_gpus_invalid_spec_checked_before_cluster(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\n", encoding="utf-8")
    factory = Factory(_race_cluster())

    with pytest.raises(SpecError):
        accelerators.gpus(
            "nebius-prod", spec_path=spec, env={}, services=Services(gpu_cluster=factory)
        )
    assert factory.asked == []


def test_open_gpu_cluster_unknown_context_lists_existing(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncontexts:\n"
        "- name: alpha\n  context: {cluster: c, user: u}\n"
        "- name: beta\n  context: {cluster: c, user: u}\n",
        encoding="utf-8",
    )

    with pytest.raises(KubeError) as caught:
        services.open_gpu_cluster("gamma", {"KUBECONFIG": str(config)})

    assert caught.value.exit_code == 1
    assert "alpha, beta" in caught.value.message


def test_catalogs_list_each_context_once_for_a_run() -> None:
    cluster = _race_cluster()
    factory = Factory(cluster)
    catalogs = accelerators.Catalogs({}, Services(gpu_cluster=factory))
    plan = _plan(_step("train", "RTXPRO6000:1"))

    first = accelerators.resolve_for_plan(
        plan, infra="k8s/nebius-prod", enabled=True, env={}, catalogs=catalogs
    )
    again = accelerators.resolve_for_plan(
        plan, infra="k8s/nebius-prod", enabled=True, env={}, catalogs=catalogs
    )

    assert cluster.calls.count("nodes") == 1
    assert factory.asked == ["nebius-prod"]
    assert first.mapping == again.mapping and first.status == "resolved"


def test_catalogs_failed_listing_is_not_kept() -> None:
    cluster = _race_cluster()
    cluster.fail_on["nodes"] = kube_error(KubeErrorKind.TRANSPORT, "connection refused")
    catalogs = accelerators.Catalogs({}, Services(gpu_cluster=Factory(cluster)))

    with pytest.raises(KubeError):
        catalogs("nebius-prod")
    del cluster.fail_on["nodes"]
    found = catalogs("nebius-prod")

    assert cluster.calls.count("nodes") == 2 and found.context == "nebius-prod"
