"""The double's policy/v1 PodDisruptionBudgets through the official client (kubernetes.md §7, §10.1).

CRUD through ``PolicyV1Api``, and the status the double's disruption
controller computes from the pods (``tests/support/fakekube/disruption.py``):
int and percentage ``minAvailable``/``maxUnavailable``, managed and unmanaged
pods, selectors with ``matchLabels`` and ``matchExpressions``, empty and null
selectors, and a status that follows the pods as they change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.integration.kube.apihelpers import NS, status_body
from tests.support.fakekube import FakeKube
from tests.support.pdbworld import controller, run_pod

Status = tuple[int, int, int, int]  # currentHealthy, desiredHealthy, expectedPods, allowed


@pytest.fixture
def policy(api: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api)


@pytest.fixture
def node(fake_kube: FakeKube) -> str:
    fake_kube.add_node("node-1")
    fake_kube.add_node("node-2")
    return "node-1"


def _budget(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def _status(policy: client.PolicyV1Api, name: str, namespace: str = NS) -> Status:
    status = policy.read_namespaced_pod_disruption_budget(name, namespace).status
    return (
        status.current_healthy,
        status.desired_healthy,
        status.expected_pods,
        status.disruptions_allowed,
    )


def _web(fake: FakeKube, count: int, *, managed: bool, ready: int | None = None) -> None:
    owner = controller("ReplicaSet", "web-5d8f") if managed else None
    for index in range(count):
        ready_now = ready is None or index < ready
        run_pod(fake, NS, f"web-{index}", labels={"app": "web"}, owner=owner, ready=ready_now)


def test_pdb_crud_through_policy_v1_answers_like_the_api(
    fake_kube: FakeKube, policy: client.PolicyV1Api
) -> None:
    created = policy.create_namespaced_pod_disruption_budget(
        NS, _budget("web", minAvailable=1, selector={"matchLabels": {"app": "web"}})
    )
    assert created.metadata.uid and created.metadata.generation == 1
    assert created.kind == "PodDisruptionBudget" and created.api_version == "policy/v1"
    policy.create_namespaced_pod_disruption_budget("team-b", _budget("other", maxUnavailable=1))
    assert [p.metadata.name for p in policy.list_namespaced_pod_disruption_budget(NS).items] == [
        "web"
    ]
    everywhere = policy.list_pod_disruption_budget_for_all_namespaces().items
    assert sorted((p.metadata.namespace, p.metadata.name) for p in everywhere) == [
        ("team-a", "web"),
        ("team-b", "other"),
    ]
    assert policy.read_namespaced_pod_disruption_budget("web", NS).spec.min_available == 1
    with pytest.raises(client.ApiException) as duplicate:
        policy.create_namespaced_pod_disruption_budget(NS, _budget("web", minAvailable=1))
    assert duplicate.value.status == 409
    assert status_body(duplicate.value)["message"] == (
        'poddisruptionbudgets.policy "web" already exists'
    )
    policy.delete_namespaced_pod_disruption_budget("web", NS)
    with pytest.raises(client.ApiException) as gone:
        policy.read_namespaced_pod_disruption_budget("web", NS)
    assert gone.value.status == 404
    assert status_body(gone.value)["message"] == 'poddisruptionbudgets.policy "web" not found'


@pytest.mark.parametrize(
    ("spec", "pods", "expected"),
    [
        ({"minAvailable": 2}, lambda f: _web(f, 3, managed=False), (3, 2, 3, 1)),
        ({"minAvailable": 3}, lambda f: _web(f, 3, managed=False), (3, 3, 3, 0)),
        ({"minAvailable": 1}, lambda f: _web(f, 3, managed=False, ready=2), (2, 1, 3, 1)),
        ({"minAvailable": "50%"}, lambda f: _web(f, 3, managed=True), (3, 2, 3, 1)),
        ({"minAvailable": "100%"}, lambda f: _web(f, 3, managed=True), (3, 3, 3, 0)),
        ({"maxUnavailable": 1}, lambda f: _web(f, 3, managed=True), (3, 2, 3, 1)),
        ({"maxUnavailable": "34%"}, lambda f: _web(f, 3, managed=True), (3, 1, 3, 2)),
        ({"maxUnavailable": 0}, lambda f: _web(f, 3, managed=True), (3, 3, 3, 0)),
        ({"maxUnavailable": 1}, lambda f: _web(f, 3, managed=False), (3, 0, 0, 0)),
        ({"minAvailable": "50%"}, lambda f: _web(f, 2, managed=False), (2, 0, 0, 0)),
        ({"minAvailable": 0}, lambda f: None, (0, 0, 0, 0)),
    ],
    ids=[
        "min-int-below-pods",
        "min-int-equals-pods",
        "min-int-one-unready",
        "min-percent-rounds-up",
        "min-100-percent",
        "max-int",
        "max-percent-rounds-up",
        "max-zero",
        "max-unmanaged-pods-count-nothing",
        "min-percent-unmanaged",
        "no-pods",
    ],
)
def test_pdb_status_computed_from_matching_pods_as_the_controller_does(
    fake_kube: FakeKube,
    policy: client.PolicyV1Api,
    node: str,
    spec: dict[str, Any],
    pods: Callable[[FakeKube], None],
    expected: Status,
) -> None:
    pods(fake_kube)
    run_pod(fake_kube, NS, "db-0", labels={"app": "db"})  # not selected
    run_pod(fake_kube, "team-b", "web-x", labels={"app": "web"})  # another namespace
    policy.create_namespaced_pod_disruption_budget(
        NS, _budget("web", selector={"matchLabels": {"app": "web"}}, **spec)
    )
    assert _status(policy, "web") == expected
    read = policy.read_namespaced_pod_disruption_budget("web", NS).status
    assert read.observed_generation == 1
    [condition] = read.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "DisruptionAllowed",
        "True" if expected[3] else "False",
        "SufficientPods" if expected[3] else "InsufficientPods",
    )


@pytest.mark.parametrize(
    ("selector", "matched"),
    [
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, 2),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, 3),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, 3),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, 1),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["c"]}],
            },
            1,
        ),
        ({}, 4),
        (None, 0),
    ],
    ids=["in", "notin", "exists", "doesnotexist", "labels-and-expressions", "empty", "null"],
)
def test_pdb_selector_matches_pods_as_policy_v1_does(
    fake_kube: FakeKube,
    policy: client.PolicyV1Api,
    node: str,
    selector: dict[str, Any] | None,
    matched: int,
) -> None:
    for name, tier in (("p-a", "a"), ("p-b", "b"), ("p-c", "c"), ("p-none", None)):
        labels = {"app": "web", **({"tier": tier} if tier else {})}
        run_pod(fake_kube, NS, name, labels=labels)
    spec: dict[str, Any] = {"minAvailable": 0}
    if selector is not None:
        spec["selector"] = selector
    policy.create_namespaced_pod_disruption_budget(NS, _budget("sel", **spec))
    assert _status(policy, "sel")[2] == matched


def test_pdb_status_follows_pods_readiness_and_deletion(
    fake_kube: FakeKube, policy: client.PolicyV1Api, node: str
) -> None:
    policy.create_namespaced_pod_disruption_budget(
        NS, _budget("web", minAvailable=1, selector={"matchLabels": {"app": "web"}})
    )
    assert _status(policy, "web") == (0, 1, 0, 0)
    run_pod(fake_kube, NS, "web-0", labels={"app": "web"}, ready=False)
    assert _status(policy, "web") == (0, 1, 1, 0)
    fake_kube.start_pod("web-0", namespace=NS)
    run_pod(fake_kube, NS, "web-1", labels={"app": "web"})
    assert _status(policy, "web") == (2, 1, 2, 1)
    fake_kube.graceful_pod_deletion = True
    client.CoreV1Api(policy.api_client).delete_namespaced_pod("web-1", NS)
    assert _status(policy, "web") == (1, 1, 2, 0)  # terminating: not healthy, still expected
    fake_kube.finish_pod_deletion("web-1", namespace=NS)
    assert _status(policy, "web") == (1, 1, 1, 0)


def test_pdb_spec_change_moves_observed_generation_and_recomputes(
    fake_kube: FakeKube, policy: client.PolicyV1Api, node: str
) -> None:
    _web(fake_kube, 3, managed=False)
    policy.create_namespaced_pod_disruption_budget(
        NS, _budget("web", minAvailable=3, selector={"matchLabels": {"app": "web"}})
    )
    before = policy.read_namespaced_pod_disruption_budget("web", NS).status
    policy.patch_namespaced_pod_disruption_budget("web", NS, {"spec": {"minAvailable": 1}})
    after = policy.read_namespaced_pod_disruption_budget("web", NS)
    assert after.metadata.generation == 2 and after.status.observed_generation == 2
    assert (before.disruptions_allowed, after.status.disruptions_allowed) == (0, 2)
    assert after.status.conditions[0].status == "True"


def test_pdb_controller_scale_is_the_percentage_denominator(
    fake_kube: FakeKube, policy: client.PolicyV1Api, node: str
) -> None:
    owner = controller("StatefulSet", "db")
    for index in range(2):
        run_pod(fake_kube, NS, f"db-{index}", labels={"app": "db"}, owner=owner)
    policy.create_namespaced_pod_disruption_budget(
        NS, _budget("db", minAvailable="50%", selector={"matchLabels": {"app": "db"}})
    )
    assert _status(policy, "db") == (2, 1, 2, 1)
    fake_kube.set_controller_scale(owner["uid"], 4)  # scaled up, two replicas not created yet
    assert _status(policy, "db") == (2, 2, 4, 0)


def test_pdb_posted_status_is_dropped_and_a_pinned_status_stays(
    fake_kube: FakeKube, policy: client.PolicyV1Api, node: str
) -> None:
    _web(fake_kube, 2, managed=False)
    body = _budget("web", minAvailable=1, selector={"matchLabels": {"app": "web"}})
    body["status"] = {
        "currentHealthy": 9,
        "desiredHealthy": 9,
        "expectedPods": 9,
        "disruptionsAllowed": 9,
    }
    policy.create_namespaced_pod_disruption_budget(NS, body)
    assert _status(policy, "web") == (2, 1, 2, 1)
    pinned = {"currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2, "disruptionsAllowed": 0}
    fake_kube.set_pdb_status(NS, "web", {"observedGeneration": 1, **pinned})
    run_pod(fake_kube, NS, "web-9", labels={"app": "web"})
    assert _status(policy, "web") == (2, 2, 2, 0)
    fake_kube.set_pdb_status(NS, "web", None)
    assert _status(policy, "web") == (3, 1, 3, 2)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "minAvailable and maxUnavailable cannot be both set",
        ),
        ({"minAvailable": "half"}, 'spec.minAvailable: Invalid value: "half"'),
        ({"maxUnavailable": "150%"}, "must not be greater than 100%"),
        ({"minAvailable": -1}, "must be greater than or equal to 0"),
        (
            {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"},
            'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never"',
        ),
    ],
    ids=["both", "bad-percent", "over-100", "negative", "bad-eviction-policy"],
)
def test_pdb_invalid_spec_answers_422(
    policy: client.PolicyV1Api, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(client.ApiException) as info:
        policy.create_namespaced_pod_disruption_budget(NS, _budget("bad", **spec))
    assert info.value.status == 422
    body = status_body(info.value)
    assert body["reason"] == "Invalid" and message in body["message"]


def test_pdb_unhealthy_pod_eviction_policy_round_trips(policy: client.PolicyV1Api) -> None:
    policy.create_namespaced_pod_disruption_budget(
        NS, _budget("web", minAvailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")
    )
    read = policy.read_namespaced_pod_disruption_budget("web", NS)
    assert read.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
    assert read.spec.selector is None
