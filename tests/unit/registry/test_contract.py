"""The bootstrap-contract rule (runtime-reference.md §8): which images are held to it, and the verdict."""

from __future__ import annotations

import pytest

from npa_infra.registry import classify, contract, reference
from npa_infra.registry.contract import CONTRACT, LABEL, LabelsResult, Reason
from npa_infra.registry.models import CheckStatus, ImageRef

GHCR = "ghcr.io/nebius/nebius-physical-ai"
NEBIUS = "cr.eu-north1.nebius.cloud/e00abc"
BUILD = "docker buildx build --platform linux/amd64 -t x --push images/workbench"


def _ref(text: str) -> ImageRef:
    parsed = reference.parse(text)
    assert isinstance(parsed, ImageRef), parsed
    return parsed


@pytest.mark.parametrize(
    ("image", "registries", "trusted"),
    [
        (f"{GHCR}/npa-workbench:0.12.4", (GHCR,), True),
        (f"{GHCR}/npa-workbench@sha256:" + "a" * 64, (GHCR,), True),
        (f"{GHCR}/workbench:0.12.4", (GHCR,), False),
        (f"{GHCR}/npa-workbench:0.12.4", (), False),
        (f"{GHCR}/npa-workbench:0.12.4", (NEBIUS,), False),
        (f"{NEBIUS}/npa-cosmos:1", (GHCR, NEBIUS), True),
        (f"{NEBIUS}/team/npa-cosmos:1", (NEBIUS,), True),
        ("cr.eu-north1.nebius.cloud/e00abcd/npa-cosmos:1", (NEBIUS,), False),
        ("cr.eu-north1.nebius.cloud/other/npa-cosmos:1", (NEBIUS,), False),
        ("cr.eu-north1.nebius.cloud/other/npa-cosmos:1", ("cr.eu-north1.nebius.cloud",), True),
        ("ghcr.io/nebius/npa-workbench:1", (GHCR,), False),
        ("ghcr.io/evil/nebius-physical-ai/npa-workbench:1", (GHCR,), False),
        ("evil.io/nebius/nebius-physical-ai/npa-workbench:1", (GHCR,), False),
        (f"{GHCR}/npa-workbench:1", (f"  https://{GHCR.upper()}/  ",), True),
        ("127.0.0.1:5000/public/npa-x:v1", ("127.0.0.1:5000/public",), True),
        ("127.0.0.1:5001/public/npa-x:v1", ("127.0.0.1:5000/public",), False),
        ("nebius/npa-x:1", ("docker.io/nebius",), True),
        ("docker.io/nebius/npa-x:1", ("nebius",), True),
        (f"{GHCR}/npa-workbench:1", ("", "   "), False),
        (f"{GHCR}/xnpa-workbench:1", (GHCR,), False),
    ],
    ids=[
        "ghcr-project-image",
        "ghcr-by-digest",
        "basename-without-npa-prefix",
        "no-trusted-registries",
        "other-trusted-registry-only",
        "npa-registry",
        "nested-under-npa-registry",
        "path-prefix-not-at-component-boundary",
        "sibling-path-on-same-host",
        "host-only-registry-trusts-every-path",
        "parent-of-trusted-path",
        "trusted-path-on-other-prefix",
        "trusted-path-on-other-host",
        "scheme-case-and-slashes-ignored",
        "loopback-with-port",
        "other-port",
        "docker-hub-alias-in-registry",
        "docker-hub-alias-in-image",
        "blank-registries-ignored",
        "npa-not-a-prefix",
    ],
)
def test_is_trusted_table(image: str, registries: tuple[str, ...], trusted: bool) -> None:
    assert contract.is_trusted(_ref(image), registries) is trusted


UNREACHABLE = classify.transport("timeout", "r.io", "read timed out")
MISMATCH = classify.digest_mismatch("sha256:" + "a" * 64, "sha256:" + "b" * 64, what="x")


