"""Which context and SkyPilot config the pull probe uses for preflight-images and submit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import PreflightError, UsageError
from npa_infra.kube.models import KubeErrorKind
from npa_infra.testing import kube as fakes
from npa_infra.testing.kube import FakePodProber
from npa_infra.testing.registry import FakeRegistry
from npa_infra.workflow.planning import pullcheck
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.supervision import runner
from npa_infra.workflow.target import stackbinding
from npa_infra.workflow.target.services import Services
from npa_infra.workflow.target.stackfile import StackSettings

REPO = Path(__file__).resolve().parents[3]
LOOP_DECISION = REPO / "workflows" / "testing" / "loop-decision.yaml"
STACK = StackSettings(
    name="dev",
    path="stacks/Pulumi.dev.yaml",
    context="stack-ctx",
    controller_pod_config={"spec": {"imagePullSecrets": [{"name": "stack-pull"}]}},
)


@pytest.mark.parametrize(
    ("infra", "expected"),
    [(None, None), ("k8s/ctx", "ctx"), ("k8s/a/b", "a/b")],
    ids=["none", "context", "slash-in-name"],
)
def test_context_of(infra: str | None, expected: str | None) -> None:
    assert pullcheck.context_of(infra) == expected


@pytest.mark.parametrize("infra", ["nebius", "k8s/", "kubernetes/ctx"], ids=["vm", "empty", "typo"])
def test_context_of_rejects_anything_but_k8s_context(infra: str) -> None:
    with pytest.raises(UsageError):
        pullcheck.context_of(infra)


def test_submit_options_infra_context_wins_over_the_stacks() -> None:
    options = pullcheck.submit_options("k8s/ctx", STACK, plan_only=False, deadline_seconds=5)

    assert (options.context, options.infra, options.deadline_seconds) == ("ctx", "k8s/ctx", 5)


def test_submit_options_stack_context_and_the_config_a_live_submit_writes() -> None:
    options = pullcheck.submit_options(None, STACK, plan_only=False, deadline_seconds=1800)

    assert (options.context, options.infra) == ("stack-ctx", "k8s/stack-ctx")
    assert options.sky_config is not None
    assert options.sky_config["kubernetes"]["pod_config"] == STACK.controller_pod_config
    assert options.sky_config["kubernetes"]["allowed_contexts"] == ["stack-ctx"]
    assert stackbinding.controller_settings(STACK).pod_config == STACK.controller_pod_config


def test_submit_options_no_context_anywhere() -> None:
    options = pullcheck.submit_options(None, None, plan_only=False, deadline_seconds=1800)
    assert (options.context, options.infra, options.sky_config) == (None, None, {})


def _options(tmp_path: Path, **kw: Any) -> submitflags.SubmitOptions:
    values: dict[str, Any] = {
        "run_id": "pc-1",
        "assume_decision": "loop_back",
        "infra": "k8s/ctx",
        "resolve_accelerators": False,
        "render_dir": tmp_path / "out",
    }
    values.update(kw)
    return submitflags.SubmitOptions(**values)


def test_submit_live_uses_the_global_pull_secret_of_the_generated_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "execute", lambda *a, **k: "launched")
    monkeypatch.setattr(pipeline, "_stack_settings", lambda options, env, services=None: STACK)
    fake = FakePodProber("stack-ctx", service_accounts={"skypilot-service-account": ("sa",)})

    result = pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path, infra=None, stack="dev"),
        env={"NPA_HOME": str(tmp_path / "home")},
        services=Services(registry=lambda *_: FakeRegistry(), prober=lambda context, env: fake),
    )

    assert result == "launched"
    assert {tuple(p["name"] for p in c["spec"]["imagePullSecrets"]) for c in fake.created} == {  # type: ignore[index]  # JSON
        ("stack-pull",)
    }


def test_submit_live_probe_cleanup_failure_blocks_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[object] = []
    monkeypatch.setattr(runner, "execute", lambda *a, **k: launched.append(a))
    fake = FakePodProber("ctx")
    fake.faults["delete"] = [fakes.kube_error(KubeErrorKind.FORBIDDEN)] * 3

    with pytest.raises(PreflightError) as info:
        pipeline.submit(
            LOOP_DECISION,
            _options(tmp_path),
            env={"NPA_HOME": str(tmp_path / "home")},
            services=Services(registry=lambda *_: FakeRegistry(), prober=lambda context, env: fake),
        )

    assert launched == []
    checks = info.value.details["preflight"]["checks"]  # type: ignore[index]  # JSON details
    assert {c["probe"]["cleanup"] for c in checks} == {"failed"}
    assert len(fake.pods) == 3  # left labelled for inspection


def test_submit_no_preflight_images_never_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "execute", lambda *a, **k: "launched")

    def never(context: str, env: object) -> FakePodProber:
        raise AssertionError("--no-preflight-images skips the pull probe")

    result = pipeline.submit(
        LOOP_DECISION,
        _options(tmp_path, preflight_images=False),
        env={"NPA_HOME": str(tmp_path / "home")},
        services=Services(prober=never),
    )

    assert result == "launched"


def test_submit_invocation_keeps_a_non_default_bootstrap_timeout(tmp_path: Path) -> None:
    options = _options(tmp_path, image_bootstrap_timeout_seconds=0)
    words = submitflags.resume_argv(LOOP_DECISION, options, "pc-1")
    flag = words.index("--image-bootstrap-timeout-seconds")
    assert words[flag + 1] == "0"
    default = submitflags.resume_argv(LOOP_DECISION, _options(tmp_path), "pc-1")
    assert "--image-bootstrap-timeout-seconds" not in default
