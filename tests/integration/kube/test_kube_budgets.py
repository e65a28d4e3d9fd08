"""``KubeApi.disruption_budgets`` and ``KubeApi.bound_pods`` against the API double (kubernetes.md §7.1).

Real HTTP(S) from the official client to the in-process double; the records
are ours (``DisruptionBudget``, ``NodePod``), and failures are ``KubeError``s
of the same kinds as every other call of the adapter.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from npa_infra.errors import KubeError
from npa_infra.kube import client as kube_client
from npa_infra.kube import failures
from npa_infra.kube.client import KubeApi
from npa_infra.kube.models import (
    BudgetStatus,
    DisruptionBudget,
    KubeErrorKind,
    LabelSelector,
    SelectorRequirement,
)
from tests.support.fakekube import FakeKube
from tests.support.pdbworld import controller, run_pod

NS = "team-a"


def _api(fake: FakeKube, context: str = "fake-a") -> KubeApi:
    return KubeApi(fake.kubeconfig, context)


def test_disruption_budgets_every_namespace_mapped_to_records(fake_kube: FakeKube) -> None:
    fake_kube.add_node("node-1")
    run_pod(fake_kube, NS, "web-0", labels={"app": "web", "tier": "a"})
    fake_kube.add_pdb(
        NS,
        "web",
        selector={
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
        },
        min_available="50%",
        unhealthy_pod_eviction_policy="AlwaysAllow",
    )
    fake_kube.add_pdb("kube-system", "coredns", selector=None, max_unavailable=1)

    with _api(fake_kube) as api:
        found = api.disruption_budgets()

    assert found == [
        DisruptionBudget(
            name="coredns",
            namespace="kube-system",
            selector=None,
            max_unavailable=1,
            status=BudgetStatus(0, 0, 0, 0, 1),
        ),
        DisruptionBudget(
            name="web",
            namespace=NS,
            selector=LabelSelector(
                match_labels=(("app", "web"),),
                match_expressions=(SelectorRequirement("tier", "In", ("a", "b")),),
            ),
            min_available="50%",
            unhealthy_pod_eviction_policy="AlwaysAllow",
            status=BudgetStatus(1, 0, 0, 0, 1),  # an unmanaged pod: expected 0
        ),
    ]


def test_disruption_budgets_more_than_one_page_all_returned(
    fake_kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube_client, "_PAGE", 2)
    for index in range(5):
        fake_kube.add_pdb(NS, f"b{index}", selector={}, min_available=1)

    with _api(fake_kube) as api:
        names = [b.name for b in api.disruption_budgets()]

    assert names == [f"b{i}" for i in range(5)]
    assert len(fake_kube.calls("GET", "^/apis/policy/v1/poddisruptionbudgets")) == 3


def test_bound_pods_unbound_skipped_daemonset_mirror_deleting_flagged(fake_kube: FakeKube) -> None:
    fake_kube.add_node("node-1")
    run_pod(fake_kube, NS, "web-0", labels={"app": "web"})
    run_pod(fake_kube, NS, "web-1", labels={"app": "web"}, ready=False)
    run_pod(fake_kube, "kube-system", "cilium-x", owner=controller("DaemonSet", "cilium"))
    run_pod(fake_kube, "kube-system", "etcd-node-1", mirror=True)
    run_pod(fake_kube, NS, "leaving", labels={"app": "web"})
    fake_kube.create(
        "pods",
        NS,
        {"metadata": {"name": "pending"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    fake_kube.graceful_pod_deletion = True
    fake_kube.store.delete("pods", NS, "leaving", None)  # Terminating: deletionTimestamp set

    with _api(fake_kube) as api:
        pods = {p.ref: p for p in api.bound_pods()}

    assert sorted(pods) == [
        "kube-system/cilium-x",
        "kube-system/etcd-node-1",
        "team-a/leaving",
        "team-a/web-0",
        "team-a/web-1",
    ]
    web = pods["team-a/web-0"]
    assert (web.node_name, web.phase, web.ready, web.labels) == (
        "node-1",
        "Running",
        True,
        (("app", "web"),),
    )
    assert (pods["team-a/web-1"].ready, pods["team-a/web-1"].phase) == (False, "Pending")
    assert pods["kube-system/cilium-x"].daemonset and not pods["kube-system/cilium-x"].mirror
    assert pods["kube-system/etcd-node-1"].mirror
    assert pods["team-a/leaving"].deleting and not web.deleting


@pytest.mark.parametrize(
    ("arrange", "kind"),
    [
        (lambda f: f.fail_next("GET", "poddisruptionbudgets", 500), KubeErrorKind.SERVER),
        (lambda f: f.reset_next("GET", "poddisruptionbudgets"), KubeErrorKind.TRANSPORT),
        (
            lambda f: f.deny("fake-a", "list", "poddisruptionbudgets"),
            KubeErrorKind.FORBIDDEN,
        ),
    ],
    ids=["500", "reset", "rbac"],
)
def test_disruption_budgets_injected_failure_raises_kind(
    fake_kube: FakeKube, arrange: Callable[[FakeKube], None], kind: KubeErrorKind
) -> None:
    arrange(fake_kube)

    with _api(fake_kube) as api, pytest.raises(KubeError) as caught:
        api.disruption_budgets()

    assert failures.kind_of(caught.value) is kind
    assert "list poddisruptionbudgets in all namespaces" in caught.value.message
    assert caught.value.details["context"] == "fake-a"


@pytest.mark.parametrize(
    ("context", "kind"),
    [("unreachable", KubeErrorKind.TRANSPORT), ("bad-token", KubeErrorKind.AUTH)],
    ids=["unreachable", "bad-token"],
)
def test_bound_pods_failing_context_raises_kind(
    fake_kube: FakeKube, context: str, kind: KubeErrorKind
) -> None:
    with _api(fake_kube, context) as api, pytest.raises(KubeError) as caught:
        api.bound_pods()

    assert failures.kind_of(caught.value) is kind
