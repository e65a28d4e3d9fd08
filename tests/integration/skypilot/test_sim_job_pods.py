"""Job pods of the ``sky`` simulator in the Kubernetes API double, found and diagnosed (§12, kubernetes.md §6).

The real ``SkyCli`` launches through the simulator with ``SKYSIM_KUBE_*`` set
(``kubepods.kube_env``); the simulator creates each task's pod over HTTPS in
the double. The test then polls ``sky jobs queue --all -v -o json``, finds the
pods with the real ``KubeApi.job_pods`` and classifies them with
``pending.diagnose``. SkyPilot 0.12's ``-v`` leaves ``cluster_name_on_cloud``
null (skypilot-0.12.md §3.2), as the simulator does, so supervision's lookup is
the whole-component job id (kubernetes.md §6.1); the by-name selector is
exercised with the name the pods carry, ``<task>-<id>-<user hash>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.gpus import catalog as gpu_catalog
from npa_infra.kube import pending
from npa_infra.kube.client import KubeApi
from npa_infra.kube.pending import BlockerClass, PendingCode
from npa_infra.skypilot.models import JobStatus, QueueRecord, QueueVerdict
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.skypilot.simenv import Sim
from tests.support.fakekube import FakeKube
from tests.support.skysim import kubepods

IMAGE = "ghcr.io/acme/trainer:v1"
TASK = f"""name: train
resources:
  accelerators: H100:8
  image_id: docker:{IMAGE}
run: python train.py
"""
PIPELINE = f"""name: npa-pipe
execution: parallel
---
name: prep
resources: {{image_id: "docker:{IMAGE}"}}
run: echo prep
---
name: train
resources: {{accelerators: H100:8}}
run: echo train
"""
AUTH = (
    f'rpc error: code = Unknown desc = failed to pull and unpack image "{IMAGE}": '
    "failed to authorize: failed to fetch anonymous token: 401 Unauthorized"
)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKube]:
    fake = FakeKube.start(tmp_path / "fakekube")
    try:
        yield fake
    finally:
        fake.stop()


def launched(cli: SkyCli, sim: Sim, text: str, name: str) -> list[QueueRecord]:
    """Launch, then poll ``sky jobs queue --all -v -o json`` until every task has started."""
    result = cli.launch(sim.task(text), name=name, infra="k8s/npa-ctx")
    assert result.accepted, result.detail
    for _ in range(5):
        queue = cli.queue(verbose=True)
        assert queue.verdict is QueueVerdict.RECORDS
        rows = sorted(queue.by_name(name), key=lambda r: r.task_id)
        if rows and all(r.status is JobStatus.STARTING for r in rows):
            return rows
    raise AssertionError(f"{name} never reached STARTING")


def on_cloud(sim: Sim, row: QueueRecord) -> str:
    """The pods' label value: ``<task>-<id>-<user hash>`` (kubernetes.md §6.1)."""
    (job,) = (j for j in sim.state()["jobs"] if j["job_id"] == row.job_id)
    return f"{row.task_name}-{row.job_id}-{job['user_hash']}"


