"""The readiness keeper (workflow.execution.readykeeper): background samples and the gate."""

from __future__ import annotations

from npa_infra.kube.models import KubeErrorKind, ReadyzSample
from npa_infra.runs.models import Category, Evidence
from npa_infra.workflow.execution.readykeeper import ReadinessKeeper
from npa_infra.workflow.target.services import Clock
from tests.support.fakecluster import FakeClock, FakeCluster, kube_error, ready_sample

UNAVAILABLE = ReadyzSample(at=0.0, ok=False, status=503, kind=KubeErrorKind.SERVER)


def _keeper(cluster: FakeCluster) -> tuple[ReadinessKeeper, FakeClock]:
    fake = FakeClock()
    return ReadinessKeeper(cluster, Clock(fake, fake.sleep, lambda: 0.5)), fake


def test_gate_cold_three_samples_spanning_window_ready() -> None:
    cluster = FakeCluster("ctx")
    keeper, _ = _keeper(cluster)
    evidence, samples, category, _ = keeper.gate(cluster)  # type: ignore[arg-type]
    assert (evidence, category) == (Evidence.READY, Category.NONE)
    assert cluster.calls.count("readyz") == 3
    record = samples[0]["samples"]
    assert [s["at_s"] for s in record] == [0.0, 5.0, 10.0]


def test_gate_after_idle_window_one_fresh_sample_ready() -> None:
    cluster = FakeCluster("ctx")
    keeper, _ = _keeper(cluster)
    keeper.idle(12.0)  # the previous wave runs: samples at 0, 5 and 10 s
    taken = cluster.calls.count("readyz")
    assert taken == 3
    evidence, samples, _, _ = keeper.gate(cluster)  # type: ignore[arg-type]
    assert evidence is Evidence.READY
    assert cluster.calls.count("readyz") == taken + 1
    assert samples[0]["samples"][-1]["at_s"] >= 10.0


def test_gate_after_long_pause_stale_window_reproven() -> None:
    cluster = FakeCluster("ctx")
    keeper, clock = _keeper(cluster)
    keeper.idle(12.0)
    clock.sleep(60.0)  # nothing sampled meanwhile: the streak is broken by the gap
    keeper.gate(cluster)  # type: ignore[arg-type]
    assert cluster.calls.count("readyz") == 3 + 3


def test_gate_failed_fresh_sample_resets_window() -> None:
    cluster = FakeCluster("ctx", readyz_script=[ready_sample()] * 3 + [UNAVAILABLE, ready_sample()])
    keeper, _ = _keeper(cluster)
    keeper.idle(12.0)
    evidence, samples, _, _ = keeper.gate(cluster)  # type: ignore[arg-type]
    assert evidence is Evidence.READY
    assert cluster.calls.count("readyz") == 3 + 1 + 3  # the 503, then a new streak
    assert samples[0]["samples"][0]["classification"] == "transient"


def test_gate_terminal_sample_ends_at_once_despite_proven_window() -> None:
    denied = kube_error(KubeErrorKind.AUTH, "Unauthorized", 401)
    cluster = FakeCluster("ctx", readyz_script=[ready_sample()] * 3 + [denied])
    keeper, _ = _keeper(cluster)
    keeper.idle(12.0)
    evidence, _, _, error = keeper.gate(cluster)  # type: ignore[arg-type]
    assert evidence is Evidence.TERMINAL
    assert "terminal_sample" in error


def test_gate_always_unavailable_transient_at_deadline() -> None:
    cluster = FakeCluster("ctx", readyz_script=[UNAVAILABLE])
    keeper, clock = _keeper(cluster)
    start = clock.now
    evidence, _, _, _ = keeper.gate(cluster)  # type: ignore[arg-type]
    assert evidence is Evidence.TRANSIENT_UNAVAILABLE
    assert clock.now - start >= 120.0


def test_forget_drops_window_gate_reproves() -> None:
    cluster = FakeCluster("ctx")
    keeper, _ = _keeper(cluster)
    keeper.idle(12.0)
    keeper.forget()
    keeper.gate(cluster)  # type: ignore[arg-type]
    assert cluster.calls.count("readyz") == 3 + 3


def test_idle_samples_one_per_interval() -> None:
    cluster = FakeCluster("ctx")
    keeper, clock = _keeper(cluster)
    keeper.idle(30.0)
    assert cluster.calls.count("readyz") == keeper.requests == 6  # 0, 5, ..., 25 s
    assert abs(sum(clock.slept) - 30.0) < 1e-9


def test_gate_after_a_long_kept_streak_records_only_the_proving_tail() -> None:
    # issue 19: a window kept through many waves is a long streak; each launch's evidence
    # holds the fewest latest samples that prove it, so records do not grow wave by wave
    cluster = FakeCluster("ctx")
    keeper, _ = _keeper(cluster)
    keeper.idle(100.0)  # twenty-one samples, one per 5 s
    assert cluster.calls.count("readyz") > 10
    evidence, samples, _, _ = keeper.gate(cluster)  # type: ignore[arg-type]
    assert evidence is Evidence.READY
    kept = samples[0]["samples"]
    assert len(kept) == 3  # three successes spanning 10 s, the last one fresh
    assert kept[-1]["at_s"] - kept[0]["at_s"] >= 10.0
    assert all(s["classification"] == "ok" for s in kept)
