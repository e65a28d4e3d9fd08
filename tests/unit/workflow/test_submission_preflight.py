"""``submit``'s image gate through the SDK (cli.md §1.4): checked before launch, digests rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npa_infra.catalog import images as pins
from npa_infra.errors import PreflightError
from npa_infra.registry.models import CheckStatus, ManifestCheck
from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import FakeRegistry, fake_digest
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.planning.fingerprint import plan_fingerprint, run_fingerprint
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.supervision import runner
from npa_infra.workflow.target.services import Services

REPO = Path(__file__).resolve().parents[3]
LOOP_DECISION = REPO / "workflows" / "testing" / "loop-decision.yaml"
WORKBENCH = pins.catalog_image("npa-workbench", pins.DEFAULT_REGISTRY)
VIEWER = pins.catalog_image("npa-viewer", pins.DEFAULT_REGISTRY)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[liverun.LiveRequest]:
    requests: list[liverun.LiveRequest] = []

    def execute(request: liverun.LiveRequest, env: Any, services: Any = None) -> str:
        requests.append(request)
        return "launched"

    monkeypatch.setattr(runner, "execute", execute)
    return requests


def _options(tmp_path: Path, **overrides: Any) -> submitflags.SubmitOptions:
    values: dict[str, Any] = {
        "run_id": "pf-1",
        "assume_decision": "loop_back",
        "infra": "k8s/ctx",
        "resolve_accelerators": False,
        "render_dir": tmp_path / "out",
    }
    values.update(overrides)
    return submitflags.SubmitOptions(**values)


def _prober(context: str, env: object) -> FakePodProber:
    """A cluster whose probe pods succeed: every image pulls in-cluster."""
    return FakePodProber(context)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"NPA_HOME": str(tmp_path / "home")}


def test_submit_live_checks_every_branch_then_launches_pinned_jobs(
    tmp_path: Path, captured: list[liverun.LiveRequest]
) -> None:
    fake = FakeRegistry()

    result = pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path),
        env=_env(tmp_path),
        services=Services(registry=lambda *_: fake, prober=_prober),
    )

    assert result == "launched"
    assert VIEWER in fake.calls  # publish: only on the promote_checkpoint branch
    (request,) = captured
    text = "".join(job.text for job in request.jobs)
    assert "@sha256:" in text and ":0.12.4" not in text
    pinned = f"{WORKBENCH.rsplit(':', 1)[0]}@{fake_digest(WORKBENCH)}"
    assert pinned in text
    assert request.extra["image_preflight"]["decision"] == "passed"
    assert request.extra["image_preflight"]["pins"][WORKBENCH] == pinned
    assert fake.closed  # the caller of the factory closes what it returned


def test_submit_live_fingerprint_folds_pins_and_is_stable(
    tmp_path: Path, captured: list[liverun.LiveRequest]
) -> None:
    for _ in range(2):
        pipeline.submit(
            LOOP_DECISION,
            _options(tmp_path),
            env=_env(tmp_path),
            services=Services(registry=lambda *_: FakeRegistry(), prober=_prober),
        )

    first, second = captured
    assert first.fingerprint == second.fingerprint
    report = pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path, plan_only=True),
        env=_env(tmp_path),
        services=Services(registry=lambda *_: FakeRegistry(), prober=_prober),
    )
    assert isinstance(report, pipeline.SubmitReport) and report.plan is not None
    assert first.fingerprint != plan_fingerprint(report.plan)
    assert report.fingerprint == plan_fingerprint(report.plan)
    assert run_fingerprint(report.plan, {}) == plan_fingerprint(report.plan)


def test_submit_live_refused_before_execute_with_rows(
    tmp_path: Path, captured: list[liverun.LiveRequest]
) -> None:
    fake = FakeRegistry({VIEWER: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)})

    with pytest.raises(PreflightError) as info:
        pipeline.submit(
            LOOP_DECISION,
            _options(tmp_path),
            env=_env(tmp_path),
            services=Services(registry=lambda *_: fake, prober=_prober),
        )

    assert captured == []
    assert info.value.exit_code == 1
    checks = info.value.details["preflight"]["checks"]  # type: ignore[index]  # JSON details
    assert {c["image"]: c["status"] for c in checks}[VIEWER] == "not_found"
    assert not (tmp_path / "out").exists()


def test_submit_live_no_preflight_images_launches_tags_unchecked(
    tmp_path: Path, captured: list[liverun.LiveRequest]
) -> None:
    fake = FakeRegistry({VIEWER: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)})

    pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path, preflight_images=False),
        env=_env(tmp_path),
        services=Services(registry=lambda *_: fake, prober=_prober),
    )

    assert fake.calls == []
    (request,) = captured
    assert WORKBENCH in "".join(job.text for job in request.jobs)
    assert request.extra["image_preflight"] == {"decision": "skipped"}
    assert "--no-preflight-images" in request.invocation


def test_submit_runtime_replan_renders_pins(
    tmp_path: Path, captured: list[liverun.LiveRequest]
) -> None:
    pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path, runtime=True, assume_decision=""),
        env=_env(tmp_path),
        services=Services(registry=lambda *_: FakeRegistry(), prober=_prober),
    )

    (request,) = captured
    assert request.replan is not None
    routed = request.replan({})
    assert all("@sha256:" in image for job in routed.jobs for image in job.images)


def test_submit_raw_task_preflight_skipped(tmp_path: Path) -> None:
    raw = REPO / "workflows" / "testing" / "raw-skypilot.yaml"
    fake = FakeRegistry()

    report = pipeline.submit(
        raw,
        _options(tmp_path, plan_only=True, variables={"MESSAGE": "hi"}),
        env=_env(tmp_path),
        services=Services(registry=lambda *_: fake, prober=_prober),
    )

    assert isinstance(report, pipeline.SubmitReport)
    assert report.to_json()["preflight"]["decision"] == "skipped"
    assert fake.calls == []