def test_sim_launch_pod_found_by_job_id_and_diagnosed(sim: Sim, kube: FakeKube) -> None:
    kube.add_node("gpu-0", gpus=1, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    cli = sim.cli(env=kubepods.kube_env(kube, "fake-a"))

    (row,) = launched(cli, sim, TASK, "npa-train")
    cluster = row.cluster_name_on_cloud or on_cloud(sim, row)
    assert kube.schedule_pod(f"{cluster}-head") is None  # one GPU per node, eight requested
    with KubeApi(kube.kubeconfig, "fake-a") as api:
        by_id = api.job_pods(row.job_id)  # what supervision does when the row has no name
        by_name = api.job_pods(row.job_id, cluster_name=cluster)
        by_current = api.job_pods(row.job_id, cluster_name=f"train-{row.job_id}")
        catalog = gpu_catalog.build("fake-a", api.nodes())
    diagnosis = pending.diagnose(by_id, job_id=row.job_id, catalog=catalog)

    (pod,) = by_id
    assert [p.ref for p in by_name] == [pod.ref] == [f"team-a/{cluster}-head"]
    assert by_current == []  # current_cluster_name is not the pod label (§6.1)
    assert pod.label(pending.CLUSTER_LABEL) == cluster
    assert pod.gpu_request == 8
    assert kube.pod(pod.name)["spec"]["containers"][0]["image"] == IMAGE
    assert (diagnosis.code, diagnosis.blocker_class) == (
        PendingCode.GPU_SHAPE_IMPOSSIBLE,
        BlockerClass.PERMANENT,
    )
    assert {c.user for c in kube.calls("POST", "/pods$")} == {"fake-a"}


def test_sim_queue_verbose_names_match_pod_label(sim: Sim, kube: FakeKube) -> None:
    """0.12's ``-v`` fills ``current_cluster_name`` only (skypilot-0.12.md §3.2); the label is on-cloud."""
    cli = sim.cli(env=kubepods.kube_env(kube, "fake-a"))

    (row,) = launched(cli, sim, TASK, "npa-names")
    (stored,) = kube.pods("team-a")

    assert row.cluster_name_on_cloud is None
    assert stored["metadata"]["labels"][pending.CLUSTER_LABEL] == on_cloud(sim, row)
    assert stored["metadata"]["name"] == f"{on_cloud(sim, row)}-head"


def test_sim_pod_state_rule_image_pull_auth(sim: Sim, kube: FakeKube) -> None:
    sim.faults(
        {
            "command": "jobs.launch",
            "action": "pod_state",
            "pod": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "waiting": {"reason": "ErrImagePull", "message": AUTH},
                "events": [{"reason": "Failed", "message": f"Failed to pull image: {AUTH}"}],
            },
        }
    )
    cli = sim.cli(env=kubepods.kube_env(kube, "fake-b"))

    (row,) = launched(cli, sim, TASK, "npa-auth")
    with KubeApi(kube.kubeconfig, "fake-b") as api:
        pods = api.job_pods(row.job_id, namespace="team-b")
    diagnosis = pending.diagnose(pods, job_id=row.job_id)

    (pod,) = pods
    assert pod.container_waiting[0].reason == "ErrImagePull"
    assert [e.reason for e in pod.events] == ["Failed"]
    assert (diagnosis.code, diagnosis.blocker_class) == (
        PendingCode.IMAGE_PULL_AUTH,
        BlockerClass.PERMANENT,
    )


def test_sim_pipeline_one_pod_per_task(sim: Sim, kube: FakeKube) -> None:
    cli = sim.cli(env=kubepods.kube_env(kube, "fake-a"))

    rows = launched(cli, sim, PIPELINE, "npa-pipe")
    with KubeApi(kube.kubeconfig, "fake-a") as api:
        found = {r.task_name: api.job_pods(r.job_id, cluster_name=on_cloud(sim, r)) for r in rows}
        by_id = api.job_pods(rows[0].job_id)

    assert {name: [p.name for p in pods] for name, pods in found.items()} == {
        r.task_name: [f"{on_cloud(sim, r)}-head"] for r in rows
    }
    assert len(by_id) == 2
    images = {p["metadata"]["name"]: p["spec"]["containers"][0] for p in kube.pods("team-a")}
    prep, train = (images[f"{on_cloud(sim, r)}-head"] for r in rows)
    assert prep["image"] == IMAGE
    assert train["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_sim_without_kube_url_creates_no_pod(sim: Sim, kube: FakeKube) -> None:
    cli = sim.cli()

    launched(cli, sim, TASK, "npa-plain")

    assert kube.pods() == []
    assert all("pods" not in job for job in sim.state()["jobs"])


def test_sim_unreachable_kube_launch_still_accepted(sim: Sim, kube: FakeKube) -> None:
    env = {**kubepods.kube_env(kube, "fake-a"), kubepods.URL: "https://127.0.0.1:9"}
    cli = sim.cli(env=env)

    launched(cli, sim, TASK, "npa-unreachable")

    (job,) = sim.state()["jobs"]
    (record,) = job["pods"]
    assert record["error"]
    assert "uid" not in record


def test_kube_env_unknown_context_refused(kube: FakeKube) -> None:
    with pytest.raises(ValueError, match="not a working FakeKube context"):
        kubepods.kube_env(kube, "ambient")
