"""``KubeApi.job_pods`` and the pending diagnosis against the Kubernetes API double (kubernetes.md §6).

Real HTTPS from the official client to the in-process double: pods carry
SkyPilot's ``skypilot-cluster-name`` label in two namespaces, with ids that
share a prefix (jobs 1 and 12), and the double's own scheduler and kubelet
controls give them real Unschedulable conditions, waiting reasons and events.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import pytest

from npa_infra.errors import KubeError
from npa_infra.gpus import catalog as gpu_catalog
from npa_infra.kube import failures, pending
from npa_infra.kube.client import KubeApi
from npa_infra.kube.models import KubeErrorKind
from npa_infra.kube.pending import BlockerClass, PendingCode
from tests.integration.kube.apihelpers import IMAGE, pod_body
from tests.support.fakekube import FakeKube

LABEL = pending.CLUSTER_LABEL
H100 = "NVIDIA-H100-80GB-HBM3"


def job_pod(
    name: str, cluster: str, *, gpus: int = 0, product: str | None = None
) -> dict[str, Any]:
    body = pod_body(name, labels={LABEL: cluster, "skypilot-user": "tester"})
    container = body["spec"]["containers"][0]
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if product:
        term = {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}
            ]
        }
        body["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return body


@pytest.fixture
def cluster(fake_kube: FakeKube) -> FakeKube:
    """Job 1 in team-a, job 12 in team-b, a controller pod, an unlabelled pod; two nodes."""
    fake_kube.add_node("cpu-0", cpu="4")
    fake_kube.add_node("gpu-0", gpus=1, labels={"nvidia.com/gpu.product": H100})
    fake_kube.create("pods", "team-a", job_pod("t-1-ab-head", "t-1-ab", gpus=8, product=H100))
    fake_kube.create("pods", "team-b", job_pod("t-12-ab-head", "t-12-ab"))
    fake_kube.create(
        "pods", "team-a", job_pod("sky-jobs-controller-ab-ray-head", "sky-jobs-controller-ab")
    )
    fake_kube.create("pods", "team-a", pod_body("unrelated-1"))
    return fake_kube


def api(fake: FakeKube, context: str = "fake-a") -> KubeApi:
    return KubeApi(fake.kubeconfig, context)


@pytest.mark.parametrize(
    ("job_id", "cluster_name", "namespace", "expected"),
    [
        (1, None, None, ["team-a/t-1-ab-head"]),
        (12, None, None, ["team-b/t-12-ab-head"]),
        (12, "t-12-ab", None, ["team-b/t-12-ab-head"]),
        (1, "t-1-ab", "team-a", ["team-a/t-1-ab-head"]),
        (12, None, "team-a", []),
        (2, None, None, []),
    ],
    ids=["bare-key-1", "bare-key-12", "cluster-name", "namespaced", "wrong-namespace", "absent"],
)
def test_job_pods_selection_exact_job(
    cluster: FakeKube,
    job_id: int,
    cluster_name: str | None,
    namespace: str | None,
    expected: list[str],
) -> None:
    with api(cluster) as kube:
        pods = kube.job_pods(job_id, cluster_name=cluster_name, namespace=namespace)

    assert [p.ref for p in pods] == expected
    assert cluster.calls(user="ambient") == []


def test_job_pods_selector_sent_to_server(cluster: FakeKube) -> None:
    with api(cluster) as kube:
        kube.job_pods(12, cluster_name="t-12-ab")
        kube.job_pods(1)

    selectors = [
        parse_qs(r.query)["labelSelector"] for r in cluster.calls("GET") if r.path == "/api/v1/pods"
    ]
    assert selectors == [["skypilot-cluster-name=t-12-ab"], ["skypilot-cluster-name"]]


def test_job_pods_unschedulable_gpu_shape_impossible_with_catalog(cluster: FakeKube) -> None:
    assert cluster.schedule_pod("t-1-ab-head") is None  # the double's scheduler: Insufficient GPUs

    with api(cluster) as kube:
        pods = kube.job_pods(1)
        nodes = kube.nodes()
    catalog = gpu_catalog.build("fake-a", nodes)
    with_catalog = pending.diagnose(pods, job_id=1, catalog=catalog)
    text_only = pending.diagnose(pods, job_id=1)

    (observed,) = pods
    assert (observed.gpu_request, observed.gpu_selector) == (8, (("nvidia.com/gpu.product", H100),))
    assert observed.condition("PodScheduled") is not None
    assert "Insufficient nvidia.com/gpu" in with_catalog.message
    assert (with_catalog.code, with_catalog.blocker_class) == (
        PendingCode.GPU_SHAPE_IMPOSSIBLE,
        BlockerClass.PERMANENT,
    )
    assert (text_only.code, text_only.blocker_class) == (
        PendingCode.ACCELERATOR_MISMATCH,
        BlockerClass.UNKNOWN,
    )
    assert any("event FailedScheduling" in line for line in with_catalog.evidence)


def test_job_pods_gpu_capacity_when_shape_fits(cluster: FakeKube) -> None:
    cluster.set_node_allocatable("gpu-0", nvidia_com_gpu="8")
    cluster.create("pods", "team-a", job_pod("hog", "other-99-zz", gpus=4, product=H100))
    cluster.schedule_pod("hog")
    assert cluster.schedule_pod("t-1-ab-head") is None

    with api(cluster) as kube:
        pods = kube.job_pods(1)
        catalog = gpu_catalog.build("fake-a", kube.nodes())

    diagnosis = pending.diagnose(pods, job_id=1, catalog=catalog)
    assert (diagnosis.code, diagnosis.blocker_class) == (
        PendingCode.CAPACITY_OR_QUOTA,
        BlockerClass.TRANSIENT,
    )


@pytest.mark.parametrize(
    ("kind", "backoff", "code"),
    [
        ("auth", True, PendingCode.IMAGE_PULL_AUTH),
        ("not_found", False, PendingCode.IMAGE_NOT_FOUND),
        ("timeout", True, PendingCode.IMAGE_PULL_FAILED),
        ("rate_limited", False, PendingCode.IMAGE_PULL_FAILED),
    ],
    ids=["auth", "not-found", "timeout", "rate-limited"],
)
def test_job_pods_image_pull_failure_code(
    cluster: FakeKube, kind: str, backoff: bool, code: PendingCode
) -> None:
    cluster.schedule_pod("t-12-ab-head", "cpu-0")
    cluster.fail_image_pull("t-12-ab-head", kind, backoff=backoff)

    with api(cluster) as kube:
        (observed,) = kube.job_pods(12)

    diagnosis = pending.diagnose([observed], job_id=12)
    assert diagnosis.code is code
    assert diagnosis.pod == "team-b/t-12-ab-head"
    assert observed.node_name == "cpu-0"
    assert [w.reason for w in observed.container_waiting] == [
        "ImagePullBackOff" if backoff else "ErrImagePull"
    ]
    assert any(e.reason == "Failed" and IMAGE in e.message for e in observed.events)
    assert all(e.type == "Warning" for e in observed.events)


def test_job_pods_missing_secret_config_reference(cluster: FakeKube) -> None:
    cluster.fail_container_config("t-12-ab-head", "hf-token")

    with api(cluster) as kube:
        diagnosis = pending.diagnose(kube.job_pods(12), job_id=12)

    assert (diagnosis.code, diagnosis.blocker_class) == (
        PendingCode.CONFIG_REFERENCE_MISSING,
        BlockerClass.PERMANENT,
    )
    assert diagnosis.message == 'secret "hf-token" not found'


def test_job_pods_running_pod_skipped_node_not_ready(cluster: FakeKube) -> None:
    cluster.start_pod("t-12-ab-head")
    cluster.set_node_ready("gpu-0", False)

    with api(cluster) as kube:
        pods = kube.job_pods(12)
        down = pending.not_ready_nodes(kube.nodes())

    diagnosis = pending.diagnose(pods, job_id=12, nodes_not_ready=down)
    assert [p.phase for p in pods] == ["Running"]
    assert pods[0].events == ()  # no event reads for a pod that cannot be blocked
    assert down == ("gpu-0",)
    assert diagnosis.code is PendingCode.NODE_NOT_READY


def test_job_pods_preempted_disruption_target(cluster: FakeKube) -> None:
    cluster.disrupt_pod("t-12-ab-head", "PreemptionByScheduler")

    with api(cluster) as kube:
        diagnosis = pending.diagnose(kube.job_pods(12), job_id=12)

    assert (diagnosis.code, diagnosis.reason) == (PendingCode.PREEMPTED, "PreemptionByScheduler")


def test_job_pods_pages_through_continue_tokens(
    cluster: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npa_infra.kube import client as kube_client

    for index in range(5):
        cluster.create("pods", "team-b", job_pod(f"t-12-ab-worker{index}", "t-12-ab"))
    monkeypatch.setattr(kube_client, "_PAGE", 2)

    with api(cluster) as kube:
        pods = kube.job_pods(12, cluster_name="t-12-ab")

    assert len(pods) == 6
    assert len([r for r in cluster.calls("GET") if r.path == "/api/v1/pods"]) == 3


@pytest.mark.parametrize(
    ("verb_resource", "kind", "code"),
    [
        (("list", "pods"), KubeErrorKind.FORBIDDEN, PendingCode.KUBERNETES_RBAC),
        (("list", "events"), KubeErrorKind.FORBIDDEN, PendingCode.KUBERNETES_RBAC),
    ],
    ids=["pods-forbidden", "events-forbidden"],
)
def test_job_pods_rbac_denied_translated(
    cluster: FakeKube, verb_resource: tuple[str, str], kind: KubeErrorKind, code: PendingCode
) -> None:
    cluster.deny("fake-a", *verb_resource)

    with api(cluster) as kube, pytest.raises(KubeError) as caught:
        kube.job_pods(12)

    assert failures.kind_of(caught.value) is kind
    diagnosis = pending.diagnostic_failure(kind, caught.value.message, job_id=12)
    assert (diagnosis.code, diagnosis.blocker_class) == (code, None)


def test_job_pods_server_error_translated(cluster: FakeKube) -> None:
    cluster.fail_next("GET", r"^/api/v1/pods", 503)

    with api(cluster) as kube, pytest.raises(KubeError) as caught:
        kube.job_pods(1)

    assert failures.kind_of(caught.value) is KubeErrorKind.SERVER
