"""The per-context GPU catalog (kubernetes.md §8): eligibility, names, quantities, the race."""

from __future__ import annotations

import pytest

from npa_infra.gpus import catalog
from npa_infra.kube.models import NodeInfo, Taint

GFD = "nvidia.com/gpu.product"
NEBIUS = "nebius.com/gpu-name"
RTXPRO_RAW = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"


def node(
    name: str,
    labels: dict[str, str] | None = None,
    gpus: int = 1,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
) -> NodeInfo:
    return NodeInfo(name, labels or {}, taints, ready, unschedulable, gpus)


def test_build_labelling_race_nebius_only_nodes_not_yet_labelled() -> None:
    nodes = [
        node("gpu-a", {NEBIUS: "RTX6000", GFD: RTXPRO_RAW}),
        node("gpu-b", {NEBIUS: "RTX6000"}),
    ]

    cat = catalog.build("nebius-prod", nodes)

    assert cat.names == (RTXPRO,)
    assert cat.not_yet_labelled == ("gpu-b",)
    assert cat.label_key == GFD
    assert [n.name for n in cat.accelerators[0].nodes] == ["gpu-a"]


def test_build_nebius_label_only_cluster_emits_rtx6000() -> None:
    cat = catalog.build("c", [node("gpu-a", {NEBIUS: "RTX6000"}, 8)])

    assert cat.names == ("RTX6000",)
    assert cat.accelerators[0].label_key == NEBIUS
    assert cat.accelerators[0].requestable_qty_per_node == 8
    assert cat.not_yet_labelled == ()


def test_build_gfd_value_canonicalised_raw_value_kept() -> None:
    cat = catalog.build("c", [node("h", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8)])

    acc = cat.accelerators[0]
    assert (acc.name, acc.canonical, acc.label_key, acc.label_value) == (
        "H100-80GB",
        "h10080gb",
        GFD,
        "NVIDIA-H100-80GB-HBM3",
    )


def test_build_cordoned_8_gpu_node_not_counted() -> None:
    nodes = [
        node("small", {GFD: "NVIDIA-H100-80GB-HBM3"}, 1),
        node("big", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8, unschedulable=True),
    ]

    acc = catalog.build("c", nodes).accelerators[0]

    assert acc.requestable_qty_per_node == 1
    big = next(n for n in acc.nodes if n.name == "big")
    assert (big.gpus, big.eligible, big.reason) == (8, False, "cordoned")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"ready": False}, "NotReady"),
        ({"unschedulable": True}, "cordoned"),
        (
            {"taints": (Taint("node.kubernetes.io/unreachable", "", "NoExecute"),)},
            "NoExecute taint node.kubernetes.io/unreachable",
        ),
        ({"taints": (Taint("dedicated", "infra", "NoSchedule"),)}, "NoSchedule taint dedicated"),
        ({"gpus": 0}, "no allocatable nvidia.com/gpu"),
    ],
    ids=["not-ready", "cordoned", "no-execute", "foreign-no-schedule", "no-gpus"],
)
def test_node_reason_ineligible_named(kwargs: dict[str, object], reason: str) -> None:
    subject = node("n", {GFD: "NVIDIA-B200"}, **kwargs)  # type: ignore[arg-type]  # kwargs mix int, bool and tuples

    assert catalog.node_reason(subject) == reason


@pytest.mark.parametrize(
    "taint",
    [
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("spot", "true", "PreferNoSchedule"),
    ],
    ids=["gpu-taint", "prefer-no-schedule"],
)
def test_node_reason_tolerated_taint_eligible(taint: Taint) -> None:
    assert catalog.node_reason(node("n", {GFD: "NVIDIA-B200"}, 8, taints=(taint,))) is None


def test_node_reason_several_failures_all_listed() -> None:
    subject = node("n", gpus=0, ready=False, unschedulable=True)

    assert catalog.node_reason(subject) == "NotReady; cordoned; no allocatable nvidia.com/gpu"


def test_build_no_execute_node_only_per_node_quantity_zero() -> None:
    taint = Taint("node.kubernetes.io/not-ready", "", "NoExecute")
    acc = catalog.build("c", [node("n", {GFD: "NVIDIA-B200"}, 8, taints=(taint,))]).accelerators[0]

    assert acc.requestable_qty_per_node == 0
    assert acc.nodes[0].eligible is False


def test_build_per_node_quantity_largest_eligible_allocatable() -> None:
    nodes = [node(f"n{g}", {GFD: "NVIDIA-B200"}, g) for g in (1, 4, 2)]

    assert catalog.build("c", nodes).accelerators[0].requestable_qty_per_node == 4


def test_build_same_name_two_raw_values_two_entries() -> None:
    nodes = [
        node("a", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8),
        node("b", {GFD: "NVIDIA-H100-SXM5-80GB"}, 4),
    ]

    cat = catalog.build("c", nodes)

    assert [(a.name, a.label_value) for a in cat.accelerators] == [
        ("H100-80GB", "NVIDIA-H100-80GB-HBM3"),
        ("H100-80GB", "NVIDIA-H100-SXM5-80GB"),
    ]
    assert cat.names == ("H100-80GB",)


def test_build_cpu_nodes_ignored_unlabelled_gpu_node_reported() -> None:
    nodes = [
        node("cpu", {"kubernetes.io/os": "linux"}, 0),
        node("gpu", {GFD: "NVIDIA-B200"}, 8),
        node("bare-gpu", {}, 8),
    ]

    cat = catalog.build("c", nodes)

    assert cat.not_yet_labelled == ("bare-gpu",)
    assert [n.name for n in cat.accelerators[0].nodes] == ["gpu"]


def test_build_no_gpu_labels_no_accelerators() -> None:
    cat = catalog.build("c", [node("gpu", {"nebius.com/gpu": "gpu-h100-sxm"}, 8)])

    assert cat.accelerators == ()
    assert cat.label_key is None
    assert cat.not_yet_labelled == ("gpu",)


def test_catalog_to_json_exact_shape() -> None:
    cat = catalog.build("ctx", [node("n", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8)])

    assert cat.to_json() == {
        "context": "ctx",
        "accelerators": [
            {
                "name": "H100-80GB",
                "canonical": "h10080gb",
                "label_key": GFD,
                "label_value": "NVIDIA-H100-80GB-HBM3",
                "requestable_qty_per_node": 8,
                "nodes": [{"name": "n", "gpus": 8, "eligible": True, "reason": None}],
            }
        ],
        "not_yet_labelled": [],
    }
