"""The probe over a preflight report: which rows, which paths, the cache (kubernetes.md §9, cli.md §1.3)."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import KubeError
from npa_infra.kube.models import KubeErrorKind, NodeInfo, ProbePod
from npa_infra.registry.models import CheckResult, CheckStatus, ProbeVerdict
from npa_infra.testing import kube as fakes
from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import fake_digest
from preflight import pull_probe
from preflight.images import ImagePreflightReport
from preflight.probe_cache import ProbeCache
from preflight.probe_runner import Tools
from preflight.targets import StepImage

APP = "reg.example.com/team/app:v1"
TOOL = "reg.example.com/team/tool:v1"
K8S = {"cloud": "kubernetes"}
SA = "skypilot-service-account"


def _row(image: str, status: CheckStatus = CheckStatus.OK) -> CheckResult:
    return CheckResult(image=image, status=status, digest=fake_digest(image), steps=("s",))


def _report(*rows: CheckResult) -> ImagePreflightReport:
    return ImagePreflightReport(rows=rows)


def _request(**kw: Any) -> pull_probe.ProbeRequest:
    values: dict[str, Any] = {"run_id": "r", "contract": "skypilot-0.12.2-v1", "context": "ctx"}
    values.update(kw)
    return pull_probe.ProbeRequest(**values)


class Opener:
    """Hands out one fake and records every context it was asked for."""

    def __init__(self, fake: FakePodProber | None = None) -> None:
        self.fake = fake or FakePodProber("ctx")
        self.contexts: list[str] = []

    def __call__(self, context: str) -> FakePodProber:
        self.contexts.append(context)
        return self.fake


def _probe(
    report: ImagePreflightReport,
    steps: list[StepImage],
    opener: Opener,
    *,
    cache: ProbeCache | None = None,
    **kw: Any,
) -> ImagePreflightReport:
    return pull_probe.probe_report(
        report,
        steps,
        _request(**kw),
        open_prober=opener,
        cache=cache,
        tools=Tools(sleep=lambda s: None),
    )


@pytest.mark.parametrize(
    ("profile", "kw", "status", "needle"),
    [
        ({"cloud": "nebius"}, {}, CheckStatus.OK, ""),
        ({}, {}, CheckStatus.TARGET_PULL_UNVERIFIED, "omit `cloud`"),
        (K8S, {"plan_only": True}, CheckStatus.TARGET_PULL_UNVERIFIED, "--plan-only"),
        (K8S, {"context": None}, CheckStatus.TARGET_PULL_UNVERIFIED, "no exact --infra"),
        ({}, {"infra": "nebius", "context": None}, CheckStatus.OK, ""),
    ],
    ids=["vm-step", "no-cloud-no-infra", "plan-only", "no-context", "no-cloud-vm-infra"],
)
def test_rows_that_create_no_pod(
    profile: dict[str, Any], kw: dict[str, Any], status: CheckStatus, needle: str
) -> None:
    opener = Opener()

    report = _probe(_report(_row(APP)), [StepImage("s", APP, profile)], opener, **kw)

    (row,) = report.rows
    assert row.status is status and needle in row.detail
    assert row.probe is None and row.digest == fake_digest(APP)
    assert opener.contexts == []


def test_registry_failures_are_never_probed() -> None:
    opener = Opener()
    rows = (_row(APP, CheckStatus.NOT_FOUND), _row(TOOL, CheckStatus.PROBE_INCOMPATIBLE))

    report = _probe(_report(*rows), [StepImage("a", APP, K8S), StepImage("b", TOOL, K8S)], opener)

    assert report.rows == rows and opener.contexts == []


def test_compatible_row_stays_ok_with_its_probe() -> None:
    opener = Opener()

    report = _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener)

    (row,) = report.rows
    assert row.status is CheckStatus.OK and row.probe is not None
    assert (row.probe.status, row.probe.namespace, row.probe.node) == (
        ProbeVerdict.COMPATIBLE,
        "default",
        "node-1",
    )
    assert opener.contexts == ["ctx"] and opener.fake.closed
    assert report.exit_code == 0


def test_incompatible_row_remedy_names_the_service_account() -> None:
    opener = Opener(FakePodProber("ctx", kubelet=fakes.pull_auth_failure))

    (row,) = _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener).rows

    assert row.status is CheckStatus.PROBE_INCOMPATIBLE
    assert row.detail.startswith(f"in-cluster pull probe (context ctx, default/{SA}):")
    assert f"give ServiceAccount default/{SA}" in row.remedy


def test_distinct_paths_probed_once_each_worst_decides() -> None:
    def by_pool(pod: ProbePod) -> ProbePod:
        pool = (pod.spec.get("nodeSelector") or {}).get("pool")  # type: ignore[union-attr]  # JSON
        return fakes.fail()(pod) if pool == "b" else fakes.succeed(pod)

    opener = Opener(FakePodProber("ctx", kubelet=by_pool))
    a = {**K8S, "kubernetes": {"pod_config": {"spec": {"nodeSelector": {"pool": "a"}}}}}
    b = {**K8S, "kubernetes": {"pod_config": {"spec": {"nodeSelector": {"pool": "b"}}}}}
    steps = [StepImage("s1", APP, a), StepImage("s2", APP, a), StepImage("s3", APP, b)]

    (row,) = _probe(_report(_row(APP)), steps, opener).rows

    assert len(opener.fake.created) == 2  # s1 and s2 share one path
    assert row.status is CheckStatus.PROBE_INCOMPATIBLE
    assert row.probe is not None and row.probe.reason.startswith("container_failed")


def test_probes_run_concurrently_across_rows() -> None:
    barrier = threading.Barrier(2, timeout=10)

    def meet(pod: ProbePod) -> ProbePod:
        barrier.wait()  # both probes must be in flight at once
        return fakes.succeed(pod)

    opener = Opener(FakePodProber("ctx", kubelet=meet))

    report = _probe(
        _report(_row(APP), _row(TOOL)),
        [StepImage("a", APP, K8S), StepImage("b", TOOL, K8S)],
        opener,
    )

    assert [r.status for r in report.rows] == [CheckStatus.OK, CheckStatus.OK]
    assert not barrier.broken


def test_gpu_step_catalog_read_once_unmatched_is_indeterminate() -> None:
    node = NodeInfo("g1", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, (), True, False, 8)
    opener = Opener(FakePodProber("ctx", nodes=[node]))
    steps = [
        StepImage("train", APP, {**K8S, "accelerators": "H100:8"}),
        StepImage("eval", TOOL, {**K8S, "accelerators": "B200:1"}),
    ]

    app, tool = _probe(_report(_row(APP), _row(TOOL)), steps, opener).rows

    assert app.status is CheckStatus.OK
    assert tool.status is CheckStatus.PROBE_INDETERMINATE
    assert tool.detail.startswith("state eval: no GPU node of context 'ctx' matches B200:1")
    assert opener.fake.calls.count("nodes") == 1
    affinity = opener.fake.created[0]["spec"]["affinity"]  # type: ignore[index]  # JSON
    assert "NVIDIA-H100-80GB-HBM3" in json.dumps(affinity)


def test_unknown_context_is_a_precondition_failure() -> None:
    def refuse(context: str) -> FakePodProber:
        raise KubeError("context 'ctx' is not defined", details={"kind": "unknown_context"})

    with pytest.raises(KubeError):
        pull_probe.probe_report(
            _report(_row(APP)), [StepImage("s", APP, K8S)], _request(), open_prober=refuse
        )


def test_interrupt_with_several_probes_deletes_every_pod() -> None:
    barrier = threading.Barrier(2, timeout=10)

    def interrupt_one(pod: ProbePod) -> ProbePod:
        barrier.wait()  # both pods exist
        if pod.spec["containers"][0]["image"].startswith(APP.split(":")[0]):  # type: ignore[index]  # JSON
            raise KeyboardInterrupt
        return fakes.stay_pending(pod)

    fake = FakePodProber("ctx", kubelet=interrupt_one)

    with pytest.raises(KeyboardInterrupt):
        pull_probe.probe_report(
            _report(_row(APP), _row(TOOL)),
            [StepImage("a", APP, K8S), StepImage("b", TOOL, K8S)],
            _request(deadline_seconds=0),
            open_prober=Opener(fake),
            tools=Tools(sleep=lambda s: None),
        )

    assert fake.pods == {} and len(fake.deleted) == 2


# -- the cache ------------------------------------------------------------------------------


def test_cache_hit_creates_no_pod_and_file_is_private(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "home" / "cache" / "image-pull-probe.json")
    opener = Opener()
    steps = [StepImage("s", APP, K8S)]

    first = _probe(_report(_row(APP)), steps, opener, cache=cache)
    second = _probe(_report(_row(APP)), steps, opener, cache=cache)

    assert len(opener.fake.created) == 1
    assert second.rows[0].status is CheckStatus.OK
    assert second.rows[0].probe is not None
    assert second.rows[0].probe.reason == "cached: " + first.rows[0].probe.reason  # type: ignore[union-attr]
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.path.parent.stat().st_mode) == 0o700
    (key,) = json.loads(cache.path.read_text())["entries"]
    assert key.startswith(f"{fake_digest(APP)}|skypilot-0.12.2-v1|ctx|default|{SA}|")


def test_cache_keys_on_the_path_not_only_the_digest(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "cache.json")
    fake = FakePodProber("ctx", service_accounts={SA: ("one",), "other-sa": ()})
    opener = Opener(fake)
    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)

    fake.service_accounts[SA] = ("two",)  # the inherited secrets changed
    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)
    _probe(
        _report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache, base_account="other-sa"
    )

    assert len(fake.created) == 3


def test_cache_never_keeps_unproven_results(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "cache.json")
    opener = Opener(FakePodProber("ctx", kubelet=fakes.opaque_image_id))

    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)
    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)

    assert len(opener.fake.created) == 2 and not cache.path.exists()


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"version": 99, "entries": {}}', '{"version": 1, "entries": {"k": 5}}'],
    ids=["corrupt", "not-a-mapping", "other-version", "bad-entry"],
)
def test_corrupt_cache_is_ignored_then_replaced(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cache.json"
    path.write_text(content)
    opener = Opener()

    report = _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=ProbeCache(path))

    assert report.rows[0].status is CheckStatus.OK
    assert json.loads(path.read_text())["version"] == 1


def test_cache_tampered_status_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    cache = ProbeCache(path)
    opener = Opener()
    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        entry["status"] = "indeterminate"
    path.write_text(json.dumps(data))

    _probe(_report(_row(APP)), [StepImage("s", APP, K8S)], opener, cache=cache)

    assert len(opener.fake.created) == 2


def test_kube_error_kind_of_fake_errors() -> None:
    error = fakes.kube_error(KubeErrorKind.SERVER)
    assert error.details["kind"] == "server"
