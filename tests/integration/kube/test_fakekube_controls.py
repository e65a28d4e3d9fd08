"""The API double's test controls, seen through the official client (kubernetes.md §4, §10.4).

Scheduling and kubelet progress (Unschedulable messages, pull failures,
config errors, running, exits), node readiness flips, scripted faults and
``/readyz`` answers, and each kubeconfig context's identity and failure.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client, config

from tests.integration.kube.apihelpers import (
    IMAGE,
    NS,
    client_for,
    gpu_pod,
    pod_body,
    raw_get,
    status_body,
)
from tests.support.fakekube import FakeKube

GPU_LABEL = "nvidia.com/gpu.product"

# -- scheduling and kubelet controls, seen through the client ----------------------------------


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda fake: [fake.add_node(f"n{i}", gpus=8) for i in range(3)],
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
        ),
        (
            lambda fake: [
                fake.add_node("a", gpus=16, ready=False),
                fake.add_node("b", gpus=16, unschedulable=True),
                fake.add_node("c", gpus=4),
            ],
            "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
            "1 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
            "2 Preemption is not helpful for scheduling.",
        ),
        (lambda fake: None, "no nodes available to schedule pods"),
    ],
    ids=["insufficient-gpu", "mixed-reasons", "no-nodes"],
)
def test_schedule_pod_unschedulable_sets_real_condition_and_event(
    fake_kube: FakeKube, core: client.CoreV1Api, setup: Any, message: str
) -> None:
    setup(fake_kube)
    core.create_namespaced_pod(NS, gpu_pod("p", 16))
    assert fake_kube.schedule_pod("p") is None
    condition = next(
        c for c in core.read_namespaced_pod("p", NS).status.conditions if c.type == "PodScheduled"
    )
    assert (condition.status, condition.reason, condition.message) == (
        "False",
        "Unschedulable",
        message,
    )
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=p").items
    assert [(e.type, e.reason, e.message, e.source.component) for e in events] == [
        ("Warning", "FailedScheduling", message, "default-scheduler")
    ]


def test_schedule_pod_binds_and_reports_container_creating(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("small", gpus=1)
    fake_kube.add_node("big", gpus=8, labels={"nvidia.com/gpu.product": "H100"})
    body = gpu_pod("p", 4)
    body["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "H100"}
    core.create_namespaced_pod(NS, body)
    assert fake_kube.schedule_pod("p") == "big"
    pod = core.read_namespaced_pod("p", NS)
    assert pod.spec.node_name == "big"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in pod.status.conditions)


@pytest.mark.parametrize(
    ("kind", "backoff", "reason", "fragment"),
    [
        ("auth", False, "ErrImagePull", "401 Unauthorized"),
        ("not_found", True, "ImagePullBackOff", f"{IMAGE}: not found"),
        ("rate_limited", False, "ErrImagePull", "429 Too Many Requests"),
    ],
    ids=["auth", "not-found-backoff", "rate-limited"],
)
def test_fail_image_pull_reports_waiting_reason_and_events(
    fake_kube: FakeKube,
    core: client.CoreV1Api,
    kind: str,
    backoff: bool,
    reason: str,
    fragment: str,
) -> None:
    fake_kube.add_node("n1")
    core.create_namespaced_pod(NS, pod_body("p", imagePullSecrets=[{"name": "missing-pull"}]))
    fake_kube.fail_image_pull("p", kind, backoff=backoff)
    waiting = core.read_namespaced_pod("p", NS).status.container_statuses[0].state.waiting
    assert waiting.reason == reason and fragment in waiting.message
    events = {
        (e.reason, e.message)
        for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=p").items
    }
    assert ("Failed", f"Error: {reason}") in events
    assert (
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (missing-pull); attempting to pull the image may not succeed.",
    ) in events


def test_start_pod_with_missing_env_secret_reports_create_container_config_error(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("n1")
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "x", "key": "token"}}}]
    core.create_namespaced_pod(
        NS,
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": IMAGE, "env": env}]},
        },
    )
    fake_kube.start_pod("p")
    waiting = core.read_namespaced_pod("p", NS).status.container_statuses[0].state.waiting
    assert (waiting.reason, waiting.message) == (
        "CreateContainerConfigError",
        'secret "x" not found',
    )
    messages = [
        e.message
        for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=p").items
    ]
    assert 'Error: secret "x" not found' in messages


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [("containerd", IMAGE), ("docker", f"docker-pullable://{IMAGE}")],
    ids=["containerd", "docker"],
)
def test_start_pod_reports_running_ready_and_image_id(
    fake_kube: FakeKube, core: client.CoreV1Api, runtime: str, expected: str
) -> None:
    fake_kube.add_node("n1")
    core.create_namespaced_pod(NS, pod_body("p"))
    fake_kube.start_pod("p", runtime=runtime)
    pod = core.read_namespaced_pod("p", NS)
    status = pod.status.container_statuses[0]
    assert pod.status.phase == "Running" and status.ready and status.state.running is not None
    assert (status.image, status.image_id) == (IMAGE, expected)


@pytest.mark.parametrize(
    ("finish", "phase", "exit_code"),
    [
        (lambda fake: fake.succeed_pod("p"), "Succeeded", 0),
        (lambda fake: fake.fail_pod("p", 3), "Failed", 3),
    ],
    ids=["succeeded", "failed"],
)
def test_pod_exit_sets_phase_and_exit_code(
    fake_kube: FakeKube, core: client.CoreV1Api, finish: Any, phase: str, exit_code: int
) -> None:
    fake_kube.add_node("n1")
    core.create_namespaced_pod(NS, pod_body("p", restartPolicy="Never"))
    finish(fake_kube)
    pod = core.read_namespaced_pod("p", NS)
    assert pod.status.phase == phase
    assert pod.status.container_statuses[0].state.terminated.exit_code == exit_code


def test_crash_loop_and_disruption_and_init_status_are_visible(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("n1")
    core.create_namespaced_pod(NS, pod_body("p", initContainers=[{"name": "init", "image": IMAGE}]))
    fake_kube.crash_loop("p", exit_code=137, restarts=4)
    fake_kube.disrupt_pod("p", "DeletionByTaintManager")
    fake_kube.set_container_status(
        "p", "init", reason="InvalidImageName", message="bad ref", init=True
    )
    pod = core.read_namespaced_pod("p", NS)
    main = pod.status.container_statuses[0]
    assert (
        main.state.waiting.reason,
        main.last_state.terminated.exit_code,
        main.restart_count,
    ) == ("CrashLoopBackOff", 137, 4)
    disruption = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert (disruption.status, disruption.reason) == ("True", "DeletionByTaintManager")
    assert pod.status.init_container_statuses[0].state.waiting.reason == "InvalidImageName"


def test_node_readiness_flip_updates_condition_and_taints(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node(
        "n1", gpus=8, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}]
    )
    fake_kube.set_node_ready("n1", False)
    node = core.read_node("n1")
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "KubeletNotReady")
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        ("nvidia.com/gpu", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    ]
    fake_kube.set_node_ready("n1", False, unreachable=True)
    assert (
        next(c for c in core.read_node("n1").status.conditions if c.type == "Ready").status
        == "Unknown"
    )
    fake_kube.set_node_ready("n1", True)
    assert [t.key for t in core.read_node("n1").spec.taints] == ["nvidia.com/gpu"]


# -- faults, readiness script, contexts --------------------------------------------------------


def test_fail_next_answers_status_on_the_nth_matching_call_only(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.fail_next(
        "GET", r"/namespaces/team-a/pods$", 503, nth=2, times=2, message="etcd leader changed"
    )
    core.list_namespaced_pod(NS)
    for _ in range(2):
        with pytest.raises(client.ApiException) as info:
            core.list_namespaced_pod(NS)
        assert (info.value.status, status_body(info.value)["message"]) == (
            503,
            "etcd leader changed",
        )
    core.list_namespaced_pod(NS)
    assert [r.outcome for r in fake_kube.calls("GET", "/pods")] == ["", "fault", "fault", ""]


def test_fail_next_429_carries_retry_after_when_asked(fake_kube: FakeKube) -> None:
    api = client_for(fake_kube, "fake-a", retries=False)
    fake_kube.fail_next("*", r"/pods", 429, retry_after=1)
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(api).list_namespaced_pod(NS)
    assert info.value.status == 429 and info.value.headers["Retry-After"] == "1"
    assert status_body(info.value)["details"] == {"retryAfterSeconds": 1}


def test_reset_and_delay_faults_hit_the_transport(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.reset_next("GET", r"/pods", times=10)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespaced_pod(NS)
    fake_kube.clear_faults()
    fake_kube.delay_next("GET", r"/pods", 0.3)
    started = time.monotonic()
    core.list_namespaced_pod(NS)
    assert time.monotonic() - started >= 0.3


def test_scripted_readyz_answers_in_order_then_ok(fake_kube: FakeKube) -> None:
    api = client_for(fake_kube, "fake-a", retries=False)
    fake_kube.script_readyz([200, 500, "drop", ("delay", 0.3), 429, ("delay", 0.1, 503)])
    seen: list[object] = []
    for _ in range(7):
        try:
            seen.append(raw_get(api, "/readyz")[0])
        except urllib3.exceptions.HTTPError:
            seen.append("drop")
    assert seen == [200, 500, "drop", 200, 429, 503, 200]
    calls = fake_kube.readyz.calls
    assert len(calls) == 7 and calls[4] - calls[3] >= 0.3
    fake_kube.script_readyz([500])
    status, body = raw_get(api, "/readyz", [("verbose", "")])
    assert (
        status == 500
        and "[-]etcd failed: reason withheld" in body
        and body.endswith("readyz check failed\n")
    )


def test_scripted_readyz_repeat_flaps(fake_kube: FakeKube, api: client.ApiClient) -> None:
    fake_kube.script_readyz([200, 500], repeat=True)
    assert [raw_get(api, "/readyz")[0] for _ in range(5)] == [200, 500, 200, 500, 200]


def test_contexts_authenticate_as_their_own_user_and_namespace(fake_kube: FakeKube) -> None:
    contexts, _ = config.list_kube_config_contexts(str(fake_kube.kubeconfig))
    namespaces = {c["name"]: c["context"].get("namespace") for c in contexts}
    assert {name: namespaces[name] for name in fake_kube.contexts} == {
        "fake-a": "team-a",
        "fake-b": "team-b",
        "fake-default": None,
    }
    client.CoreV1Api(client_for(fake_kube, "fake-b")).list_namespaced_pod("team-b")
    client.CoreV1Api(client_for(fake_kube, "fake-default")).list_namespaced_pod("default")
    assert {r.user for r in fake_kube.calls(path_regex="/pods")} == {"fake-b", "fake-default"}
    assert fake_kube.calls(user="ambient") == []


def test_bad_contexts_fail_as_a_real_server_would(fake_kube: FakeKube) -> None:
    bad_token = client_for(fake_kube, "bad-token")
    assert raw_get(bad_token, "/readyz")[0] == 401
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(bad_token).list_namespaced_pod(NS)
    assert info.value.status == 401
    forbidden = client_for(fake_kube, "forbidden")
    assert raw_get(forbidden, "/readyz") == (200, "ok")
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(forbidden).list_namespaced_pod(NS)
    assert status_body(info.value)["message"] == (
        'pods is forbidden: User "forbidden" cannot list resource "pods" in API group "" in the namespace "team-a"'
    )
    for context, cause in (
        ("bad-ca", urllib3.exceptions.SSLError),
        ("unreachable", urllib3.exceptions.NewConnectionError),
    ):
        with pytest.raises(urllib3.exceptions.MaxRetryError) as transport:
            raw_get(client_for(fake_kube, context), "/readyz")
        assert isinstance(transport.value.reason, cause)
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(client_for(fake_kube, "exec-fail")).list_namespaced_pod(NS)
    assert info.value.status == 403  # the client logs the plugin failure and goes on anonymously


def test_deny_forbids_one_verb_on_one_resource(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    fake_kube.deny("fake-a", "list", "nodes")
    with pytest.raises(client.ApiException) as info:
        core.list_node()
    assert status_body(info.value)["message"] == (
        'nodes is forbidden: User "fake-a" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    core.list_namespaced_pod(NS)


def test_wait_for_pod_returns_once_another_thread_creates_it(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    creator = threading.Thread(target=lambda: core.create_namespaced_pod(NS, pod_body("late")))
    creator.start()
    assert fake_kube.wait_for_pod("late", timeout=5)["metadata"]["namespace"] == NS
    creator.join(5)
    assert not fake_kube.wait_until(lambda: False, timeout=0.05)


def test_object_and_node_helpers_are_visible_through_the_api(
    fake_kube: FakeKube, api: client.ApiClient
) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    fake_kube.add_node("n1", gpus=8, labels={"nebius.com/gpu-name": "RTX6000"})
    fake_kube.set_node_labels("n1", {"nebius.com/gpu-name": None, GPU_LABEL: "NVIDIA-B200"})
    fake_kube.set_node_allocatable("n1", nvidia_com_gpu="4")
    fake_kube.set_node_taints("n1", [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    fake_kube.cordon("n1")
    node = core.read_node("n1")
    assert node.metadata.labels[GPU_LABEL] == "NVIDIA-B200"
    assert "nebius.com/gpu-name" not in node.metadata.labels
    assert node.status.allocatable["nvidia.com/gpu"] == "4" and node.spec.unschedulable
    assert [t.key for t in node.spec.taints] == [
        "nvidia.com/gpu",
        "node.kubernetes.io/unschedulable",
    ]
    core.create_namespaced_pod(
        NS,
        {
            "metadata": {"generateName": "job-", "labels": {"app": "x"}},
            "spec": pod_body("x")["spec"],
        },
    )
    name = core.list_namespaced_pod(NS).items[0].metadata.name
    assert re.fullmatch(r"job-[a-z0-9]{5}", name)
    fake_kube.set_pod_log(name, "hello\n")
    assert core.read_namespaced_pod_log(name, NS) == "hello\n"
    fake_kube.mark_unschedulable(name, "0/1 nodes are available: 1 node(s) were unschedulable.")
    fake_kube.add_pdb(
        NS,
        "guard",
        selector={"matchLabels": {"app": "x"}},
        status={
            "currentHealthy": 1,
            "desiredHealthy": 1,
            "disruptionsAllowed": 0,
            "expectedPods": 1,
        },
    )
    assert policy.read_namespaced_pod_disruption_budget("guard", NS).status.disruptions_allowed == 0
    core.delete_collection_namespaced_pod(NS, label_selector="app=x")
    assert core.list_namespaced_pod(NS).items == []
