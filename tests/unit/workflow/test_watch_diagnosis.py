"""Supervision's pod diagnosis (``watch.diagnose_job``) judges GPU shapes against what the
context could ever offer (kubernetes.md §6.3 row 7): an impossible shape is permanent, a
shape only blocked by NotReady, cordoned or tainted nodes is not."""

from __future__ import annotations

import pytest

from npa_infra.kube import pending
from npa_infra.kube.models import NodeInfo, PodCondition, PodObservation, Taint
from npa_infra.kube.pending import PendingCode
from npa_infra.workflow.supervision import watch
from tests.support.fakecluster import FakeCluster, gpu_node

GFD = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"
JOB = 7
GPU_SHORT = (
    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
    "available: 2 No preemption victims found for incoming pod."
)
NOT_READY = Taint("node.kubernetes.io/not-ready", "", "NoExecute")


def _pod(gpus: int, product: str = H100) -> PodObservation:
    return PodObservation(
        name=f"train-{JOB}-ab12-head",
        namespace="default",
        labels=((pending.CLUSTER_LABEL, f"train-{JOB}-ab12"),),
        conditions=(PodCondition("PodScheduled", "False", "Unschedulable", GPU_SHORT),),
        gpu_request=gpus,
        gpu_selector=((GFD, product),),
    )


def _diagnose(nodes: list[NodeInfo], pod: PodObservation) -> str:
    cluster = FakeCluster("ctx", node_list=nodes, pod_list=[pod])
    found = watch.diagnose_job(cluster, JOB, [])
    assert found is not None
    return str(found["code"])


@pytest.mark.parametrize(
    ("nodes", "gpus", "product", "code"),
    [
        pytest.param(
            [gpu_node("g0", {GFD: H100}, 8), gpu_node("g1", {GFD: H100}, 8)],
            16,
            H100,
            PendingCode.GPU_SHAPE_IMPOSSIBLE,
            id="more-gpus-than-any-node",
        ),
        pytest.param(
            [gpu_node("g0", {GFD: H100}, 8)],
            1,
            "NVIDIA-B200",
            PendingCode.GPU_SHAPE_IMPOSSIBLE,
            id="product-no-node-carries",
        ),
        pytest.param(
            [gpu_node("g0", {GFD: H100}, 8, ready=False, taints=[NOT_READY])],
            8,
            H100,
            PendingCode.CAPACITY_OR_QUOTA,
            id="only-fitting-node-not-ready-is-not-impossible",
        ),
        pytest.param(
            [gpu_node("g0", {GFD: H100}, 8, unschedulable=True), gpu_node("g1", {GFD: H100}, 4)],
            8,
            H100,
            PendingCode.CAPACITY_OR_QUOTA,
            id="only-fitting-node-cordoned-is-not-impossible",
        ),
        pytest.param(
            [gpu_node("g0", {GFD: H100}, 8)],
            8,
            H100,
            PendingCode.CAPACITY_OR_QUOTA,
            id="fits-a-node-busy-now",
        ),
    ],
)
def test_diagnose_job_gpu_shape_against_every_labelled_node(
    nodes: list[NodeInfo], gpus: int, product: str, code: PendingCode
) -> None:
    assert _diagnose(nodes, _pod(gpus, product)) == code.value


def test_capacity_catalog_counts_transiently_ineligible_nodes() -> None:
    nodes = [
        gpu_node("g0", {GFD: H100}, 8, ready=False, taints=[NOT_READY]),
        gpu_node("g1", {GFD: H100}, 8, unschedulable=True),
    ]

    shapes = watch.capacity_catalog("ctx", nodes)

    assert [a.requestable_qty_per_node for a in shapes.accelerators] == [8]
    assert shapes.context == "ctx"


def test_diagnose_job_reads_pods_and_nodes_once_per_tick() -> None:
    cluster = FakeCluster("ctx", node_list=[gpu_node("g0", {GFD: H100}, 8)], pod_list=[_pod(16)])

    watch.diagnose_job(cluster, JOB, [])

    assert cluster.calls == ["job_pods", "nodes"]
