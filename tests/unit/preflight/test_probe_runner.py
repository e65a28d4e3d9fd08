"""One probe's effects through ``FakePodProber`` (kubernetes.md §9.4): create, watch, always clean up."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from npa_infra.kube.models import KubeErrorKind, ProbePod
from npa_infra.registry.models import ProbeCleanup, ProbeVerdict
from npa_infra.testing import kube as fakes
from npa_infra.testing.kube import FakePodProber
from preflight import probe_pod, probe_runner
from preflight.probe_paths import Placement, ProbePath
from preflight.probe_runner import LivePods, ProbeJob, Tools

DIGEST = "sha256:" + "a" * 64
SA = "skypilot-service-account"
NONCES = ("000000000000000a", "000000000000000b", "000000000000000c", "000000000000000d")


class Clock:
    """Fake monotonic time that each watch window moves forward; nothing ever waits."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _job(path: ProbePath | None = None) -> ProbeJob:
    return ProbeJob(
        image=f"reg.example.com/app@{DIGEST}",
        digest=DIGEST,
        platform_digest=None,
        path=path or ProbePath("ctx", "default", SA, (), Placement()),
        run_id="run-1",
        contract="skypilot-0.12.2-v1",
    )


def _tools(clock: Clock | None = None) -> Tools:
    clock = clock or Clock()
    return Tools(nonce=iter(NONCES).__next__, clock=clock, sleep=clock.sleep)


def _run(fake: FakePodProber, *, deadline: float = 60, tools: Tools | None = None) -> object:
    return probe_runner.run_probe(fake, _job(), deadline_seconds=deadline, tools=tools or _tools())


def test_run_probe_compatible_pod_deleted_by_uid() -> None:
    fake = FakePodProber(service_accounts={SA: ("regcred",)})

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert (record.status, record.cleanup) == (ProbeVerdict.COMPATIBLE, ProbeCleanup.VERIFIED)
    (created,) = fake.created
    assert created["spec"]["imagePullSecrets"] == [{"name": "regcred"}]  # type: ignore[index]  # JSON
    assert [(ns, name) for ns, name, _ in fake.deleted] == [("default", record.pod)]
    assert fake.calls[:2] == ["service_account", "create"]  # the account is read first
    assert fake.pods == {}


def test_run_probe_already_exists_new_nonce_each_time() -> None:
    fake = FakePodProber()
    first = _job()
    fake.taken = {probe_pod.pod_name(DIGEST, n, first.contract) for n in NONCES[:2]}

    record = probe_runner.run_probe(fake, first, deadline_seconds=60, tools=_tools())

    assert record.status is ProbeVerdict.COMPATIBLE
    assert record.pod is not None and record.pod.endswith(NONCES[2])


def test_run_probe_three_already_exists_gives_up_indeterminate() -> None:
    fake = FakePodProber()
    fake.taken = {probe_pod.pod_name(DIGEST, n, "skypilot-0.12.2-v1") for n in NONCES[:3]}

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert (record.status, record.cleanup) == (ProbeVerdict.INDETERMINATE, ProbeCleanup.NOT_CREATED)
    assert "3 probe pod names in a row were already taken" in record.reason
    assert fake.calls.count("create") == 3


@pytest.mark.parametrize(
    ("kubelet", "status", "reason"),
    [
        (fakes.succeed, ProbeVerdict.COMPATIBLE, "proven"),
        (
            fakes.fail(1, "npa-probe: HOME (/home/u) is not writable"),
            ProbeVerdict.INCOMPATIBLE,
            "container_failed",
        ),
        (fakes.pull_auth_failure, ProbeVerdict.INCOMPATIBLE, "permanent_waiting"),
        (fakes.opaque_image_id, ProbeVerdict.INDETERMINATE, "opaque_image_id"),
    ],
    ids=["succeed", "capability-check-fails", "pull-auth", "opaque-image-id"],
)
def test_run_probe_kubelet_outcomes(
    kubelet: Callable[[ProbePod], ProbePod], status: ProbeVerdict, reason: str
) -> None:
    fake = FakePodProber(kubelet=kubelet)

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert record.status is status
    assert record.reason.startswith(reason + ":")
    assert record.cleanup is ProbeCleanup.VERIFIED and fake.pods == {}


def test_run_probe_deadline_on_the_injected_clock() -> None:
    clock = Clock()
    fake = FakePodProber(kubelet=fakes.stay_pending)
    watched: list[int] = []
    inner = fake.watch_pod

    def watch(
        ns: str, name: str, *, timeout_seconds: int, until: Callable[[ProbePod], bool]
    ) -> ProbePod | None:
        watched.append(timeout_seconds)
        clock.now += timeout_seconds  # the window passed
        return inner(ns, name, timeout_seconds=timeout_seconds, until=until)

    fake.watch_pod = watch  # type: ignore[method-assign]  # observe the windows

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=25, tools=_tools(clock))

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("deadline:")
    assert watched == [10, 10, 5]  # timeoutSeconds never beyond the deadline
    assert record.cleanup is ProbeCleanup.VERIFIED and fake.pods == {}


