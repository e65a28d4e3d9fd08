"""The pull probe's stop condition and verdict (kubernetes.md §4.4, §9.4, §9.5); pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given

from npa_infra.kube.models import ContainerWaiting, PodObservation, ProbePod
from npa_infra.registry.models import ProbeCleanup, ProbeVerdict
from preflight import probe_pod, probe_verdict
from preflight.probe_paths import Placement, ProbePath
from preflight.probe_verdict import Observation, Reason
from tests import strategies

DIGEST = "sha256:" + "a" * 64
CHILD = "sha256:" + "c" * 64
OTHER = "sha256:" + "b" * 64
OK = Observation(
    created=True,
    phase="Succeeded",
    image_id=f"reg.example.com/app@{DIGEST}",
    cleanup=ProbeCleanup.VERIFIED,
)


@pytest.mark.parametrize(
    ("obs", "status", "reason"),
    [
        (OK, ProbeVerdict.COMPATIBLE, Reason.PROVEN),
        (
            replace(OK, image_id=f"docker-pullable://reg.example.com/app@{DIGEST}"),
            ProbeVerdict.COMPATIBLE,
            Reason.PROVEN,
        ),
        (replace(OK, image_id=f"reg/app@{CHILD}"), ProbeVerdict.COMPATIBLE, Reason.PROVEN),
        (
            replace(OK, image_id=f"reg/app@{OTHER}"),
            ProbeVerdict.INDETERMINATE,
            Reason.DIGEST_MISMATCH,
        ),
        (
            replace(OK, image_id="sha256:" + "e" * 64),
            ProbeVerdict.INDETERMINATE,
            Reason.OPAQUE_IMAGE_ID,
        ),
        (replace(OK, image_id=""), ProbeVerdict.INDETERMINATE, Reason.OPAQUE_IMAGE_ID),
        (Observation(problem="403"), ProbeVerdict.INDETERMINATE, Reason.NOT_CREATED),
        (
            replace(OK, drift=("nodeSelector: …",)),
            ProbeVerdict.INDETERMINATE,
            Reason.IDENTITY_DRIFT,
        ),
        (
            replace(OK, phase="Failed", drift=("x",)),
            ProbeVerdict.INDETERMINATE,
            Reason.IDENTITY_DRIFT,
        ),
        (replace(OK, account_changed=True), ProbeVerdict.INDETERMINATE, Reason.ACCOUNT_CHANGED),
        (replace(OK, phase="Failed"), ProbeVerdict.INCOMPATIBLE, Reason.CONTAINER_FAILED),
        (
            replace(OK, phase="Failed", cleanup=ProbeCleanup.FAILED),
            ProbeVerdict.INCOMPATIBLE,
            Reason.CONTAINER_FAILED,
        ),
        (
            replace(OK, phase="Pending", permanent="IMAGE_PULL_AUTH: ErrImagePull: 401"),
            ProbeVerdict.INCOMPATIBLE,
            Reason.PERMANENT_WAITING,
        ),
        (
            replace(OK, cleanup=ProbeCleanup.FAILED),
            ProbeVerdict.INDETERMINATE,
            Reason.CLEANUP_FAILED,
        ),
        (
            replace(OK, phase="Pending", deadline_expired=True),
            ProbeVerdict.INDETERMINATE,
            Reason.DEADLINE,
        ),
        (
            replace(OK, phase="Running", vanished=True),
            ProbeVerdict.INDETERMINATE,
            Reason.POD_VANISHED,
        ),
        (
            replace(OK, phase="Running", problem="watch failed"),
            ProbeVerdict.INDETERMINATE,
            Reason.OBSERVATION_FAILED,
        ),
    ],
    ids=[
        "digest-equal",
        "docker-pullable-prefix",
        "declared-platform-digest",
        "other-digest",
        "opaque-image-id",
        "no-image-id",
        "not-created",
        "identity-drift",
        "drift-beats-failed",
        "service-account-changed",
        "container-failed",
        "failed-even-if-cleanup-failed",
        "permanent-waiting",
        "cleanup-failed-blocks",
        "deadline",
        "vanished",
        "watch-failed",
    ],
)
def test_decide_table(obs: Observation, status: ProbeVerdict, reason: Reason) -> None:
    verdict = probe_verdict.decide(obs, digest=DIGEST, platform_digest=CHILD)
    assert (verdict.status, verdict.reason) == (status, reason)


def test_decide_platform_digest_only_when_declared() -> None:
    obs = replace(OK, image_id=f"reg/app@{CHILD}")
    verdict = probe_verdict.decide(obs, digest=DIGEST, platform_digest=None)
    assert verdict.reason is Reason.DIGEST_MISMATCH


@given(strategies.probe_observation_fields())
def test_decide_is_total_and_compatible_only_when_proven(fields: dict[str, Any]) -> None:
    obs = Observation(**fields)

    verdict = probe_verdict.decide(obs, digest=DIGEST, platform_digest=None)

    if verdict.status is ProbeVerdict.COMPATIBLE:  # kubernetes.md §9.5, all three gates
        assert obs.phase == "Succeeded" and obs.cleanup is ProbeCleanup.VERIFIED
        assert probe_verdict.image_digest(obs.image_id) == DIGEST
        assert obs.created and not obs.drift and not obs.account_changed


@given(strategies.image_id_texts())
@example(f"ghcr.io/x/y@{DIGEST}")
@example(f"docker-pullable://ghcr.io/x/y@{DIGEST}")
@example(f"ghcr.io/x/y@{DIGEST}x")
@example("sha256:" + "a" * 64)
def test_image_digest_parser_total_and_exact(text: str) -> None:
    found = probe_verdict.image_digest(text)
    if found is not None:
        assert text.strip().endswith("@" + found)
        assert len(found) == 71 and found.startswith("sha256:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"ghcr.io/x/y@{DIGEST}", DIGEST),
        (f"docker-pullable://ghcr.io/x/y@{DIGEST}", DIGEST),
        (DIGEST, None),
        ("ghcr.io/x/y:latest", None),
        (f"ghcr.io/x/y@{DIGEST[:-1]}", None),
        (f"ghcr.io/x/y@{DIGEST.upper()}", None),
    ],
    ids=["containerd", "docker", "bare-image-id", "tag", "short-hex", "uppercase"],
)
def test_image_digest_table(text: str, expected: str | None) -> None:
    assert probe_verdict.image_digest(text) == expected


PATH = ProbePath("ctx", "ns", "sa", ("regcred",), Placement())
REQUESTED = probe_pod.manifest(
    PATH,
    image=f"reg/app@{DIGEST}",
    digest=DIGEST,
    nonce="0123456789abcdef",
    run_id="r",
    contract="skypilot-0.12.2-v1",
)


def _pod(**fields: Any) -> ProbePod:
    meta = REQUESTED["metadata"]
    base = ProbePod(
        name=meta["name"],
        namespace="ns",
        uid="u",
        labels=dict(meta["labels"]),
        spec=REQUESTED["spec"],
        observation=PodObservation(meta["name"], "ns"),
    )
    return replace(base, **fields)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod(), ""),
        (_pod(phase="Running"), ""),
        (_pod(phase="Succeeded"), "Succeeded"),
        (_pod(phase="Failed"), "Failed"),
        (_pod(deleted=True), "deleted"),
        (
            _pod(
                observation=PodObservation(
                    "p",
                    "ns",
                    container_waiting=(
                        ContainerWaiting("probe", "ErrImagePull", "401 Unauthorized"),
                    ),
                )
            ),
            "IMAGE_PULL_AUTH",
        ),
        (
            _pod(
                observation=PodObservation(
                    "p",
                    "ns",
                    container_waiting=(ContainerWaiting("probe", "ErrImagePull", "i/o timeout"),),
                )
            ),
            "",
        ),
        (_pod(spec={**REQUESTED["spec"], "serviceAccountName": "default"}), "identity drift"),
    ],
    ids=[
        "pending",
        "running",
        "succeeded",
        "failed",
        "deleted",
        "permanent-auth",
        "transient-pull-keeps-watching",
        "drift",
    ],
)
def test_stop_reason_table(pod: ProbePod, expected: str) -> None:
    assert probe_verdict.stop_reason(pod, REQUESTED, expected_pull_secrets=("regcred",)) == expected