@pytest.mark.parametrize(
    ("read", "build", "reason", "status", "code"),
    [
        (LabelsResult({LABEL: CONTRACT}, "sha256:c"), None, Reason.ATTESTED, CheckStatus.OK, None),
        (
            LabelsResult({LABEL: CONTRACT, "other": "x"}, "sha256:c"),
            BUILD,
            Reason.ATTESTED,
            CheckStatus.OK,
            None,
        ),
        (
            LabelsResult({}, "sha256:c"),
            None,
            Reason.MISSING,
            CheckStatus.PROBE_INCOMPATIBLE,
            "BOOTSTRAP_LABEL_MISSING",
        ),
        (
            LabelsResult({"org.nebius.npa.other": CONTRACT}, "sha256:c"),
            BUILD,
            Reason.MISSING,
            CheckStatus.PROBE_INCOMPATIBLE,
            "BOOTSTRAP_LABEL_MISSING",
        ),
        (
            LabelsResult({LABEL: "skypilot-0.11.0-v1"}, "sha256:c"),
            None,
            Reason.MISMATCH,
            CheckStatus.PROBE_INCOMPATIBLE,
            "BOOTSTRAP_LABEL_MISMATCH",
        ),
        (
            LabelsResult({LABEL: ""}, "sha256:c"),
            BUILD,
            Reason.MISMATCH,
            CheckStatus.PROBE_INCOMPATIBLE,
            "BOOTSTRAP_LABEL_MISMATCH",
        ),
        (
            LabelsResult({LABEL: CONTRACT + " "}, "sha256:c"),
            None,
            Reason.MISMATCH,
            CheckStatus.PROBE_INCOMPATIBLE,
            "BOOTSTRAP_LABEL_MISMATCH",
        ),
        (
            LabelsResult(failure=UNREACHABLE),
            BUILD,
            Reason.UNREADABLE,
            CheckStatus.PROBE_INDETERMINATE,
            None,
        ),
        (
            LabelsResult(failure=MISMATCH),
            None,
            Reason.UNREADABLE,
            CheckStatus.PROBE_INDETERMINATE,
            "DIGEST_MISMATCH",
        ),
    ],
    ids=[
        "contract-label",
        "contract-label-among-others",
        "no-labels",
        "other-labels-only",
        "older-contract",
        "empty-value",
        "value-with-trailing-space",
        "unreachable",
        "digest-mismatch",
    ],
)
def test_decide_table(
    read: LabelsResult, build: str | None, reason: Reason, status: CheckStatus, code: str | None
) -> None:
    verdict = contract.decide(read, build=build)

    assert (verdict.reason, verdict.status, verdict.error_code) == (reason, status, code)


def test_decide_missing_names_label_found_and_expected_and_generic_remedy() -> None:
    verdict = contract.decide(LabelsResult({}, "sha256:cfg"))

    assert f"label {LABEL} is missing from image config sha256:cfg" in verdict.detail
    assert f"expected {CONTRACT}" in verdict.detail
    assert verdict.remedy.startswith(f"rebuild the image with LABEL {LABEL}={CONTRACT}")
    assert verdict.http_status == 200


def test_decide_mismatch_names_value_found_and_build_command_remedy() -> None:
    verdict = contract.decide(LabelsResult({LABEL: "skypilot-0.11.0-v1"}, "sha256:c"), build=BUILD)

    assert f"{LABEL} is 'skypilot-0.11.0-v1'" in verdict.detail
    assert f"expected {CONTRACT}" in verdict.detail
    assert verdict.remedy.endswith(BUILD)
    assert f"LABEL {LABEL}={CONTRACT}" in verdict.remedy


def test_decide_unreadable_keeps_the_failure_evidence() -> None:
    verdict = contract.decide(LabelsResult(failure=UNREACHABLE), build=BUILD)

    assert "(unreachable): timeout reaching r.io" in verdict.detail
    assert LABEL in verdict.detail
    assert verdict.remedy == UNREACHABLE.remedy
    assert verdict.http_status is None


def test_decide_overlong_value_is_trimmed() -> None:
    verdict = contract.decide(LabelsResult({LABEL: "v" * 5000}))

    assert verdict.status is CheckStatus.PROBE_INCOMPATIBLE
    assert len(verdict.detail) < 400
    assert "the image config" in verdict.detail
