"""``KubeApi`` and the readiness gate against the Kubernetes API double (kubernetes.md §1, §8, §10).

Every request is real HTTP(S) from the official client to the in-process
double; only time is fake: ``wait_ready`` gets a fake clock whose ``sleep``
moves it, so a 120 s deadline passes in milliseconds while every sample is a
real ``GET /readyz``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from npa_infra.errors import KubeError
from npa_infra.kube import client as kube_client
from npa_infra.kube import failures, kubeconfig
from npa_infra.kube.client import KubeApi
from npa_infra.kube.models import KubeErrorKind, NodeInfo, Taint
from npa_infra.kube.readiness import ReadinessProgress, Reason, SampleClass, Verdict, wait_ready
from tests.support.fakekube import FakeKube

GFD = "nvidia.com/gpu.product"


class FakeClock:
    """Fake monotonic time: ``sleep`` records the delay and moves the clock, never waits."""

    def __init__(self) -> None:
        self.now = 500.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def api_for(fake: FakeKube, context: str = "fake-a") -> KubeApi:
    return KubeApi(fake.kubeconfig, context)


def unreachable_server(fake: FakeKube) -> str:
    """The server of the double's "unreachable" context: a closed port on 127.0.0.1."""
    document = yaml.safe_load(fake.kubeconfig.read_text())
    (server,) = [
        c["cluster"]["server"] for c in document["clusters"] if c["name"] == "fake-unreachable"
    ]
    return str(server)


def nodes_by_name(fake: FakeKube, context: str = "fake-a") -> dict[str, NodeInfo]:
    with api_for(fake, context) as api:
        return {n.name: n for n in api.nodes()}


# -- readyz: one sample ------------------------------------------------------------
def test_readyz_healthy_server_ok_sample(fake_kube: FakeKube) -> None:
    with api_for(fake_kube) as api:
        sample = api.readyz()

    assert (sample.ok, sample.status, sample.kind) == (True, 200, KubeErrorKind.NONE)
    assert [c.user for c in fake_kube.calls("GET", "^/readyz")] == ["fake-a"]


@pytest.mark.parametrize(
    ("answer", "status", "kind"),
    [
        (500, 500, KubeErrorKind.SERVER),
        (503, 503, KubeErrorKind.SERVER),
        (429, 429, KubeErrorKind.RATE_LIMIT),
        (401, 401, KubeErrorKind.AUTH),
        (403, 403, KubeErrorKind.FORBIDDEN),
        (404, 404, KubeErrorKind.NOT_FOUND),
        ("drop", None, KubeErrorKind.TRANSPORT),
    ],
    ids=["500", "503", "429", "401", "403", "404", "drop"],
)
def test_readyz_scripted_failure_sample_kind(
    fake_kube: FakeKube, answer: object, status: int | None, kind: KubeErrorKind
) -> None:
    fake_kube.script_readyz([answer])

    with api_for(fake_kube) as api:
        sample = api.readyz()
        after = api.readyz()  # the queue is empty again: 200 ok, on the same client

    assert (sample.ok, sample.status, sample.kind) == (False, status, kind)
    assert sample.detail
    assert after.ok


