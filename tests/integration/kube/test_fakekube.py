"""The Kubernetes API double (kubernetes.md §10) driven by the official client: endpoints and objects.

Every answer must pass the strict kubernetes 37 models; errors are the real
Status bodies; selectors, paging, patches and updates behave as on a real
server. Watch, deletion and admission: ``test_fakekube_semantics.py``;
test controls, faults and contexts: ``test_fakekube_controls.py``; kubectl:
``test_fakekube_kubectl.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.integration.kube.apihelpers import (
    NS,
    UUID4,
    client_for,
    pod_body,
    raw_get,
    status_body,
)
from tests.support.fakekube import FakeKube

# -- endpoints and complete objects ------------------------------------------------------------


def test_version_endpoint_has_all_nine_fields(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    fields = (
        "major",
        "minor",
        "git_version",
        "git_commit",
        "git_tree_state",
        "build_date",
        "go_version",
        "compiler",
        "platform",
    )
    assert all(getattr(info, field) for field in fields)
    assert (info.major, info.minor, info.git_version) == ("1", "31", "v1.31.4")


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        ("/readyz", [], "ok"),
        ("/livez", [], "ok"),
        ("/healthz", [], "ok"),
        ("/readyz/etcd", [], "ok"),
    ],
    ids=["readyz", "livez", "healthz", "readyz-check"],
)
def test_health_endpoint_plain_answers_ok(
    api: client.ApiClient, path: str, query: list[tuple[str, str]], expected: str
) -> None:
    assert raw_get(api, path, query) == (200, expected)


def test_health_endpoint_verbose_lists_checks_and_honours_exclude(api: client.ApiClient) -> None:
    status, body = raw_get(api, "/readyz", [("verbose", ""), ("exclude", "etcd")])
    lines = body.splitlines()
    assert status == 200
    assert lines[0] == "[+]ping ok"
    assert "[+]etcd ok" not in lines and "[+]informer-sync ok" in lines
    assert lines[-1] == "readyz check passed"
    assert raw_get(api, "/livez", [("verbose", "")])[1].endswith("livez check passed\n")


def test_discovery_endpoints_list_served_resources(api: client.ApiClient) -> None:
    core_names = {r.name for r in client.CoreV1Api(api).get_api_resources().resources}
    assert {
        "pods",
        "pods/status",
        "pods/log",
        "nodes",
        "nodes/status",
        "namespaces",
        "secrets",
        "configmaps",
        "serviceaccounts",
        "events",
    } <= core_names
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {
        g.name: g.preferred_version.group_version
        for g in client.ApisApi(api).get_api_versions().groups
    }
    assert groups == {"policy": "policy/v1", "node.k8s.io": "node.k8s.io/v1"}
    pdb = client.PolicyV1Api(api).get_api_resources()
    assert pdb.group_version == "policy/v1" and pdb.resources[0].short_names == ["pdb"]
    assert [r.name for r in client.NodeV1Api(api).get_api_resources().resources] == [
        "runtimeclasses"
    ]


def test_every_resource_deserialises_strictly_with_server_filled_metadata(
    fake_kube: FakeKube, api: client.ApiClient
) -> None:
    core, policy, node_api = client.CoreV1Api(api), client.PolicyV1Api(api), client.NodeV1Api(api)
    fake_kube.add_node("gpu-1", gpus=8, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    created = [
        core.create_namespace({"metadata": {"name": "extra"}}),
        core.create_namespaced_secret(NS, {"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
        core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}, "data": {"k": "v"}}),
        core.create_namespaced_service_account(NS, {"metadata": {"name": "runner"}}),
        core.create_namespaced_pod(NS, pod_body("p", labels={"app": "x"})),
        core.create_namespaced_event(
            NS,
            {
                "metadata": {"name": "e"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
                "reason": "Test",
                "message": "m",
                "type": "Normal",
            },
        ),
        core.create_namespaced_resource_quota(
            NS, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}}}
        ),
        policy.create_namespaced_pod_disruption_budget(
            NS,
            {
                "metadata": {"name": "pdb"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
            },
        ),
        node_api.create_runtime_class({"metadata": {"name": "nvidia"}, "handler": "nvidia"}),
    ]
    listed = [
        core.list_namespace(),
        core.list_node(),
        core.list_namespaced_secret(NS),
        core.list_namespaced_config_map(NS),
        core.list_namespaced_service_account(NS),
        core.list_pod_for_all_namespaces(),
        core.list_namespaced_event(NS),
        core.list_event_for_all_namespaces(),
        core.list_namespaced_resource_quota(NS),
        policy.list_namespaced_pod_disruption_budget(NS),
        policy.list_pod_disruption_budget_for_all_namespaces(),
        node_api.list_runtime_class(),
    ]
    assert all(lst.items for lst in listed)
    for obj in created:
        meta = obj.metadata
        assert (
            UUID4.match(meta.uid) and meta.creation_timestamp is not None and meta.generation == 1
        )
        assert obj.kind and obj.api_version
    versions = [int(obj.metadata.resource_version) for obj in created]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    node = core.read_node("gpu-1")
    assert (
        node.status.allocatable["nvidia.com/gpu"] == "8"
        and node.status.node_info.kubelet_version == "v1.31.4"
    )
    assert core.read_node_status("gpu-1").status.conditions[-1].type == "Ready"
    pod = core.read_namespaced_pod("p", NS)
    assert pod.status.phase == "Pending" and pod.spec.service_account_name == "default"
    assert core.read_namespaced_secret("s", NS).data == {"k": "dg=="}
    assert policy.read_namespaced_pod_disruption_budget("pdb", NS).status.expected_pods == 1
    assert core.read_namespaced_event("e", NS).involved_object.name == "p"
    assert node_api.read_runtime_class("nvidia").handler == "nvidia"
    assert core.read_namespaced_pod_status("p", NS).status.qos_class == "BestEffort"
    assert core.read_namespace("extra").status.phase == "Active"
    assert [sa.metadata.name for sa in core.list_namespaced_service_account("extra").items] == [
        "default"
    ]


@pytest.mark.parametrize(
    ("create", "message"),
    [
        (lambda core: core.create_namespaced_pod(NS, pod_body("dup")), 'pods "dup" already exists'),
        (
            lambda core: core.create_namespaced_secret(NS, {"metadata": {"name": "dup"}}),
            'secrets "dup" already exists',
        ),
    ],
    ids=["pod", "secret"],
)
def test_duplicate_create_answers_409_already_exists(
    core: client.CoreV1Api, create: Any, message: str
) -> None:
    create(core)
    with pytest.raises(client.ApiException) as info:
        create(core)
    assert info.value.status == 409
    body = status_body(info.value)
    assert (body["reason"], body["message"], body["status"], body["code"]) == (
        "AlreadyExists",
        message,
        "Failure",
        409,
    )


def test_missing_objects_answer_404_status_bodies(api: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(api).read_namespaced_pod("ghost", NS)
    assert status_body(info.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "kind": "pods"},
        "code": 404,
    }
    with pytest.raises(client.ApiException) as info:
        client.PolicyV1Api(api).read_namespaced_pod_disruption_budget("ghost", NS)
    assert status_body(info.value)["message"] == 'poddisruptionbudgets.policy "ghost" not found'
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(api).create_namespaced_pod("nowhere", pod_body("p"))
    assert (info.value.status, status_body(info.value)["message"]) == (
        404,
        'namespaces "nowhere" not found',
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"metadata": {"name": "p"}, "spec": {"containers": []}},
            'Pod "p" is invalid: spec.containers: Required value',
        ),
        (pod_body("p", labels={"run": "x" * 64}), "must be no more than 63 characters"),
        (pod_body("Bad_Name"), "a lowercase RFC 1123 subdomain"),
    ],
    ids=["no-containers", "long-label", "bad-name"],
)
def test_invalid_pod_answers_422(
    core: client.CoreV1Api, body: dict[str, Any], message: str
) -> None:
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(NS, body)
    assert info.value.status == 422 and message in status_body(info.value)["message"]


# -- selectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier=gpu", ["b"]),
        ("app!=web", ["c", "d"]),
        ("tier in (gpu,cpu)", ["b", "c"]),
        ("tier notin (gpu)", ["a", "c", "d"]),
        ("tier", ["b", "c"]),
        ("!tier", ["a", "d"]),
        ("app in (web, batch),!tier", ["a"]),
    ],
    ids=[
        "equality",
        "double-equals-and",
        "not-equal",
        "in",
        "notin",
        "exists",
        "not-exists",
        "set-and-absence",
    ],
)
def test_label_selector_filters_list(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    for name, labels in {
        "a": {"app": "web"},
        "b": {"app": "web", "tier": "gpu"},
        "c": {"app": "batch", "tier": "cpu"},
        "d": {"other": "x"},
    }.items():
        core.create_namespaced_pod(NS, pod_body(name, labels=labels))
    found = core.list_namespaced_pod(NS, label_selector=selector)
    assert sorted(p.metadata.name for p in found.items) == expected


def test_field_selectors_filter_pods_and_events(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("n1")
    for name in ("p1", "p2", "p3"):
        core.create_namespaced_pod(NS, pod_body(name))
    client.CoreV1Api(client_for(fake_kube, "fake-b")).create_namespaced_pod(
        "team-b", pod_body("p1")
    )
    fake_kube.start_pod("p2", namespace=NS)
    fake_kube.add_event("p3", "Custom", "about p3", namespace=NS)

    def names(**kwargs: Any) -> list[str]:
        return sorted(
            f"{p.metadata.namespace}/{p.metadata.name}"
            for p in core.list_pod_for_all_namespaces(**kwargs).items
        )

    assert names(field_selector="metadata.name=p1") == ["team-a/p1", "team-b/p1"]
    assert names(field_selector="metadata.name=p1,metadata.namespace=team-b") == ["team-b/p1"]
    assert names(field_selector="status.phase=Running") == ["team-a/p2"]
    assert names(field_selector="status.phase!=Running,metadata.namespace==team-a") == [
        "team-a/p1",
        "team-a/p3",
    ]
    assert names(field_selector="spec.nodeName=n1") == ["team-a/p2"]
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=p3")
    assert [(e.reason, e.message) for e in events.items] == [("Custom", "about p3")]
    with pytest.raises(client.ApiException) as info:
        core.list_namespaced_pod(NS, field_selector="spec.image=x")
    assert (info.value.status, status_body(info.value)["message"]) == (
        400,
        'field label not supported: "spec.image"',
    )


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for index in range(5):
        core.create_namespaced_pod(NS, pod_body(f"p{index}"))
    first = core.list_namespaced_pod(NS, limit=3)
    rest = core.list_namespaced_pod(NS, limit=3, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == [f"p{i}" for i in range(5)]
    assert first.metadata.remaining_item_count == 2 and rest.metadata._continue is None


# -- patch and update --------------------------------------------------------------------------


def test_patches_merge_labels_and_status_by_content_type(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("n1", labels={"keep": "1", "drop": "1"})
    cordoned = core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert [t.key for t in cordoned.spec.taints] == ["node.kubernetes.io/unschedulable"]
    assert cordoned.metadata.generation == 2
    merged = core.patch_node(
        "n1",
        {"metadata": {"labels": {"drop": None, "new": "2"}}},
        _content_type="application/merge-patch+json",
    )
    assert {k: v for k, v in merged.metadata.labels.items() if len(k) < 5} == {
        "keep": "1",
        "new": "2",
    }
    core.create_namespaced_pod(NS, pod_body("p"))
    fake_kube.schedule_pod("p", "n1")
    patched = core.patch_namespaced_pod_status(
        "p", NS, {"status": {"conditions": [{"type": "Custom", "status": "True"}]}}
    )
    assert {c.type for c in patched.status.conditions} >= {"PodScheduled", "Initialized", "Custom"}
    labelled = core.patch_namespaced_pod(
        "p", NS, [{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]
    )
    assert labelled.metadata.labels == {"x": "y"} and labelled.metadata.generation == 1


def test_update_with_stale_resource_version_answers_409(core: client.CoreV1Api) -> None:
    stale = core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("cm", NS, {"data": {"a": "2"}})
    with pytest.raises(client.ApiException) as info:
        core.replace_namespaced_config_map("cm", NS, stale)
    assert status_body(info.value)["message"] == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
