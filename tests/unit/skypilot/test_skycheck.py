"""``skypilot.skycheck``: verify's findings from ``sky check kubernetes`` and the API server."""

from __future__ import annotations

import pytest

from npa_infra.errors import ConfigError, SkyPilotDriftError
from npa_infra.skypilot import skycheck
from npa_infra.skypilot.checkoutput import CheckResult, CheckVerdict
from npa_infra.skypilot.models import CommandResult, ErrorKind

CTX = "npa-ctx"
LOCAL = "http://127.0.0.1:46580"
REMOTE = {"SKYPILOT_API_SERVER_ENDPOINT": "https://sky.example.com/"}


def answer(
    verdict: CheckVerdict,
    *,
    reason: str = "",
    contexts: tuple[tuple[str, str], ...] = (),
    endpoint: str | None = LOCAL,
    kind: ErrorKind = ErrorKind.NONE,
    detail: str = "",
) -> CheckResult:
    command = CommandResult(
        ("sky", "check", "kubernetes"), 0 if kind is ErrorKind.NONE else 1, "", ""
    )
    return CheckResult("kubernetes", verdict, reason, contexts, endpoint, kind, detail, command)


def by_name(outcome: skycheck.SkyOutcome) -> dict[str, skycheck.Finding]:
    return {f.name: f for f in outcome.findings}


def test_run_enabled_ok_and_server_reported() -> None:
    outcome = skycheck.run(
        lambda: answer(CheckVerdict.ENABLED, contexts=((CTX, "enabled."),)), CTX, {}
    )

    found = by_name(outcome)
    assert outcome.enabled
    assert found["sky_check_kubernetes"].ok
    assert found["sky_check_kubernetes"].detail.startswith(
        f"SkyPilot enabled Kubernetes on '{CTX}'"
    )
    assert found["api_server"] == skycheck.Finding(
        "api_server", True, f"`sky check` ran on the local API server {LOCAL}"
    )
    assert outcome.server == skycheck.ApiServerUsed(endpoint=LOCAL, remote=False, reported=True)
    assert outcome.summary.verdict == "enabled"
    assert outcome.summary.contexts == {CTX: "enabled."}


def test_run_disabled_reason_in_detail_and_summary() -> None:
    reason = "`socat` is required to setup Kubernetes cloud ... not installed."

    outcome = skycheck.run(lambda: answer(CheckVerdict.DISABLED, reason=reason), CTX, {})

    check = by_name(outcome)["sky_check_kubernetes"]
    assert not outcome.enabled
    assert (check.ok, check.detail) == (False, f"SkyPilot disabled Kubernetes: {reason}")
    assert f"npa skypilot verify --cluster {CTX}" in check.remedy
    assert outcome.summary.reason == reason
    assert by_name(outcome)["api_server"].ok  # the server answered, with a "no"


def test_run_enabled_but_own_context_disabled_fails() -> None:
    contexts = ((CTX, "disabled. Reason: (401)"),)

    outcome = skycheck.run(lambda: answer(CheckVerdict.ENABLED, contexts=contexts), CTX, {})

    check = by_name(outcome)["sky_check_kubernetes"]
    assert not check.ok
    assert f"context '{CTX}' is disabled. Reason: (401)" in check.detail


@pytest.mark.parametrize(
    ("env", "endpoint", "remedy"),
    [
        ({}, LOCAL, "`npa skypilot status` shows the local API server"),
        (REMOTE, "https://sky.example.com", "`curl https://sky.example.com/api/health`"),
    ],
    ids=["local", "remote"],
)
def test_run_unreachable_server_names_endpoint_and_remedy(
    env: dict[str, str], endpoint: str, remedy: str
) -> None:
    refused = answer(
        CheckVerdict.UNKNOWN, endpoint=None, kind=ErrorKind.API_WARMUP, detail="Could not connect"
    )

    outcome = skycheck.run(lambda: refused, CTX, env)

    found = by_name(outcome)
    assert not found["sky_check_kubernetes"].ok
    assert endpoint in found["sky_check_kubernetes"].detail
    server = found["api_server"]
    assert not server.ok
    assert endpoint in server.detail and "Could not connect" in server.detail
    assert remedy in server.remedy
    assert outcome.server == skycheck.ApiServerUsed(
        endpoint=endpoint, remote=bool(env), reported=False
    )


def test_run_missing_binary_names_bootstrap() -> None:
    missing = answer(CheckVerdict.UNKNOWN, endpoint=None, kind=ErrorKind.NOT_FOUND, detail="nope")

    check = by_name(skycheck.run(lambda: missing, CTX, {}))["sky_check_kubernetes"]

    assert not check.ok
    assert "npa skypilot bootstrap" in check.remedy


def test_run_answer_without_endpoint_line_server_unproven() -> None:
    silent = answer(CheckVerdict.ENABLED, endpoint=None)

    server = by_name(skycheck.run(lambda: silent, CTX, {}))["api_server"]

    assert not server.ok
    assert "did not say which API server" in server.detail


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("no SkyPilot binary is configured", remedy="run `npa skypilot bootstrap`"),
        SkyPilotDriftError("kubernetes 37.0.2 is outside the pin", remedy="npa skypilot bootstrap"),
    ],
    ids=["no-binary", "drift"],
)
def test_run_refusal_before_sky_is_the_finding_not_raised(error: ConfigError) -> None:
    def refuse() -> CheckResult:
        raise error

    outcome = skycheck.run(refuse, CTX, {})

    assert [f.name for f in outcome.findings] == ["sky_check_kubernetes"]
    check = outcome.findings[0]
    assert check == skycheck.Finding(
        "sky_check_kubernetes",
        False,
        f"SkyPilot could not run `sky check kubernetes`: {error.message}",
        error.remedy,
    )
    assert outcome.summary.verdict == skycheck.NOT_RUN
    assert outcome.summary.returncode is None
    assert outcome.server.reported is False


def test_run_without_check_context_unknown_not_run() -> None:
    outcome = skycheck.run(None, "missing", {})

    assert outcome.summary.verdict == skycheck.NOT_RUN
    assert "not in the kubeconfig" in outcome.findings[0].detail
    assert not outcome.enabled