def test_run_probe_zero_deadline_means_no_deadline() -> None:
    clock = Clock()
    calls = {"n": 0}

    def eventually(pod: ProbePod) -> ProbePod:
        calls["n"] += 1
        clock.now += 3600  # hours pass: a cold pull of a huge image
        return fakes.succeed(pod) if calls["n"] == 5 else pod

    fake = FakePodProber(kubelet=eventually)

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=0, tools=_tools(clock))

    assert record.status is ProbeVerdict.COMPATIBLE and calls["n"] == 5


def test_run_probe_missing_service_account_never_creates() -> None:
    fake = FakePodProber(service_accounts={"other": ()})

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert record.status is ProbeVerdict.INDETERMINATE
    assert "does not exist" in record.reason and fake.created == []


def test_run_probe_requested_secrets_skip_the_account_read() -> None:
    fake = FakePodProber(service_accounts={SA: ("sa-secret",)})
    path = ProbePath("ctx", "default", SA, ("mine",), Placement())

    record = probe_runner.run_probe(fake, _job(path), deadline_seconds=60, tools=_tools())

    assert record.status is ProbeVerdict.COMPATIBLE
    assert "service_account" not in fake.calls
    assert fake.created[0]["spec"]["imagePullSecrets"] == [{"name": "mine"}]  # type: ignore[index]  # JSON


def test_run_probe_service_account_changed_during_the_probe() -> None:
    fake = FakePodProber(service_accounts={SA: ("old",)})

    def rotate(pod: ProbePod) -> ProbePod:
        fake.service_accounts[SA] = ("new",)
        return fakes.succeed(pod)

    fake.kubelet = rotate

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert record.status is ProbeVerdict.INDETERMINATE
    assert record.reason.startswith("service_account_changed:")


def test_run_probe_transient_delete_retried_then_verified() -> None:
    clock = Clock()
    fake = FakePodProber()
    fake.faults["delete"] = [fakes.kube_error(KubeErrorKind.SERVER)] * 2

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools(clock))

    assert (record.status, record.cleanup) == (ProbeVerdict.COMPATIBLE, ProbeCleanup.VERIFIED)
    assert fake.calls.count("delete") == 3 and clock.sleeps == [0.5, 1.0]


def test_run_probe_cleanup_failure_leaves_the_pod_and_is_indeterminate() -> None:
    fake = FakePodProber()
    fake.faults["delete"] = [fakes.kube_error(KubeErrorKind.FORBIDDEN)]

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools())

    assert (record.status, record.cleanup) == (ProbeVerdict.INDETERMINATE, ProbeCleanup.FAILED)
    (left,) = fake.pods.values()
    assert left.labels["npa.nebius.com/purpose"] == "image-pull-preflight"
    assert fake.calls.count("delete") == 1  # a 403 is not retried


def test_run_probe_watch_error_transient_retried_permanent_gives_up() -> None:
    fake = FakePodProber()
    fake.faults["watch"] = [fakes.kube_error(KubeErrorKind.TRANSPORT)]
    assert probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools()).status is (
        ProbeVerdict.COMPATIBLE
    )

    broken = FakePodProber()
    broken.faults["watch"] = [fakes.kube_error(KubeErrorKind.FORBIDDEN, "watch denied")]
    record = probe_runner.run_probe(broken, _job(), deadline_seconds=60, tools=_tools())

    assert record.reason.startswith(
        "observation_failed: watching the probe pod failed: watch denied"
    )
    assert record.cleanup is ProbeCleanup.VERIFIED and broken.pods == {}


def test_run_probe_interrupt_cleans_up_then_propagates() -> None:
    def interrupt(pod: ProbePod) -> ProbePod:
        raise KeyboardInterrupt

    fake = FakePodProber(kubelet=interrupt)
    live = LivePods()

    with pytest.raises(KeyboardInterrupt):
        probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=_tools(), live=live)

    assert fake.pods == {} and len(fake.deleted) == 1
    assert live.snapshot() == []


def test_run_probe_cancelled_before_create_creates_nothing() -> None:
    fake = FakePodProber()
    tools = _tools()
    tools.cancel.set()

    record = probe_runner.run_probe(fake, _job(), deadline_seconds=60, tools=tools)

    assert record.cleanup is ProbeCleanup.NOT_CREATED and fake.created == []
