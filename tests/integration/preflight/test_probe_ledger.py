"""Pull-probe pods survive no crash unrecorded (faults.md invariant 5, probe pod create/delete).

A real npa process (a fork running the real probe through the official client
against the Kubernetes double) is SIGKILLed while its probe pod exists, and once
right after the create request was journaled but before its answer was
recorded; the next probe run on that context deletes the leftover pod by UID
before it creates its own, and forgets the record only when the pod is gone.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.kube.probe import ProbeApi
from npa_infra.registry import contract
from npa_infra.registry.models import ProbeCleanup, ProbeVerdict
from npa_infra.testing.kube import FakePodProber
from preflight import probe_pod, probe_runner
from preflight.probe_ledger import ProbeLedger
from preflight.probe_paths import Placement, ProbePath
from preflight.probe_runner import ProbeJob, Tools
from tests.support.fakekube import FakeKube

NS = "team-a"
SA = "skypilot-service-account"
DIGEST = "sha256:" + "e" * 64
CONTEXT = "fake-a"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeKube]:
    fake = FakeKube.start(tmp_path / "fakekube")
    fake.add_node("node-1")
    fake.add_service_account(NS, SA, image_pull_secrets=["regcred"])
    try:
        yield fake
    finally:
        fake.stop()


def _job() -> ProbeJob:
    return ProbeJob(
        image=f"reg.example.com/team/app@{DIGEST}",
        digest=DIGEST,
        platform_digest=None,
        path=ProbePath(CONTEXT, NS, SA, (), Placement()),
        run_id="run-1",
        contract=contract.CONTRACT,
    )


def _probe_pods(cluster: FakeKube) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in cluster.store.items("pods", NS)
        if p["metadata"].get("labels", {}).get(probe_pod.LABEL_PURPOSE) == probe_pod.PURPOSE
    ]


@pytest.mark.parametrize("when", ["pod_exists", "create_unanswered"])
def test_probe_killed_with_its_pod_alive_next_run_deletes_it(
    cluster: FakeKube, tmp_path: Path, when: str
) -> None:
    home = tmp_path / "npa-home"
    pid = os.fork()
    if pid == 0:  # a real npa process with a real prober
        try:
            prober = ProbeApi(cluster.kubeconfig, CONTEXT)
            if when == "pod_exists":

                def killed_while_watching(*args: object, **kwargs: object) -> None:
                    os.kill(os.getpid(), signal.SIGKILL)

                prober.watch_pod = killed_while_watching  # type: ignore[method-assign,assignment]
            else:
                ledger_created = ProbeLedger.created

                def killed_before_the_uid(self: ProbeLedger, *args: str) -> None:
                    os.kill(os.getpid(), signal.SIGKILL)

                ProbeLedger.created = killed_before_the_uid  # type: ignore[method-assign]
                del ledger_created
            probe_runner.run_probe(
                prober, _job(), deadline_seconds=60, ledger=ProbeLedger(home, CONTEXT)
            )
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    [left] = _probe_pods(cluster)  # the crash left a labelled pod in the cluster
    ledger = ProbeLedger(home, CONTEXT)
    [pending] = ledger.pending()
    assert pending.name == left and (pending.uid is None) is (when == "create_unanswered")

    prober = ProbeApi(cluster.kubeconfig, CONTEXT)
    try:
        assert probe_runner.recover(prober, ledger, Tools(sleep=lambda s: None)) == [f"{NS}/{left}"]
    finally:
        prober.close()
    assert _probe_pods(cluster) == []
    assert ledger.pending() == []
    deletes = cluster.calls("DELETE", "/pods/")
    assert len(deletes) == 1  # one UID-preconditioned DELETE (probe_runner.cleanup)


def test_probe_ledger_is_empty_after_a_clean_probe_and_held_while_the_pod_lives(
    tmp_path: Path,
) -> None:
    ledger = ProbeLedger(tmp_path, CONTEXT)
    seen: list[list[tuple[str, str | None]]] = []

    def kubelet(pod: object) -> object:
        seen.append([(p.name, p.uid) for p in ledger.pending()])
        from npa_infra.testing.kube import succeed

        return succeed(pod)  # type: ignore[arg-type]

    fake = FakePodProber(service_accounts={SA: ("regcred",)}, kubelet=kubelet)  # type: ignore[arg-type]
    record = probe_runner.run_probe(
        fake, _job(), deadline_seconds=60, tools=Tools(sleep=lambda s: None), ledger=ledger
    )
    assert record.cleanup is ProbeCleanup.VERIFIED
    assert record.status is ProbeVerdict.COMPATIBLE  # the kubelet stand-in succeeds it
    (created,) = fake.created
    name = created["metadata"]["name"]  # type: ignore[index]
    assert seen and seen[0] == [(name, fake.deleted[0][2])]  # recorded with its UID while it lived
    assert ledger.pending() == []
    assert oct((tmp_path / "probes").stat().st_mode & 0o777) == "0o700"


def test_recover_keeps_a_record_it_cannot_prove_and_drops_one_that_is_not_ours(
    tmp_path: Path,
) -> None:
    from npa_infra.errors import KubeError

    ledger = ProbeLedger(tmp_path, CONTEXT)
    ledger.created(NS, "gone-pod", "uid-1")
    fake = FakePodProber(service_accounts={SA: ()})
    fake.faults["read"] = [KubeError("connection refused", details={"kind": "transport"})]
    assert probe_runner.recover(fake, ledger) == []
    assert [p.name for p in ledger.pending()] == ["gone-pod"]  # unknown is not absent
    assert probe_runner.recover(fake, ledger) == [f"{NS}/gone-pod"]  # 404: nothing to delete
    assert ledger.pending() == [] and fake.deleted == []
