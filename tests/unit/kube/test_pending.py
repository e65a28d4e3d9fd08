"""The pending-pod classifier (kubernetes.md §6.3, runtime-reference.md §4): table and totality.

Pure: pods are ``PodObservation`` values built here; the GPU catalog comes
from ``gpus.catalog.build`` over ``NodeInfo`` values. No cluster, no mocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.gpus import catalog as gpu_catalog
from npa_infra.kube import pending
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    KubeErrorKind,
    PodCondition,
    PodEvent,
    PodObservation,
)
from npa_infra.kube.pending import BlockerClass, PendingCode
from tests.strategies import permanent_pull_messages, transient_pull_messages
from tests.support.fakecluster import FakeCluster, gpu_node

IMAGE = "ghcr.io/acme/trainer:v1"
GFD = "nvidia.com/gpu.product"
AUTH = (
    f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to '
    f'resolve reference "{IMAGE}": failed to authorize: failed to fetch anonymous token: '
    "unexpected status from GET request to https://ghcr.io/token: 401 Unauthorized"
)
NOT_FOUND = (
    f'rpc error: code = NotFound desc = failed to pull and unpack image "{IMAGE}": failed to '
    f'resolve reference "{IMAGE}": {IMAGE}: not found'
)
TIMEOUT = (
    f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to do '
    'request: Head "https://ghcr.io/v2/acme/trainer/manifests/v1": dial tcp 203.0.113.7:443: '
    "i/o timeout"
)
GPU_SHORT = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
    "available: 3 No preemption victims found for incoming pod."
)
CPU_SHORT = (
    "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
    "2 No preemption victims found for incoming pod."
)
NOT_READY_TAINT = (
    "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)
CUSTOM_TAINT = (
    "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)
AFFINITY = (
    "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
PVC = "0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims."


def pod(
    name: str = "train-7-ab12-head",
    *,
    namespace: str = "team-a",
    phase: str = "Pending",
    waiting: Sequence[tuple[str, str]] = (),
    init_waiting: Sequence[tuple[str, str]] = (),
    init_terminated: Sequence[tuple[str, int]] = (),
    unschedulable: str | None = None,
    conditions: Sequence[PodCondition] = (),
    events: Sequence[tuple[str, str]] = (),
    gpus: int = 0,
    selector: Sequence[str] = (),
    selector_key: str = GFD,
) -> PodObservation:
    conds = list(conditions)
    if unschedulable is not None:
        conds.append(PodCondition("PodScheduled", "False", "Unschedulable", unschedulable))
    return PodObservation(
        name=name,
        namespace=namespace,
        phase=phase,
        labels=((pending.CLUSTER_LABEL, name.removesuffix("-head")),),
        conditions=tuple(conds),
        container_waiting=tuple(ContainerWaiting("main", r, m) for r, m in waiting),
        init_container_waiting=tuple(ContainerWaiting("init", r, m) for r, m in init_waiting),
        init_container_terminated=tuple(
            ContainerTerminated("init", "Error", code) for _, code in init_terminated
        ),
        events=tuple(PodEvent(r, m) for r, m in events),
        gpu_request=gpus,
        gpu_selector=tuple((selector_key, value) for value in selector),
    )


def h100_catalog(gpus_per_node: int = 8) -> gpu_catalog.GpuCatalog:
    nodes = [gpu_node(f"gpu-{i}", {GFD: "NVIDIA-H100-80GB-HBM3"}, gpus_per_node) for i in range(2)]
    return gpu_catalog.build("ctx", nodes)


CASES: list[tuple[str, list[PodObservation], dict[str, object], PendingCode, str]] = [
    (
        "auth",
        [pod(waiting=[("ErrImagePull", AUTH)])],
        {},
        PendingCode.IMAGE_PULL_AUTH,
        "ErrImagePull",
    ),
    (
        "auth-in-backoff-event",
        [
            pod(
                waiting=[("ImagePullBackOff", f'Back-off pulling image "{IMAGE}"')],
                events=[("Failed", f'Failed to pull image "{IMAGE}": {AUTH}')],
            )
        ],
        {},
        PendingCode.IMAGE_PULL_AUTH,
        "ImagePullBackOff",
    ),
    (
        "denied",
        [pod(waiting=[("ErrImagePull", "pull access denied")])],
        {},
        PendingCode.IMAGE_PULL_AUTH,
        "ErrImagePull",
    ),
    (
        "not-found",
        [pod(waiting=[("ErrImagePull", NOT_FOUND)])],
        {},
        PendingCode.IMAGE_NOT_FOUND,
        "ErrImagePull",
    ),
    (
        "manifest-unknown",
        [pod(waiting=[("ImagePullBackOff", "manifest unknown: manifest unknown")])],
        {},
        PendingCode.IMAGE_NOT_FOUND,
        "ImagePullBackOff",
    ),
    (
        "invalid-name",
        [pod(waiting=[("InvalidImageName", 'Failed to apply default image tag "A:B:C"')])],
        {},
        PendingCode.IMAGE_REFERENCE_INVALID,
        "InvalidImageName",
    ),
    (
        "never-pull",
        [pod(waiting=[("ErrImageNeverPull", "image is not present with pull policy of Never")])],
        {},
        PendingCode.IMAGE_NEVER_PULL,
        "ErrImageNeverPull",
    ),
    (
        "secret-missing",
        [pod(waiting=[("CreateContainerConfigError", 'secret "hf-token" not found')])],
        {},
        PendingCode.CONFIG_REFERENCE_MISSING,
        "CreateContainerConfigError",
    ),
    (
        "configmap-event",
        [pod(events=[("Failed", 'Error: configmap "settings" not found')])],
        {},
        PendingCode.CONFIG_REFERENCE_MISSING,
        "Failed",
    ),
    (
        "create-container-error",
        [pod(waiting=[("CreateContainerError", "context deadline exceeded")])],
        {},
        PendingCode.POD_CONFIG_INVALID,
        "CreateContainerError",
    ),
    (
        "invalid-pod-config",
        [pod(events=[("SkyPilot", "invalid pod_config: spec.containers[0].image")])],
        {},
        PendingCode.POD_CONFIG_INVALID,
        "SkyPilot",
    ),
    (
        "gpu-shape-impossible",
        [pod(unschedulable=GPU_SHORT, gpus=16)],
        {"catalog": h100_catalog(8)},
        PendingCode.GPU_SHAPE_IMPOSSIBLE,
        "Unschedulable",
    ),
    (
        "gpu-product-absent",
        [pod(unschedulable=AFFINITY, gpus=1, selector=["B200"])],
        {"catalog": h100_catalog(8)},
        PendingCode.GPU_SHAPE_IMPOSSIBLE,
        "Unschedulable",
    ),
    (
        "gpu-foreign-selector-key-not-proven",
        [
            pod(
                unschedulable=GPU_SHORT,
                gpus=16,
                selector=["h100"],
                selector_key="example.com/gpu-product",
            )
        ],
        {"catalog": h100_catalog(8)},
        PendingCode.CAPACITY_OR_QUOTA,
        "Unschedulable",
    ),
    (
        "gpu-nodes-not-yet-labelled",
        [pod(unschedulable=GPU_SHORT, gpus=16)],
        {
            "catalog": gpu_catalog.build(
                "ctx",
                [
                    gpu_node("labelled", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8),
                    gpu_node("racing", {"nebius.com/gpu-name": "H100"}, 16),
                ],
            )
        },
        PendingCode.CAPACITY_OR_QUOTA,
        "Unschedulable",
    ),
    (
        "gpu-no-catalog",
        [pod(unschedulable=GPU_SHORT, gpus=8)],
        {},
        PendingCode.ACCELERATOR_MISMATCH,
        "Unschedulable",
    ),
    (
        "gpu-possible-capacity",
        [pod(unschedulable=GPU_SHORT, gpus=8, selector=["NVIDIA-H100-80GB-HBM3"])],
        {"catalog": h100_catalog(8)},
        PendingCode.CAPACITY_OR_QUOTA,
        "Unschedulable",
    ),
    (
        "cpu-capacity",
        [pod(unschedulable=CPU_SHORT)],
        {},
        PendingCode.CAPACITY_OR_QUOTA,
        "Unschedulable",
    ),
    (
        "quota-event",
        [pod(events=[("FailedScheduling", 'pods "p" is forbidden: exceeded quota: q')])],
        {},
        PendingCode.CAPACITY_OR_QUOTA,
        "FailedScheduling",
    ),
    (
        "not-ready-taint",
        [pod(unschedulable=NOT_READY_TAINT)],
        {},
        PendingCode.NODE_NOT_READY,
        "Unschedulable",
    ),
    (
        "preempted",
        [
            pod(
                conditions=[
                    PodCondition("DisruptionTarget", "True", "PreemptionByScheduler", "preempting")
                ]
            )
        ],
        {},
        PendingCode.PREEMPTED,
        "PreemptionByScheduler",
    ),
    ("pvc", [pod(unschedulable=PVC)], {}, PendingCode.STORAGE_PENDING, "Unschedulable"),
    (
        "failed-mount",
        [pod(events=[("FailedMount", "MountVolume.SetUp failed for volume data")])],
        {},
        PendingCode.STORAGE_PENDING,
        "FailedMount",
    ),
    (
        "pull-timeout",
        [pod(waiting=[("ErrImagePull", TIMEOUT)])],
        {},
        PendingCode.IMAGE_PULL_FAILED,
        "ErrImagePull",
    ),
    (
        "registry-unavailable",
        [pod(waiting=[("RegistryUnavailable", "503 Service Unavailable")])],
        {},
        PendingCode.IMAGE_PULL_FAILED,
        "RegistryUnavailable",
    ),
    (
        "init-crash",
        [
            pod(
                waiting=[("PodInitializing", "")],
                init_waiting=[("CrashLoopBackOff", "back-off 40s restarting failed container")],
            )
        ],
        {},
        PendingCode.INIT_CONTAINER_FAILED,
        "CrashLoopBackOff",
    ),
    (
        "init-exit",
        [pod(init_terminated=[("init", 2)])],
        {},
        PendingCode.INIT_CONTAINER_FAILED,
        "Error",
    ),
    (
        "crash-loop",
        [pod(waiting=[("CrashLoopBackOff", "back-off 5m0s restarting failed container")])],
        {},
        PendingCode.CONTAINER_CRASH,
        "CrashLoopBackOff",
    ),
    (
        "cannot-run",
        [pod(waiting=[("ContainerCannotRun", "exec format error")])],
        {},
        PendingCode.CONTAINER_CRASH,
        "ContainerCannotRun",
    ),
    (
        "backoff-event",
        [pod(events=[("BackOff", "Back-off restarting failed container")])],
        {},
        PendingCode.CONTROLLER_BACKOFF,
        "BackOff",
    ),
    (
        "custom-taint",
        [pod(unschedulable=CUSTOM_TAINT)],
        {},
        PendingCode.UNSCHEDULABLE,
        "Unschedulable",
    ),
    (
        "affinity-no-gpu",
        [pod(unschedulable=AFFINITY)],
        {},
        PendingCode.UNSCHEDULABLE,
        "Unschedulable",
    ),
    (
        "hook-error",
        [pod(waiting=[("PreStartHookError", "hook failed")])],
        {},
        PendingCode.PENDING_UNKNOWN,
        "PreStartHookError",
    ),
    (
        "scheduling-gated",
        [pod(conditions=[PodCondition("PodScheduled", "False", "SchedulingGated", "gated")])],
        {},
        PendingCode.PENDING_UNKNOWN,
        "SchedulingGated",
    ),
    ("no-blocker", [pod(waiting=[("ContainerCreating", "")])], {}, PendingCode.PENDING_UNKNOWN, ""),
    (
        "node-not-ready-no-blocker",
        [pod(waiting=[("ContainerCreating", "")])],
        {"nodes_not_ready": ["gpu-1"]},
        PendingCode.NODE_NOT_READY,
        "NodeNotReady",
    ),
    ("no-pods", [], {}, PendingCode.KUBERNETES_PODS_NOT_FOUND, ""),
]


@pytest.mark.parametrize(
    ("pods", "options", "code", "reason"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_diagnose_table_row_code(
    pods: list[PodObservation], options: dict[str, object], code: PendingCode, reason: str
) -> None:
    diagnosis = pending.diagnose(pods, job_id=7, **options)  # type: ignore[arg-type]  # table kwargs

    assert (diagnosis.code, diagnosis.reason) == (code, reason)
    assert diagnosis.blocker_class is pending.CLASS_OF.get(code)


def test_every_table_code_has_a_case() -> None:
    covered = {case[3] for case in CASES}

    assert {code for code, _ in pending.ROWS} <= covered


@pytest.mark.parametrize(
    ("code", "klass"),
    [
        (PendingCode.IMAGE_PULL_AUTH, BlockerClass.PERMANENT),
        (PendingCode.CONFIG_REFERENCE_MISSING, BlockerClass.PERMANENT),
        (PendingCode.GPU_SHAPE_IMPOSSIBLE, BlockerClass.PERMANENT),
        (PendingCode.ACCELERATOR_MISMATCH, BlockerClass.UNKNOWN),
        (PendingCode.CAPACITY_OR_QUOTA, BlockerClass.TRANSIENT),
        (PendingCode.NODE_NOT_READY, BlockerClass.TRANSIENT),
        (PendingCode.IMAGE_PULL_FAILED, BlockerClass.TRANSIENT),
        (PendingCode.CONTAINER_CRASH, BlockerClass.PAYLOAD),
        (PendingCode.UNSCHEDULABLE, BlockerClass.UNKNOWN),
    ],
    ids=lambda v: str(v),
)
def test_class_of_code_matches_kubernetes_md(code: PendingCode, klass: BlockerClass) -> None:
    assert pending.CLASS_OF[code] is klass


def test_diagnose_running_and_succeeded_pods_skipped() -> None:
    pods = [
        pod("t-7-ab-head", phase="Running", waiting=[("CrashLoopBackOff", "x")]),
        pod("t-7-ab-worker1", phase="Succeeded"),
        pod("t-7-ab-worker2", unschedulable=CPU_SHORT),
    ]

    diagnosis = pending.diagnose(pods, job_id=7)

    assert diagnosis.code is PendingCode.CAPACITY_OR_QUOTA
    assert diagnosis.pod == "team-a/t-7-ab-worker2"
    assert "team-a/t-7-ab-head: Running, skipped" in diagnosis.evidence


def test_diagnose_only_running_pods_pending_unknown() -> None:
    diagnosis = pending.diagnose([pod(phase="Running")], job_id=7)

    assert (diagnosis.code, diagnosis.pod) == (PendingCode.PENDING_UNKNOWN, None)


def test_diagnose_earliest_row_across_pods_wins() -> None:
    pods = [
        pod("a-7-x-head", unschedulable=CPU_SHORT),  # row 8
        pod("b-7-x-head", waiting=[("ErrImagePull", AUTH)]),  # row 1
    ]

    diagnosis = pending.diagnose(pods, job_id=7)

    assert (diagnosis.code, diagnosis.pod) == (PendingCode.IMAGE_PULL_AUTH, "team-a/b-7-x-head")


def test_diagnose_containers_before_init_containers() -> None:
    observed = pod(
        waiting=[("ErrImagePull", NOT_FOUND)], init_waiting=[("CrashLoopBackOff", "back-off")]
    )

    assert pending.diagnose([observed], job_id=7).code is PendingCode.IMAGE_NOT_FOUND


def test_diagnose_digest_hex_is_not_a_status() -> None:
    digest = "sha256:" + "4014" * 16
    text = f'failed to pull "{IMAGE}@{digest}": dial tcp: i/o timeout'

    diagnosis = pending.diagnose([pod(waiting=[("ErrImagePull", text)])], job_id=7)

    assert diagnosis.code is PendingCode.IMAGE_PULL_FAILED


def test_diagnose_pull_secret_warning_not_config_missing() -> None:
    event = (
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (regcred); attempting to pull the image "
        "may not succeed.",
    )

    diagnosis = pending.diagnose([pod(events=[event])], job_id=7)

    assert diagnosis.code is PendingCode.PENDING_UNKNOWN


def test_diagnose_message_capped_and_json_shape() -> None:
    long = "x" * 2000
    diagnosis = pending.diagnose([pod(waiting=[("CrashLoopBackOff", long)])], job_id=7)

    document = json.loads(json.dumps(diagnosis.to_json()))

    assert len(diagnosis.message) == pending.MESSAGE_CAP
    assert all(len(line) <= pending.MESSAGE_CAP for line in diagnosis.evidence)
    assert document["code"] == "CONTAINER_CRASH"
    assert document["class"] == "payload"
    assert document["pod"] == "team-a/train-7-ab12-head"
    assert set(document) == {"job_id", "code", "class", "pod", "reason", "message", "evidence"}


@pytest.mark.parametrize(
    ("value", "job_id", "matches"),
    [
        ("t-1-ab", 1, True),
        ("t-12-ab", 1, False),
        ("t-1-ab", 12, False),
        ("t-12-ab", 12, True),
        ("train-x12-ab", 12, False),
        ("my-task-7-beef", 7, True),
        ("", 7, False),
    ],
    ids=["exact", "prefix", "shorter", "exact-12", "substring", "dashed-task", "empty"],
)
def test_job_label_matches_whole_component(value: str, job_id: int, matches: bool) -> None:
    assert pending.job_label_matches(value, job_id) is matches


def test_is_controller_pod_by_name_and_label() -> None:
    assert pending.is_controller_pod("sky-jobs-controller-abc1-ray-head")
    assert pending.is_controller_pod("p", [(pending.CLUSTER_LABEL, "sky-jobs-controller-abc1")])
    assert not pending.is_controller_pod("train-7-abc1-head")


@pytest.mark.parametrize(
    ("kind", "detail", "code"),
    [
        (KubeErrorKind.AUTH, "401", PendingCode.KUBERNETES_AUTHENTICATION),
        (KubeErrorKind.FORBIDDEN, "pods is forbidden", PendingCode.KUBERNETES_RBAC),
        (
            KubeErrorKind.TRANSPORT,
            "Failed to resolve 'k8s.example': Name or service not known",
            PendingCode.KUBERNETES_DNS,
        ),
        (
            KubeErrorKind.TRANSPORT,
            "Read timed out. (read timeout=30)",
            PendingCode.KUBERNETES_TIMEOUT,
        ),
        (
            KubeErrorKind.UNEXPECTED,
            "Invalid value for `name`",
            PendingCode.KUBERNETES_RESPONSE_UNPARSEABLE,
        ),
        (KubeErrorKind.SERVER, "HTTP 503", PendingCode.KUBERNETES_DIAGNOSTICS_UNAVAILABLE),
    ],
    ids=["auth", "rbac", "dns", "timeout", "unparseable", "server"],
)
def test_diagnostic_failure_kind_code_without_class(
    kind: KubeErrorKind, detail: str, code: PendingCode
) -> None:
    diagnosis = pending.diagnostic_failure(kind, detail, job_id=3)

    assert (diagnosis.code, diagnosis.blocker_class) == (code, None)


def test_not_ready_nodes_names() -> None:
    nodes = [gpu_node("a"), gpu_node("b", ready=False)]

    assert pending.not_ready_nodes(nodes) == ("b",)


def test_fake_cluster_job_pods_same_rule_as_adapter() -> None:
    pods = [pod("t-1-ab-head"), pod("t-12-ab-head"), pod("sky-jobs-controller-1-ray-head")]
    cluster = FakeCluster("ctx", pod_list=pods)

    by_id = [p.name for p in cluster.job_pods(1)]
    by_name = [p.name for p in cluster.job_pods(1, cluster_name="t-12-ab")]

    assert (by_id, by_name) == (["t-1-ab-head"], ["t-12-ab-head"])


# -- totality (style.md rule 19) -----------------------------------------------------------
REASONS = st.sampled_from(
    [
        "ContainerCreating",
        "PodInitializing",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
        "ContainerCannotRun",
        "RegistryUnavailable",
        "BackOff",
        "",
    ]
)
TEXT = st.one_of(
    st.sampled_from(
        [AUTH, NOT_FOUND, TIMEOUT, GPU_SHORT, CPU_SHORT, NOT_READY_TAINT, PVC, AFFINITY]
    ),
    st.text(max_size=80),
)
CONDITIONS = st.builds(
    PodCondition,
    st.sampled_from(["PodScheduled", "DisruptionTarget", "Ready", ""]),
    st.sampled_from(["True", "False", "Unknown", ""]),
    st.sampled_from(["Unschedulable", "SchedulingGated", "PreemptionByScheduler", ""]),
    TEXT,
)
WAITING = st.builds(ContainerWaiting, st.sampled_from(["main", "init"]), REASONS, TEXT)
EVENTS = st.builds(
    PodEvent,
    st.sampled_from(["Failed", "FailedScheduling", "FailedMount", "BackOff", "FailedCreate", ""]),
    TEXT,
    st.sampled_from(["Warning", "Normal"]),
)
PODS = st.builds(
    PodObservation,
    name=st.text(min_size=1, max_size=20),
    namespace=st.sampled_from(["team-a", "team-b"]),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""]),
    conditions=st.lists(CONDITIONS, max_size=3).map(tuple),
    container_waiting=st.lists(WAITING, max_size=2).map(tuple),
    init_container_waiting=st.lists(WAITING, max_size=2).map(tuple),
    init_container_terminated=st.lists(
        st.builds(ContainerTerminated, st.just("init"), st.text(max_size=10), st.integers(-1, 3)),
        max_size=1,
    ).map(tuple),
    events=st.lists(EVENTS, max_size=3).map(tuple),
    gpu_request=st.integers(0, 16),
    gpu_selector=st.lists(
        st.tuples(
            st.sampled_from([GFD, "skypilot.co/accelerator"]),
            st.sampled_from(["NVIDIA-H100-80GB-HBM3", "B200", ""]),
        ),
        max_size=2,
    ).map(tuple),
)


@given(
    pods=st.lists(PODS, max_size=4),
    nodes_not_ready=st.lists(st.sampled_from(["n1", "n2"]), max_size=2),
    with_catalog=st.booleans(),
)
@example(pods=[], nodes_not_ready=[], with_catalog=False)
def test_diagnose_total_one_verdict(
    pods: list[PodObservation], nodes_not_ready: list[str], with_catalog: bool
) -> None:
    catalog = h100_catalog() if with_catalog else None

    diagnosis = pending.diagnose(pods, job_id=7, nodes_not_ready=nodes_not_ready, catalog=catalog)
    again = pending.diagnose(
        list(reversed(pods)), job_id=7, nodes_not_ready=nodes_not_ready, catalog=catalog
    )

    assert isinstance(diagnosis.code, PendingCode)
    assert diagnosis.blocker_class is pending.CLASS_OF.get(diagnosis.code)
    assert len(diagnosis.message) <= pending.MESSAGE_CAP
    assert diagnosis.code is again.code  # pod order never changes the verdict
    json.dumps(diagnosis.to_json())


FORBIDDEN = (
    f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": failed to '
    f'resolve reference "{IMAGE}": unexpected status from HEAD request to '
    "https://ghcr.io/v2/acme/trainer/manifests/v1: 403 Forbidden"
)


@pytest.mark.parametrize(
    ("reason", "message", "code"),
    [
        ("ImagePullBackOff", FORBIDDEN, PendingCode.IMAGE_PULL_AUTH),
        ("ErrImagePull", "pull access forbidden for this token", PendingCode.IMAGE_PULL_AUTH),
        ("ErrImagePull", "(403) FORBIDDEN", PendingCode.IMAGE_PULL_AUTH),
        (
            "ErrImagePull",
            'failed to pull image "ghcr.io/acme/Trainer:v1": invalid reference format',
            PendingCode.IMAGE_REFERENCE_INVALID,
        ),
        ("ImagePullBackOff", "MANIFEST UNKNOWN: manifest unknown", PendingCode.IMAGE_NOT_FOUND),
    ],
    ids=["403-backoff", "forbidden", "403-upper", "invalid-reference", "manifest-unknown"],
)
def test_diagnose_permanent_pull_refusal_is_permanent(
    reason: str, message: str, code: PendingCode
) -> None:
    diagnosis = pending.diagnose([pod(waiting=[(reason, message)])], job_id=7)

    assert (diagnosis.code, diagnosis.blocker_class) == (code, BlockerClass.PERMANENT)


@given(
    message=permanent_pull_messages(), reason=st.sampled_from(["ErrImagePull", "ImagePullBackOff"])
)
@example(message=FORBIDDEN, reason="ImagePullBackOff")
@example(message="x 403 y", reason="ImagePullBackOff")
def test_diagnose_any_permanent_pull_token_is_permanent(message: str, reason: str) -> None:
    diagnosis = pending.diagnose([pod(waiting=[(reason, message)])], job_id=7)

    assert diagnosis.blocker_class is BlockerClass.PERMANENT, diagnosis
    assert diagnosis.code in (
        PendingCode.IMAGE_PULL_AUTH,
        PendingCode.IMAGE_NOT_FOUND,
        PendingCode.IMAGE_REFERENCE_INVALID,
    )


@given(
    message=transient_pull_messages(), reason=st.sampled_from(["ErrImagePull", "ImagePullBackOff"])
)
@example(message=TIMEOUT, reason="ErrImagePull")
def test_diagnose_pull_failure_that_may_pass_stays_transient(message: str, reason: str) -> None:
    diagnosis = pending.diagnose([pod(waiting=[(reason, message)])], job_id=7)

    assert (diagnosis.code, diagnosis.blocker_class) == (
        PendingCode.IMAGE_PULL_FAILED,
        BlockerClass.TRANSIENT,
    )


@given(message=st.text(max_size=120) | permanent_pull_messages() | transient_pull_messages())
def test_diagnose_pull_message_total_one_class(message: str) -> None:
    diagnosis = pending.diagnose([pod(waiting=[("ErrImagePull", message)])], job_id=7)

    assert diagnosis.code in (
        PendingCode.IMAGE_PULL_AUTH,
        PendingCode.IMAGE_NOT_FOUND,
        PendingCode.IMAGE_REFERENCE_INVALID,
        PendingCode.IMAGE_PULL_FAILED,
    )
    assert diagnosis.blocker_class is pending.CLASS_OF[diagnosis.code]
