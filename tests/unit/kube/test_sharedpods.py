"""The cluster's SkyPilot pods and nodes, listed once per tick for every supervisor."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from npa_infra.errors import KubeError
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    KubeErrorKind,
    NodeInfo,
    PodCondition,
    PodEvent,
    PodObservation,
    Taint,
)
from npa_infra.kube.sharedpods import SharedPods, decode, encode, for_job

LABEL = "skypilot-cluster-name"


def _pod(name: str, cluster: str, **extra: object) -> PodObservation:
    return PodObservation(name=name, namespace="team-a", labels=((LABEL, cluster),), **extra)  # type: ignore[arg-type]


PENDING = _pod(
    "sky-7-abcd-head",
    "sky-7-abcd",
    conditions=(PodCondition("PodScheduled", "False", "Unschedulable", "0/3 nodes"),),
    container_waiting=(ContainerWaiting("main", "ImagePullBackOff", "back-off"),),
    events=(PodEvent("FailedScheduling", "0/3 nodes are available"),),
    gpu_request=8,
    gpu_selector=(("nvidia.com/gpu.product", "H100"),),
)
OTHER = _pod("sky-17-ef01-head", "sky-17-ef01")
NODE = NodeInfo(
    "n1", {"nvidia.com/gpu.product": "H100"}, (Taint("k", "v", "NoSchedule"),), True, False, 8
)


@dataclass
class CountingCluster:
    pods: list[PodObservation]
    nodes_: list[NodeInfo]
    calls: list[str] = field(default_factory=list)
    fail: KubeError | None = None

    def cluster_pods(self, **_: object) -> list[PodObservation]:
        self.calls.append("pods")
        if self.fail is not None:
            raise self.fail
        return list(self.pods)

    def nodes(self) -> list[NodeInfo]:
        self.calls.append("nodes")
        return list(self.nodes_)


def test_one_list_per_tick_serves_every_supervisor_and_picks_each_job(tmp_path: Path) -> None:
    cluster = CountingCluster([PENDING, OTHER], [NODE])
    now = [100.0]
    a = SharedPods(cluster, tmp_path / "sup", lambda: now[0])  # type: ignore[arg-type]
    b = SharedPods(cluster, tmp_path / "sup", lambda: now[0])  # type: ignore[arg-type]

    pods_a, nodes_a = a.read(max_age=30, not_before=0)
    now[0] += 3
    pods_b, nodes_b = b.read(max_age=30, not_before=0)

    assert cluster.calls == ["pods", "nodes"]
    assert (pods_a, nodes_a) == (pods_b, nodes_b) == ((PENDING, OTHER), (NODE,))
    assert for_job(pods_b, 7, None) == [PENDING]  # a whole "-" component, never "17"
    assert for_job(pods_b, 17, "sky-17-ef01") == [OTHER]
    assert for_job(pods_b, 1, None) == []


def test_no_pods_no_node_read_and_a_failed_list_is_not_shared(tmp_path: Path) -> None:
    cluster = CountingCluster([], [NODE])
    now = [100.0]
    shared = SharedPods(cluster, tmp_path / "sup", lambda: now[0])  # type: ignore[arg-type]
    assert shared.read(max_age=30, not_before=0) == ((), ())
    assert cluster.calls == ["pods"]

    cluster.fail = KubeError("forbidden", details={"kind": KubeErrorKind.FORBIDDEN.value})
    now[0] += 31
    try:
        shared.read(max_age=30, not_before=0)
    except KubeError as exc:
        assert exc.message == "forbidden"
    else:
        raise AssertionError("the failed list was not raised")
    cluster.fail = None
    now[0] += 1
    assert shared.read(max_age=30, not_before=0) == ((), ())  # fetched again, not the failure
    assert cluster.calls == ["pods", "pods", "pods"]


TEXT = st.text(max_size=12)
POD = st.builds(
    PodObservation,
    name=TEXT,
    namespace=TEXT,
    phase=st.sampled_from(["Pending", "Running", "Failed"]),
    labels=st.lists(st.tuples(TEXT, TEXT), max_size=3).map(tuple),
    node_name=st.none() | TEXT,
    conditions=st.lists(st.builds(PodCondition, TEXT, TEXT, TEXT, TEXT), max_size=2).map(tuple),
    container_waiting=st.lists(st.builds(ContainerWaiting, TEXT, TEXT, TEXT), max_size=2).map(
        tuple
    ),
    container_terminated=st.lists(
        st.builds(ContainerTerminated, TEXT, TEXT, st.integers(-1, 255), TEXT), max_size=2
    ).map(tuple),
    events=st.lists(st.builds(PodEvent, TEXT, TEXT, TEXT), max_size=2).map(tuple),
    uid=TEXT,
    gpu_request=st.integers(0, 16),
    gpu_selector=st.lists(st.tuples(TEXT, TEXT), max_size=2).map(tuple),
)
NODE_INFO = st.builds(
    NodeInfo,
    TEXT,
    st.dictionaries(TEXT, TEXT, max_size=3),
    st.lists(st.builds(Taint, TEXT, TEXT, TEXT), max_size=2).map(tuple),
    st.booleans(),
    st.booleans(),
    st.integers(0, 16),
)


@given(st.lists(POD, max_size=3).map(tuple), st.lists(NODE_INFO, max_size=3).map(tuple))
def test_encode_decode_round_trip(
    pods: tuple[PodObservation, ...], nodes: tuple[NodeInfo, ...]
) -> None:
    assert decode(json.loads(json.dumps(encode((pods, nodes))))) == (pods, nodes)


def test_decode_of_a_foreign_answer_is_none() -> None:
    assert decode({"schema": "other"}) is None
    assert (
        decode({"schema": "npa.kube.shared-pods.v1", "pods": [{"name": "x"}], "nodes": []}) is None
    )
    assert decode(None) is None
