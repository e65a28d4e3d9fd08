"""kubectl drives the Kubernetes API double unmodified (kubernetes.md §1.2, §10).

kubectl reads discovery, prints server-side Tables, sends credentials only
over TLS, and waits for deletions with a field-selected list+watch, so these
tests cover the parts of the double the Python client never touches.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from tests.support.fakekube import FakeKube

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

NS = "team-a"
IMAGE = "ghcr.io/acme/trainer@sha256:" + "cd" * 32


def _create_pod(fake: FakeKube, name: str, namespace: str = NS) -> None:
    fake.create(
        "pods",
        namespace,
        {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": IMAGE}]}},
    )


def test_kubectl_get_pods_json_sees_only_the_context_namespace(
    fake_kube: FakeKube, kubectl: Kubectl
) -> None:
    fake_kube.add_node("n1")
    _create_pod(fake_kube, "trainer")
    fake_kube.fail_image_pull("trainer", "auth")
    result = kubectl("get", "pods", "-o", "json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [(p["metadata"]["name"], p["metadata"]["namespace"]) for p in items] == [("trainer", NS)]
    waiting = items[0]["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ErrImagePull" and "401 Unauthorized" in waiting["message"]
    other = kubectl("get", "pods", "-o", "json", context="fake-b")
    assert json.loads(other.stdout)["items"] == []
    assert {c.user for c in fake_kube.calls(path_regex="/pods")} == {"fake-a", "fake-b"}


def test_kubectl_get_tables_show_pod_and_node_status(fake_kube: FakeKube, kubectl: Kubectl) -> None:
    fake_kube.add_node("gpu-a", gpus=8)
    fake_kube.add_node("gpu-b", gpus=8, unschedulable=True)
    fake_kube.set_node_ready("gpu-a", False)
    _create_pod(fake_kube, "trainer")
    fake_kube.schedule_pod("trainer", "gpu-b")
    fake_kube.fail_image_pull("trainer", "not_found", backoff=True)
    nodes = kubectl("get", "nodes")
    assert nodes.returncode == 0, nodes.stderr
    rows = [line.split() for line in nodes.stdout.splitlines()]
    assert rows[0][:2] == ["NAME", "STATUS"]
    assert [row[:2] for row in rows[1:]] == [
        ["gpu-a", "NotReady"],
        ["gpu-b", "Ready,SchedulingDisabled"],
    ]
    pods = kubectl("get", "pods")
    assert pods.stdout.splitlines()[1].split()[:3] == ["trainer", "0/1", "ImagePullBackOff"]


def test_kubectl_get_raw_readyz_follows_the_script(fake_kube: FakeKube, kubectl: Kubectl) -> None:
    ok = kubectl("get", "--raw=/readyz")
    assert (ok.returncode, ok.stdout) == (0, "ok")
    verbose = kubectl("get", "--raw=/readyz?verbose")
    assert verbose.stdout.splitlines()[-1] == "readyz check passed"
    fake_kube.script_readyz([500])
    failed = kubectl("get", "--raw=/readyz")
    assert failed.returncode != 0
    assert [c.user for c in fake_kube.calls("GET", "^/readyz")] == ["fake-a", "fake-a", "fake-a"]


def test_kubectl_delete_pod_removes_it_and_waits_for_deletion(
    fake_kube: FakeKube, kubectl: Kubectl
) -> None:
    _create_pod(fake_kube, "trainer")
    result = kubectl("delete", "pod", "trainer")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'pod "trainer" deleted'
    assert fake_kube.get("pods", NS, "trainer") is None
    assert [c.path for c in fake_kube.calls("DELETE")] == [f"/api/v1/namespaces/{NS}/pods/trainer"]
    missing = kubectl("delete", "pod", "trainer")
    assert missing.returncode == 1 and 'pods "trainer" not found' in missing.stderr


def test_kubectl_bad_contexts_report_auth_and_tls_errors(
    fake_kube: FakeKube, kubectl: Kubectl
) -> None:
    unauthorized = kubectl("get", "pods", context="bad-token")
    assert (
        unauthorized.returncode == 1
        and "You must be logged in to the server" in unauthorized.stderr
    )
    forbidden = kubectl("get", "pods", context="forbidden")
    assert forbidden.returncode == 1
    assert 'pods is forbidden: User "forbidden" cannot list resource "pods"' in forbidden.stderr
    bad_ca = kubectl("get", "--raw=/readyz", context="bad-ca")
    assert bad_ca.returncode == 1 and "certificate signed by unknown authority" in bad_ca.stderr