def test_readyz_500_body_detail_carries_failed_check(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([500])

    with api_for(fake_kube) as api:
        sample = api.readyz()

    assert sample.detail.startswith("HTTP 500")


def test_readyz_answer_slower_than_timeout_transport_sample(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([("delay", 1.0)])

    with api_for(fake_kube) as api:
        sample = api.readyz(timeout=0.2)

    assert sample.kind is KubeErrorKind.TRANSPORT
    assert "timed out" in sample.detail.lower()


@pytest.mark.parametrize(
    ("context", "kind"),
    [
        ("bad-token", KubeErrorKind.AUTH),
        ("bad-ca", KubeErrorKind.CERTIFICATE),
        ("exec-fail", KubeErrorKind.EXEC_PLUGIN),
        ("unreachable", KubeErrorKind.TRANSPORT),
        ("no-such-context", KubeErrorKind.UNKNOWN_CONTEXT),
    ],
    ids=["bad-token", "bad-ca", "exec-fail", "unreachable", "unknown-context"],
)
def test_readyz_failing_context_sample_kind(
    fake_kube: FakeKube, context: str, kind: KubeErrorKind
) -> None:
    with api_for(fake_kube, context) as api:
        sample = api.readyz(timeout=5.0)

    assert (sample.ok, sample.kind) == (False, kind)


def test_readyz_refused_connection_transient_sample_names_the_address(fake_kube: FakeKube) -> None:
    # "unreachable" is a context whose server is a closed port on 127.0.0.1
    server = unreachable_server(fake_kube)

    with api_for(fake_kube, "unreachable") as api:
        sample = api.readyz(timeout=5.0)

    assert (sample.ok, sample.kind) == (False, KubeErrorKind.TRANSPORT)  # kubernetes.md §1.2
    assert sample.detail == f"connection refused by {server}"


def test_wait_ready_refused_connection_reported_on_first_line_fails_closed_at_deadline(
    fake_kube: FakeKube,
) -> None:
    server = unreachable_server(fake_kube)
    clock = FakeClock()
    lines: list[str] = []

    with api_for(fake_kube, "unreachable") as api:
        evidence = wait_ready(
            api, clock=clock, sleep=clock.sleep, on_sample=lambda p: lines.append(p.text())
        )

    assert lines[0] == (
        "waiting for /readyz of context unreachable: 0/3 ok, 0.0 s of 120 s: "
        f"connection refused by {server}"
    )
    assert all("of context unreachable" in line and "of 120 s" in line for line in lines)
    # transient (kubernetes.md §1.2): sampled to the deadline, then never ready
    assert (evidence.state, evidence.reason) == (Verdict.TRANSIENT_UNAVAILABLE, Reason.DEADLINE)
    assert lines[-1].startswith("/readyz of context unreachable transient_unavailable: 0/3 ok")
    assert {s.classification for s in evidence.samples} == {SampleClass.TRANSIENT}


def test_readyz_forbidden_user_public_endpoint_ok(fake_kube: FakeKube) -> None:
    with api_for(fake_kube, "forbidden") as api:
        assert api.readyz().ok


def test_readyz_exact_context_used_never_ambient(fake_kube: FakeKube) -> None:
    env = {"KUBECONFIG": str(fake_kube.kubeconfig)}

    with KubeApi.for_context("fake-b", env) as api:
        api.readyz()
        api.nodes()

    assert {c.user for c in fake_kube.calls()} == {"fake-b"}
    assert fake_kube.calls(user="ambient") == []


# -- wait_ready: real samples, fake time -----------------------------------------------
def test_wait_ready_flapping_server_ready_after_stable_streak(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([200, 500, 200, 200, "drop", 200, 200, 200])
    clock = FakeClock()
    progress: list[ReadinessProgress] = []

    with api_for(fake_kube) as api:
        evidence = wait_ready(api, clock=clock, sleep=clock.sleep, on_sample=progress.append)

    assert evidence.state is Verdict.READY
    assert [s.classification for s in evidence.samples] == [
        SampleClass.OK,
        SampleClass.TRANSIENT,
        SampleClass.OK,
        SampleClass.OK,
        SampleClass.TRANSIENT,
        SampleClass.OK,
        SampleClass.OK,
        SampleClass.OK,
    ]
    assert [s.at for s in evidence.samples] == [0, 5, 10, 15, 20, 25, 30, 35]
    assert [s.status for s in evidence.samples][:2] == [200, 500]
    assert evidence.samples[4].kind is KubeErrorKind.TRANSPORT
    assert clock.sleeps == [5.0] * 7
    assert len(fake_kube.readyz.calls) == 8
    assert progress[-2].text() == "waiting for /readyz of context fake-a: 2/3 ok, 30.0 s of 120 s"


def test_wait_ready_scripted_401_terminal_after_second_sample(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([200, 401, 200, 200])
    clock = FakeClock()

    with api_for(fake_kube) as api:
        evidence = wait_ready(api, clock=clock, sleep=clock.sleep)

    assert evidence.state is Verdict.TERMINAL
    assert evidence.samples[-1].kind is KubeErrorKind.AUTH
    assert len(evidence.samples) == 2
    assert clock.sleeps == [5.0]


def test_wait_ready_always_503_transient_unavailable_at_deadline(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([503], repeat=True)
    clock = FakeClock()

    with api_for(fake_kube) as api:
        evidence = wait_ready(api, clock=clock, sleep=clock.sleep)

    assert evidence.state is Verdict.TRANSIENT_UNAVAILABLE
    assert evidence.reason is Reason.DEADLINE
    assert len(evidence.samples) == len(fake_kube.readyz.calls) == 25
    assert evidence.elapsed == 120.0


@pytest.mark.parametrize(
    ("context", "kind"),
    [
        ("bad-ca", KubeErrorKind.CERTIFICATE),
        ("exec-fail", KubeErrorKind.EXEC_PLUGIN),
        ("staging", KubeErrorKind.UNKNOWN_CONTEXT),
    ],
    ids=["bad-ca", "exec-fail", "unknown-context"],
)
def test_wait_ready_terminal_context_stops_without_sleeping(
    fake_kube: FakeKube, context: str, kind: KubeErrorKind
) -> None:
    clock = FakeClock()

    with api_for(fake_kube, context) as api:
        evidence = wait_ready(api, clock=clock, sleep=clock.sleep)

    assert evidence.state is Verdict.TERMINAL
    assert [s.kind for s in evidence.samples] == [kind]
    assert clock.sleeps == []


def test_wait_ready_evidence_json_roundtrip(fake_kube: FakeKube) -> None:
    fake_kube.script_readyz([429])
    clock = FakeClock()

    with api_for(fake_kube) as api:
        evidence = wait_ready(api, clock=clock, sleep=clock.sleep)

    document = json.loads(json.dumps(evidence.to_json()))
    assert document["schema"] == "npa.skypilot.kubernetes-readiness.v1"
    assert document["context"] == "fake-a"
    assert document["state"] == "ready"
    assert [s["status"] for s in document["samples"]] == [429, 200, 200, 200]
    assert document["samples"][0]["classification"] == "transient"


# -- nodes -------------------------------------------------------------------------
def test_nodes_gpu_node_labels_taints_gpus_mapped(fake_kube: FakeKube) -> None:
    fake_kube.add_node(
        "gpu-1",
        labels={GFD: "NVIDIA-H100-80GB-HBM3"},
        gpus=8,
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )

    node = nodes_by_name(fake_kube)["gpu-1"]

    assert node.labels[GFD] == "NVIDIA-H100-80GB-HBM3"
    assert node.labels["kubernetes.io/hostname"] == "gpu-1"
    assert node.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert (node.ready, node.unschedulable, node.allocatable_gpus) == (True, False, 8)


def test_nodes_not_ready_node_not_ready_with_lifecycle_taints(fake_kube: FakeKube) -> None:
    fake_kube.add_node("sick", gpus=4, ready=False)

    node = nodes_by_name(fake_kube)["sick"]

    assert node.ready is False
    assert ("node.kubernetes.io/not-ready", "NoExecute") in {(t.key, t.effect) for t in node.taints}


def test_nodes_cordoned_node_unschedulable(fake_kube: FakeKube) -> None:
    fake_kube.add_node("cordoned", gpus=8, unschedulable=True)

    node = nodes_by_name(fake_kube)["cordoned"]

    assert node.unschedulable is True
    assert node.ready is True
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in {
        (t.key, t.effect) for t in node.taints
    }


def test_nodes_cpu_node_zero_gpus(fake_kube: FakeKube) -> None:
    fake_kube.add_node("cpu-1")

    assert nodes_by_name(fake_kube)["cpu-1"].allocatable_gpus == 0


def test_nodes_state_changes_seen_on_next_call(fake_kube: FakeKube) -> None:
    fake_kube.add_node("n1", gpus=2)
    with api_for(fake_kube) as api:
        before = {n.name: n for n in api.nodes()}["n1"]
        fake_kube.set_node_ready("n1", False)
        fake_kube.cordon("n1")
        fake_kube.set_node_allocatable("n1", nvidia_com_gpu="8")
        fake_kube.set_node_labels("n1", {GFD: "NVIDIA-B200"})
        after = {n.name: n for n in api.nodes()}["n1"]

    assert (before.ready, before.unschedulable, before.allocatable_gpus) == (True, False, 2)
    assert (after.ready, after.unschedulable, after.allocatable_gpus) == (False, True, 8)
    assert after.labels[GFD] == "NVIDIA-B200"


def test_nodes_more_than_one_page_all_returned(
    fake_kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube_client, "_PAGE", 2)
    for index in range(5):
        fake_kube.add_node(f"n{index}")

    names = sorted(nodes_by_name(fake_kube))

    assert names == [f"n{i}" for i in range(5)]
    assert len(fake_kube.calls("GET", "^/api/v1/nodes")) == 3


def test_nodes_no_nodes_empty_list(fake_kube: FakeKube) -> None:
    assert nodes_by_name(fake_kube) == {}


@pytest.mark.parametrize(
    ("arrange", "kind"),
    [
        (lambda f: f.fail_next("GET", "^/api/v1/nodes", 500), KubeErrorKind.SERVER),
        (
            lambda f: f.fail_next("GET", "^/api/v1/nodes", 429, retry_after=1),
            KubeErrorKind.RATE_LIMIT,
        ),
        (lambda f: f.reset_next("GET", "^/api/v1/nodes"), KubeErrorKind.TRANSPORT),
        (lambda f: f.deny("fake-a", "list", "nodes"), KubeErrorKind.FORBIDDEN),
    ],
    ids=["500", "429", "reset", "rbac"],
)
def test_nodes_injected_failure_raises_kind_once(
    fake_kube: FakeKube, arrange: Callable[[FakeKube], None], kind: KubeErrorKind
) -> None:
    arrange(fake_kube)

    with api_for(fake_kube) as api, pytest.raises(KubeError) as caught:
        api.nodes()

    assert failures.kind_of(caught.value) is kind
    assert caught.value.details["context"] == "fake-a"
    assert caught.value.remedy
    assert len(fake_kube.calls("GET", "^/api/v1/nodes")) == 1  # no hidden urllib3 retries


@pytest.mark.parametrize(
    ("context", "kind"),
    [
        ("bad-token", KubeErrorKind.AUTH),
        ("forbidden", KubeErrorKind.FORBIDDEN),
        ("bad-ca", KubeErrorKind.CERTIFICATE),
        ("unreachable", KubeErrorKind.TRANSPORT),
        ("exec-fail", KubeErrorKind.EXEC_PLUGIN),
    ],
    ids=["bad-token", "forbidden", "bad-ca", "unreachable", "exec-fail"],
)
def test_nodes_failing_context_raises_kind(
    fake_kube: FakeKube, context: str, kind: KubeErrorKind
) -> None:
    with api_for(fake_kube, context) as api, pytest.raises(KubeError) as caught:
        api.nodes()

    assert failures.kind_of(caught.value) is kind


# -- namespaces and service accounts -------------------------------------------------
def test_namespace_exists_present_true_absent_false(fake_kube: FakeKube) -> None:
    with api_for(fake_kube) as api:
        assert api.namespace_exists("team-a") is True
        assert api.namespace_exists("no-such-ns") is False


def test_service_account_exists_added_true_missing_false(fake_kube: FakeKube) -> None:
    fake_kube.add_service_account("team-a", "skypilot-service-account")

    with api_for(fake_kube) as api:
        assert api.service_account_exists("team-a", "skypilot-service-account") is True
        assert api.service_account_exists("team-a", "default") is True
        assert api.service_account_exists("team-a", "missing") is False
        assert api.service_account_exists("no-such-ns", "default") is False


def test_namespace_exists_forbidden_context_raises_forbidden(fake_kube: FakeKube) -> None:
    with api_for(fake_kube, "forbidden") as api, pytest.raises(KubeError) as caught:
        api.namespace_exists("team-a")

    assert failures.kind_of(caught.value) is KubeErrorKind.FORBIDDEN


def test_service_account_exists_server_error_raises_server(fake_kube: FakeKube) -> None:
    fake_kube.fail_next("GET", "serviceaccounts/runner", 503)

    with api_for(fake_kube) as api, pytest.raises(KubeError) as caught:
        api.service_account_exists("team-a", "runner")

    assert failures.kind_of(caught.value) is KubeErrorKind.SERVER


# -- contexts and namespaces of the double's kubeconfig ------------------------------
def test_kubeapi_unknown_context_error_lists_contexts_no_request(fake_kube: FakeKube) -> None:
    with api_for(fake_kube, "staging") as api, pytest.raises(KubeError) as caught:
        api.nodes()

    error = caught.value
    assert failures.kind_of(error) is KubeErrorKind.UNKNOWN_CONTEXT
    for name in ("fake-a", "fake-b", "fake-default", "ambient"):
        assert name in error.message
        assert name in error.remedy
    assert fake_kube.calls() == []  # no fallback to the current context, ever


def test_kubeconfig_double_contexts_effective_namespaces(fake_kube: FakeKube) -> None:
    config = kubeconfig.load(fake_kube.kubeconfig)

    assert config.current_context == "ambient"
    for name, namespace in {**fake_kube.contexts, **fake_kube.bad_contexts}.items():
        assert config.namespace(name) == namespace


def test_kubeconfig_context_only_in_second_file_unknown(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    other = tmp_path / "other-kubeconfig"
    other.write_text(
        yaml.safe_dump({"contexts": [{"name": "other", "context": {"cluster": "fake"}}]}),
        encoding="utf-8",
    )
    env = {"KUBECONFIG": os.pathsep.join([str(fake_kube.kubeconfig), str(other)])}

    with KubeApi.for_context("other", env) as api:
        sample = api.readyz()

    assert sample.kind is KubeErrorKind.UNKNOWN_CONTEXT
    assert fake_kube.calls() == []
