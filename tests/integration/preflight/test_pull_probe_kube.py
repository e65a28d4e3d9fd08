"""The in-cluster pull probe (kubernetes.md §9) through the official client against the API double.

``ProbeApi`` talks real HTTPS to ``FakeKube`` (kubernetes.md §10): admission
copies the ServiceAccount's pull secrets into an empty list, adds the
DefaultTolerationSeconds tolerations and merges a RuntimeClass; DELETE honours
UID preconditions. The kubelet is played from a thread that waits for the
probe pod to appear (``FakeKube.wait_for_pod``, woken by store changes) and
then pulls, starts, succeeds or fails it: no test sleeps. Nonces are injected,
so pod names are known in advance.
"""

from __future__ import annotations

import stat
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import PreflightError
from npa_infra.kube.models import ProbePod
from npa_infra.kube.probe import ProbeApi
from npa_infra.registry import contract
from npa_infra.registry.models import CheckStatus, ManifestCheck, ProbeCleanup, ProbeVerdict
from npa_infra.testing.registry import FakeRegistry, fake_digest
from npa_infra.workflow.planning import api
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.supervision import runner
from npa_infra.workflow.target.services import Services
from preflight import probe_pod, probe_runner
from preflight.probe_paths import Placement, ProbePath
from preflight.probe_runner import ProbeJob, Tools
from tests.support.fakekube import FakeKube

NS = "team-a"
SA = "skypilot-service-account"
DIGEST = "sha256:" + "d" * 64
CHILD = "sha256:" + "c" * 64
IMAGE = f"reg.example.com/team/app@{DIGEST}"
NONCES = ("0000000000000001", "0000000000000002", "0000000000000003")
Kubelet = Callable[[FakeKube, str], object]


@pytest.fixture
def cluster(fake_kube: FakeKube) -> FakeKube:
    """One schedulable node; SkyPilot's ServiceAccount in team-a pulls with ``regcred``."""
    fake_kube.add_node("node-1")
    fake_kube.add_service_account(NS, SA, image_pull_secrets=["regcred"])
    return fake_kube


@pytest.fixture
def prober(cluster: FakeKube) -> Iterator[ProbeApi]:
    api_ = ProbeApi(cluster.kubeconfig, "fake-a")
    try:
        yield api_
    finally:
        api_.close()


def _name(nonce: str = NONCES[0]) -> str:
    return probe_pod.pod_name(DIGEST, nonce, contract.CONTRACT)


def _job(path: ProbePath | None = None, *, platform: str | None = None) -> ProbeJob:
    return ProbeJob(
        image=IMAGE,
        digest=DIGEST,
        platform_digest=platform,
        path=path or ProbePath("fake-a", NS, SA, (), Placement()),
        run_id="run-1",
        contract=contract.CONTRACT,
    )


def _tools(*nonces: str) -> Tools:
    """Known nonces; retries back off on a recorded, never a real, sleep."""
    return Tools(nonce=iter(nonces or NONCES).__next__, sleep=lambda seconds: None)


class _Kubelet:
    """Plays the node: waits until a probe pod appears, then applies ``action`` to it.

    ``name`` is the pod to wait for; None waits for the first probe pod of any
    name (the SDK draws its own nonces).
    """

    def __init__(self, fake: FakeKube, name: str | None, action: Kubelet) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fake, name, action), daemon=True)
        self.thread.start()

    def _run(self, fake: FakeKube, name: str | None, action: Kubelet) -> None:
        try:
            if name is None:
                assert fake.wait_until(lambda: _probe_pod_names(fake) != [], timeout=20)
                name = _probe_pod_names(fake)[0]
            else:
                fake.wait_for_pod(name, NS, timeout=20)
            action(fake, name)
        except BaseException as exc:  # reported by join(); a test thread must not die silently
            self.error = exc

    def join(self) -> None:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def _probe_pod_names(fake: FakeKube) -> list[str]:
    names = [p["metadata"]["name"] for p in fake.pods(NS)]
    return [n for n in names if n.startswith(probe_pod.NAME_PREFIX)]


