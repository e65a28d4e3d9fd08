"""The API double's watch, DELETE preconditions and admission (kubernetes.md §2, §3, §5, §10.3).

Driven by the official client, unmodified: watch streams end at
``timeoutSeconds``, resume from a resourceVersion or answer 410; DELETE
preconditions answer the exact 409; pod admission applies ServiceAccount,
DefaultTolerationSeconds, RuntimeClass and ResourceQuota rules.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client, watch

from tests.integration.kube.apihelpers import (
    NS,
    client_for,
    gpu_pod,
    pod_body,
    status_body,
)
from tests.support.fakekube import FakeKube

# -- watch -------------------------------------------------------------------------------------


def test_watch_sends_snapshot_then_live_events_and_ends_at_timeout(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod_body("first"))
    seen: list[tuple[str, str]] = []
    snapshot, ended = threading.Event(), threading.Event()

    def consume() -> None:
        for event in watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=2):
            seen.append((event["type"], event["object"].metadata.name))
            snapshot.set()
        ended.set()

    started = time.monotonic()
    threading.Thread(target=consume, daemon=True).start()
    assert snapshot.wait(5)
    core.create_namespaced_pod(NS, pod_body("second"))  # the body carries no metadata.namespace
    fake_kube.set_pod_phase("first", "Running")
    core.delete_namespaced_pod("second", NS)
    client.CoreV1Api(client_for(fake_kube, "fake-b")).create_namespaced_pod(
        "team-b", pod_body("elsewhere")
    )
    assert ended.wait(10)
    assert seen == [
        ("ADDED", "first"),
        ("ADDED", "second"),
        ("MODIFIED", "first"),
        ("DELETED", "second"),
    ]
    assert 1.5 <= time.monotonic() - started < 6


def test_watch_resumes_after_resource_version_without_snapshot(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod_body("before"))
    since = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("after"))
    fake_kube.set_pod_phase("after", "Running")
    stream = watch.Watch()
    seen = []
    for event in stream.stream(
        core.list_namespaced_pod, NS, resource_version=since, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name, event["object"].status.phase))
        if len(seen) == 2:
            stream.stop()
    assert seen == [("ADDED", "after", "Pending"), ("MODIFIED", "after", "Running")]


def test_watch_from_compacted_resource_version_raises_410_expired(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    since = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("p"))
    fake_kube.compact()
    with pytest.raises(client.ApiException) as info:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, NS, resource_version=since, timeout_seconds=1
            )
        )
    assert info.value.status == 410 and info.value.reason.startswith(
        "Expired: too old resource version"
    )


def test_watch_selectors_translate_matching_changes(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod_body("probe", labels={"role": "probe"}))
    core.create_namespaced_pod(NS, pod_body("other", labels={"role": "probe"}))
    stream = watch.Watch()
    seen: list[str] = []
    steps = [
        lambda: core.patch_namespaced_pod("probe", NS, {"metadata": {"labels": {"role": "gone"}}}),
        lambda: core.patch_namespaced_pod("probe", NS, {"metadata": {"labels": {"role": "probe"}}}),
        lambda: (
            fake_kube.set_pod_phase("other", "Running"),
            fake_kube.set_pod_phase("probe", "Running"),
        ),
    ]
    for event in stream.stream(
        core.list_namespaced_pod,
        NS,
        label_selector="role=probe",
        field_selector="metadata.name=probe",
        timeout_seconds=5,
    ):
        seen.append(event["type"])
        if len(seen) <= len(steps):
            steps[len(seen) - 1]()
        else:
            stream.stop()
    assert seen == ["ADDED", "DELETED", "ADDED", "MODIFIED"]


# -- delete preconditions ----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["uid", "resourceVersion"], ids=["uid", "resource-version"])
def test_delete_with_mismatched_precondition_answers_409_exact_message(
    core: client.CoreV1Api, field: str
) -> None:
    pod = core.create_namespaced_pod(NS, pod_body("p"))
    actual = pod.metadata.uid if field == "uid" else pod.metadata.resource_version
    wanted = str(uuid.uuid4()) if field == "uid" else "1"
    label = "UID" if field == "uid" else "ResourceVersion"
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {field: wanted}}
    with pytest.raises(client.ApiException) as info:
        core.delete_namespaced_pod("p", NS, body=body)
    assert status_body(info.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Operation cannot be fulfilled on pods "p": Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}',
        "reason": "Conflict",
        "details": {"name": "p", "kind": "pods"},
        "code": 409,
    }
    assert core.read_namespaced_pod("p", NS).metadata.uid == pod.metadata.uid


def test_delete_with_matching_uid_deletes_then_404(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod(NS, pod_body("p"))
    options = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(
            uid=pod.metadata.uid, resource_version=pod.metadata.resource_version
        )
    )
    assert core.delete_namespaced_pod("p", NS, body=options).metadata.uid == pod.metadata.uid
    with pytest.raises(client.ApiException) as info:
        core.delete_namespaced_pod("p", NS, body=options)
    assert (info.value.status, status_body(info.value)["message"]) == (404, 'pods "p" not found')


def test_dry_run_validates_without_storing(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    preview = core.create_namespaced_pod(NS, pod_body("p"), dry_run="All")
    assert preview.spec.tolerations and core.list_namespaced_pod(NS).items == []
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(NS, pod_body("q", serviceAccountName="nobody"), dry_run="All")
    assert info.value.status == 403
    stored = core.create_namespaced_pod(NS, pod_body("p"))
    core.delete_namespaced_pod("p", NS, dry_run="All")
    assert fake_kube.pod("p")["metadata"]["resourceVersion"] == stored.metadata.resource_version


def test_graceful_deletion_keeps_pod_terminating_until_finished(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_node("n1")
    fake_kube.graceful_pod_deletion = True
    core.create_namespaced_pod(NS, pod_body("p"))
    fake_kube.start_pod("p")
    assert core.delete_namespaced_pod("p", NS).metadata.deletion_timestamp is not None
    assert core.read_namespaced_pod("p", NS).metadata.deletion_grace_period_seconds == 30
    fake_kube.finish_pod_deletion("p")
    assert core.list_namespaced_pod(NS).items == []


# -- admission ---------------------------------------------------------------------------------


def test_pod_with_missing_service_account_is_forbidden(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(NS, pod_body("p", serviceAccountName="skypilot-service-account"))
    assert info.value.status == 403
    assert status_body(info.value)["message"] == (
        'pods "p" is forbidden: error looking up service account team-a/skypilot-service-account: '
        'serviceaccount "skypilot-service-account" not found'
    )


@pytest.mark.parametrize(
    ("own", "expected"),
    [([], ["sa-pull"]), ([{"name": "own-pull"}], ["own-pull"])],
    ids=["empty-list-copies-sa-secrets", "own-list-is-not-merged"],
)
def test_service_account_pull_secrets_copied_only_into_empty_list(
    fake_kube: FakeKube, core: client.CoreV1Api, own: list[dict[str, str]], expected: list[str]
) -> None:
    fake_kube.add_service_account(NS, "runner", image_pull_secrets=["sa-pull"])
    pod = core.create_namespaced_pod(
        NS, pod_body("p", serviceAccountName="runner", imagePullSecrets=own)
    )
    assert [ref.name for ref in pod.spec.image_pull_secrets] == expected
    assert pod.spec.service_account_name == "runner"


@pytest.mark.parametrize(
    ("tolerations", "added"),
    [
        ([], ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]),
        (
            [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 60,
                }
            ],
            ["node.kubernetes.io/unreachable"],
        ),
        ([{"operator": "Exists"}], []),
    ],
    ids=["both-added", "one-already-tolerated", "wildcard-tolerates-all"],
)
def test_default_toleration_seconds_adds_missing_noexecute_tolerations(
    core: client.CoreV1Api, tolerations: list[dict[str, Any]], added: list[str]
) -> None:
    pod = core.create_namespaced_pod(NS, pod_body("p", tolerations=tolerations))
    extra = pod.spec.tolerations[len(tolerations) :]
    assert [(t.key, t.operator, t.effect, t.toleration_seconds) for t in extra] == [
        (key, "Exists", "NoExecute", 300) for key in added
    ]


def test_runtime_class_admission_merges_selector_tolerations_and_overhead(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    fake_kube.add_runtime_class(
        "nvidia", node_selector={"gpu": "true"}, tolerations=[toleration], overhead={"cpu": "250m"}
    )
    pod = core.create_namespaced_pod(
        NS, pod_body("p", runtimeClassName="nvidia", nodeSelector={"zone": "a"})
    )
    assert pod.spec.node_selector == {"zone": "a", "gpu": "true"}
    assert pod.spec.tolerations[0].key == "nvidia.com/gpu" and pod.spec.overhead == {"cpu": "250m"}
    for body, message in (
        (
            pod_body("q", runtimeClassName="missing"),
            'pods "q" is forbidden: pod rejected: RuntimeClass "missing" not found',
        ),
        (
            pod_body("r", runtimeClassName="nvidia", nodeSelector={"gpu": "false"}),
            "conflict with RuntimeClass nodeSelector",
        ),
    ):
        with pytest.raises(client.ApiException) as info:
            core.create_namespaced_pod(NS, body)
        assert info.value.status == 403 and message in status_body(info.value)["message"]


def test_resource_quota_rejects_pod_over_hard_limit(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    fake_kube.add_resource_quota(NS, "gpu-quota", {"requests.nvidia.com/gpu": "8"})
    core.create_namespaced_pod(NS, gpu_pod("big", 8))
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(NS, gpu_pod("more", 1))
    assert status_body(info.value)["message"] == (
        'pods "more" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
    )