def _probe(
    prober: ProbeApi, fake: FakeKube, action: Kubelet | None, job: ProbeJob | None = None, **kw: Any
) -> Any:
    kubelet = _Kubelet(fake, _name(), action) if action is not None else None
    record = probe_runner.run_probe(
        prober, job or _job(), deadline_seconds=kw.pop("deadline", 30), tools=_tools(), **kw
    )
    if kubelet is not None:
        kubelet.join()
    return record


def _succeed(fake: FakeKube, name: str) -> None:
    fake.succeed_pod(name, namespace=NS)


def _no_probe_pods(fake: FakeKube) -> bool:
    return _probe_pod_names(fake) == []


# -- verdicts ---------------------------------------------------------------------------------


def test_probe_image_id_digest_equal_compatible_cleanup_verified(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    record = _probe(prober, cluster, _succeed)

    assert (record.status, record.cleanup) == (ProbeVerdict.COMPATIBLE, ProbeCleanup.VERIFIED)
    assert (record.pod, record.namespace, record.node) == (_name(), NS, "node-1")
    assert record.image_id == IMAGE
    assert _no_probe_pods(cluster)
    deletes = cluster.calls("DELETE", "/pods/")
    assert [d.status for d in deletes] == [200]


def test_probe_platform_digest_declared_by_index_compatible(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    def pull_child(fake: FakeKube, name: str) -> None:
        fake.start_pod(name, image_id=f"reg.example.com/team/app@{CHILD}", namespace=NS)
        fake.succeed_pod(name, namespace=NS)

    record = _probe(prober, cluster, pull_child, _job(platform=CHILD))

    assert record.status is ProbeVerdict.COMPATIBLE
    assert f"platform manifest {CHILD} of index {DIGEST}" in record.reason


def test_probe_platform_digest_not_declared_indeterminate(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    def pull_child(fake: FakeKube, name: str) -> None:
        fake.start_pod(name, image_id=f"reg.example.com/team/app@{CHILD}", namespace=NS)
        fake.succeed_pod(name, namespace=NS)

    record = _probe(prober, cluster, pull_child)

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("digest_mismatch:")


def test_probe_opaque_image_id_indeterminate(cluster: FakeKube, prober: ProbeApi) -> None:
    def opaque(fake: FakeKube, name: str) -> None:
        fake.start_pod(name, image_id="sha256:" + "e" * 64, namespace=NS)
        fake.succeed_pod(name, namespace=NS)

    record = _probe(prober, cluster, opaque)

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("opaque_image_id:")
    assert record.cleanup is ProbeCleanup.VERIFIED


def test_probe_pull_auth_failure_permanent_incompatible_pod_deleted(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    def refuse(fake: FakeKube, name: str) -> None:
        fake.fail_image_pull(name, kind="auth", backoff=True, namespace=NS)

    record = _probe(prober, cluster, refuse)

    assert record.status is ProbeVerdict.INCOMPATIBLE
    assert record.reason.startswith("permanent_waiting: IMAGE_PULL_AUTH: ImagePullBackOff")
    assert record.cleanup is ProbeCleanup.VERIFIED
    assert _no_probe_pods(cluster)


def test_probe_container_failed_incompatible_with_its_message(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    def fail(fake: FakeKube, name: str) -> None:
        fake.fail_pod(name, 1, message="npa-probe: sshd is missing", namespace=NS)

    record = _probe(prober, cluster, fail)

    assert record.status is ProbeVerdict.INCOMPATIBLE
    assert record.reason.startswith("container_failed: the probe container exited 1 (Error)")
    assert "sshd is missing" in record.reason
    assert _no_probe_pods(cluster)


def test_probe_deadline_indeterminate_pod_deleted_by_uid(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    record = _probe(prober, cluster, None, deadline=1)

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("deadline: the pod was still Pending")
    assert record.cleanup is ProbeCleanup.VERIFIED
    assert _no_probe_pods(cluster)
    assert [c.status for c in cluster.calls("DELETE", "/pods/")] == [200]


# -- identity ---------------------------------------------------------------------------------


def test_probe_already_exists_retries_with_a_new_nonce(cluster: FakeKube, prober: ProbeApi) -> None:
    squatter = cluster.create(
        "pods",
        NS,
        {
            "metadata": {"name": _name()},
            "spec": {"containers": [{"name": "x", "image": "busybox"}]},
        },
    )
    kubelet = _Kubelet(cluster, _name(NONCES[1]), _succeed)

    record = probe_runner.run_probe(prober, _job(), deadline_seconds=30, tools=_tools())
    kubelet.join()

    assert record.status is ProbeVerdict.COMPATIBLE
    assert record.pod == _name(NONCES[1])
    still = cluster.pod(_name(), NS)  # the other pod of that name is never deleted
    assert still["metadata"]["uid"] == squatter["metadata"]["uid"]
    assert [c.status for c in cluster.calls("POST", "/pods$")] == [409, 201]


def test_probe_reads_the_service_account_first_and_the_pod_carries_exactly_its_secrets(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    seen: list[list[dict[str, str]]] = []

    def inspect(fake: FakeKube, name: str) -> None:
        seen.append(fake.pod(name, NS)["spec"]["imagePullSecrets"])
        fake.succeed_pod(name, namespace=NS)

    record = _probe(prober, cluster, inspect)

    assert record.status is ProbeVerdict.COMPATIBLE
    assert seen == [[{"name": "regcred"}]]
    order = [
        (c.method, c.path)
        for c in cluster.calls(user="fake-a")
        if "serviceaccounts" in c.path or (c.method == "POST" and c.path.endswith("/pods"))
    ]
    assert order[0] == ("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}")
    assert order[1] == ("POST", f"/api/v1/namespaces/{NS}/pods")


def test_probe_missing_service_account_creates_nothing_indeterminate(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    path = ProbePath("fake-a", NS, "no-such-account", (), Placement())

    record = probe_runner.run_probe(prober, _job(path), deadline_seconds=30, tools=_tools())

    assert (record.status, record.cleanup) == (ProbeVerdict.INDETERMINATE, ProbeCleanup.NOT_CREATED)
    assert "ServiceAccount team-a/no-such-account does not exist" in record.reason
    assert cluster.calls("POST", "/pods$") == []


def test_probe_runtime_class_changing_node_selector_is_identity_drift(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    cluster.add_runtime_class("nvidia", node_selector={"runtime": "nvidia"})
    placement = Placement('{"runtimeClassName":"nvidia"}')
    path = ProbePath("fake-a", NS, SA, ("regcred",), placement)

    record = probe_runner.run_probe(prober, _job(path), deadline_seconds=30, tools=_tools())

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("identity_drift:")
    assert 'nodeSelector: requested none, got {"runtime":"nvidia"}' in record.reason
    assert record.cleanup is ProbeCleanup.VERIFIED  # a rejected proof is still cleaned up
    assert _no_probe_pods(cluster)


# -- cleanup and interrupts -------------------------------------------------------------------


def test_probe_cleanup_failure_indeterminate_pod_left_labelled(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    cluster.fail_next("DELETE", "/pods/", 500, times=3)

    record = _probe(prober, cluster, _succeed)

    assert (record.status, record.cleanup) == (ProbeVerdict.INDETERMINATE, ProbeCleanup.FAILED)
    assert record.reason.startswith("cleanup_failed:")
    left = cluster.pod(_name(), NS)
    assert left["metadata"]["labels"][probe_pod.LABEL_PURPOSE] == probe_pod.PURPOSE
    assert [c.status for c in cluster.calls("DELETE", "/pods/")] == [500, 500, 500]


def test_probe_terminating_pod_is_watched_until_gone(cluster: FakeKube, prober: ProbeApi) -> None:
    cluster.graceful_pod_deletion = (
        True  # a running pod stays Terminating until the kubelet says so
    )

    def run_then_finish_deletion(fake: FakeKube, name: str) -> None:
        fake.start_pod(name, namespace=NS)
        terminating = fake.wait_until(
            lambda: bool(fake.pod(name, NS)["metadata"].get("deletionTimestamp")), timeout=20
        )
        assert terminating
        fake.finish_pod_deletion(name, namespace=NS)

    record = _probe(prober, cluster, run_then_finish_deletion, deadline=1)

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("deadline: the pod was still Running")
    assert record.cleanup is ProbeCleanup.VERIFIED
    assert _no_probe_pods(cluster)


def test_probe_delete_conflict_never_deletes_another_pod(
    cluster: FakeKube, prober: ProbeApi
) -> None:
    created = cluster.create(
        "pods",
        NS,
        {
            "metadata": {"name": "other"},
            "spec": {"containers": [{"name": "x", "image": "busybox"}]},
        },
    )

    state = probe_runner.cleanup(prober, NS, "other", "not-its-uid", _tools())

    assert state is ProbeCleanup.VERIFIED  # our UID is gone: the name belongs to another pod
    assert cluster.pod("other", NS)["metadata"]["uid"] == created["metadata"]["uid"]
    assert [c.status for c in cluster.calls("DELETE", "/pods/other")] == [409]


class _Interrupting(ProbeApi):
    """Raises KeyboardInterrupt in the watch once the pod runs, as Ctrl-C would."""

    def watch_pod(
        self,
        namespace: str,
        name: str,
        *,
        timeout_seconds: int,
        until: Callable[[ProbePod], bool],
    ) -> ProbePod | None:
        seen = super().watch_pod(
            namespace, name, timeout_seconds=timeout_seconds, until=lambda p: p.phase == "Running"
        )
        if seen is not None and seen.phase == "Running":
            raise KeyboardInterrupt
        return seen


def test_probe_interrupt_still_deletes_the_pod(cluster: FakeKube) -> None:
    def run(fake: FakeKube, name: str) -> None:
        fake.start_pod(name, namespace=NS)

    kubelet = _Kubelet(cluster, _name(), run)
    with _Interrupting(cluster.kubeconfig, "fake-a") as prober, pytest.raises(KeyboardInterrupt):
        probe_runner.run_probe(prober, _job(), deadline_seconds=30, tools=_tools())
    kubelet.join()

    assert _no_probe_pods(cluster)
    assert [c.status for c in cluster.calls("DELETE", "/pods/")] == [200]


# -- through the SDK: preflight-images and submit ---------------------------------------------

SPEC = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata: {name: probe-one}
    config: {bucket: b}
    resources:
      default: {cloud: kubernetes, cpus: 1, memory: 1Gi, image: "reg.example.com/team/app:v1"}
    states:
      a:
        run: {shell: echo a}
        terminal: true
    """
)
TAG = "reg.example.com/team/app:v1"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


def _env(fake: FakeKube, tmp_path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(fake.kubeconfig), "NPA_HOME": str(tmp_path / "home")}


def _any_probe_pod(fake: FakeKube, action: Kubelet) -> _Kubelet:
    return _Kubelet(fake, None, action)


def test_sdk_preflight_images_without_infra_unverified_no_cluster_call(
    cluster: FakeKube, spec: Path, tmp_path: Path
) -> None:
    report = api.preflight_images(
        spec, env=_env(cluster, tmp_path), services=Services(registry=lambda *_: FakeRegistry())
    )

    (row,) = report.rows
    assert row.status is CheckStatus.TARGET_PULL_UNVERIFIED
    assert row.probe is None and report.exit_code == 2
    assert cluster.calls(user="ambient") == [] and cluster.calls(user="fake-a") == []


def test_sdk_preflight_images_probe_then_cache_hit_creates_no_pod(
    cluster: FakeKube, spec: Path, tmp_path: Path
) -> None:
    env = _env(cluster, tmp_path)
    kubelet = _any_probe_pod(cluster, _succeed)
    first = api.preflight_images(
        spec, env=env, services=Services(registry=lambda *_: FakeRegistry()), infra="k8s/fake-a"
    )
    kubelet.join()

    second = api.preflight_images(
        spec, env=env, services=Services(registry=lambda *_: FakeRegistry()), infra="k8s/fake-a"
    )

    (row1,), (row2,) = first.rows, second.rows
    assert (row1.status, row2.status) == (CheckStatus.OK, CheckStatus.OK)
    assert (
        row1.probe is not None
        and row1.probe.image_id == f"reg.example.com/team/app@{fake_digest(TAG)}"
    )
    assert row2.probe is not None and row2.probe.reason.startswith("cached: proven:")
    assert len(cluster.calls("POST", "/pods$")) == 1  # the second run created no pod
    cache = tmp_path / "home" / "cache" / "image-pull-probe.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600


def test_sdk_preflight_images_other_service_account_misses_the_cache(
    cluster: FakeKube, spec: Path, tmp_path: Path
) -> None:
    env = _env(cluster, tmp_path)
    kubelet = _any_probe_pod(cluster, _succeed)
    api.preflight_images(
        spec, env=env, services=Services(registry=lambda *_: FakeRegistry()), infra="k8s/fake-a"
    )
    kubelet.join()
    cluster.add_service_account(NS, SA, image_pull_secrets=["rotated"])  # the SA changed

    kubelet = _any_probe_pod(cluster, _succeed)
    again = api.preflight_images(
        spec, env=env, services=Services(registry=lambda *_: FakeRegistry()), infra="k8s/fake-a"
    )
    kubelet.join()

    assert again.rows[0].status is CheckStatus.OK
    assert not again.rows[0].probe.reason.startswith("cached")  # type: ignore[union-attr]
    assert len(cluster.calls("POST", "/pods$")) == 2


def test_sdk_submit_cleanup_failure_blocks_the_launch_and_leaves_the_pod(
    cluster: FakeKube, spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[object] = []
    monkeypatch.setattr(runner, "execute", lambda *a, **k: launched.append(a))
    cluster.fail_next("DELETE", "/pods/", 500, times=3)
    options = submitflags.SubmitOptions(
        run_id="blocked-1", infra="k8s/fake-a", resolve_accelerators=False, no_stage_src=True
    )

    kubelet = _any_probe_pod(cluster, _succeed)
    with pytest.raises(PreflightError) as info:
        pipeline.submit(
            spec,
            options,
            env=_env(cluster, tmp_path),
            services=Services(registry=lambda *_: FakeRegistry()),
        )
    kubelet.join()

    assert launched == []
    (check,) = info.value.details["preflight"]["checks"]  # type: ignore[index]  # JSON details
    assert check["status"] == "probe_indeterminate"
    assert check["probe"]["cleanup"] == "failed"
    assert "kubectl --context fake-a -n team-a get pod" in check["remedy"]
    (left,) = [p for p in cluster.pods(NS) if p["metadata"]["name"] == check["probe"]["pod"]]
    assert left["metadata"]["labels"][probe_pod.LABEL_PURPOSE] == probe_pod.PURPOSE
    assert left["metadata"]["annotations"][probe_pod.ANNOTATION_RUN_ID] == "blocked-1"


def test_sdk_submit_registry_failure_refuses_before_any_probe_pod(
    cluster: FakeKube, spec: Path, tmp_path: Path
) -> None:
    registry = FakeRegistry({TAG: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)})
    options = submitflags.SubmitOptions(
        run_id="nf-1", infra="k8s/fake-a", resolve_accelerators=False
    )

    with pytest.raises(PreflightError):
        pipeline.submit(
            spec,
            options,
            env=_env(cluster, tmp_path),
            services=Services(registry=lambda *_: registry),
        )

    assert cluster.calls("POST", "/pods$") == []
