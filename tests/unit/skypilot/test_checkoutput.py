"""``skypilot.checkoutput``: SkyPilot's verdict in ``sky check kubernetes`` output (issue 17).

The disabled answer is recorded from the real 0.12.2 (``real/check_kubernetes_tools_missing.txt``);
the other forms follow ``sky/check.py``'s layout, as the simulator prints them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from npa_infra.skypilot import checkoutput, classify
from npa_infra.skypilot.checkoutput import CheckVerdict
from npa_infra.skypilot.models import CommandResult, ErrorKind
from tests import strategies
from tests.support.skysim import harness

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skypilot"
TAIL = (
    "\n\x1b[32m🎉 Enabled infra 🎉\x1b[0m\n  No infra to check/enabled.\n"
    "\x1b[2m\nTo enable a cloud, follow the hints above and rerun: \x1b[0m\x1b[1msky check\x1b[0m\n"
    "\nUsing SkyPilot API server: http://127.0.0.1:46580\n"
)
ENABLED = (
    "Checking credentials to enable infra for SkyPilot.\n"
    "\x1b[32m\x1b[22m  Kubernetes: enabled [compute]\x1b[0m\n    Allowed contexts:\n"
    "    \x1b[2m└── \x1b[0mnpa-ctx: \x1b[32menabled.\x1b[0m\x1b[0m\n"
    "\n\x1b[32m🎉 Enabled infra 🎉\x1b[0m\n  \x1b[32mKubernetes [compute]\x1b[0m\n"
    "    Allowed contexts:\n    \x1b[2m└── \x1b[0mnpa-ctx\n"
    "\nUsing SkyPilot API server: https://sky.example.com\n"
)
CONTEXT_DISABLED = (
    "Checking credentials to enable infra for SkyPilot.\n"
    "\x1b[2m  Kubernetes: disabled \x1b[0m\x1b[0m\n"
    "    Reason [compute]:     \n        Allowed contexts:\n"
    "        \x1b[2m└── \x1b[0mnpa-ctx: \x1b[91mdisabled.\x1b[0m\x1b[2m Reason: Invalid credentials"
    " - do you have permission to access the cluster?\x1b[0m\n" + TAIL
)


def result(stdout: str, code: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(("sky", "check", "kubernetes"), code, stdout, stderr)


def test_parse_check_recorded_tools_missing_disabled_with_reason() -> None:
    code, stdout, stderr = harness.read_recorded(
        FIXTURES / "real" / "check_kubernetes_tools_missing.txt"
    )

    answer = checkoutput.parse_check(result(stdout, code, stderr))

    assert answer.verdict is CheckVerdict.DISABLED
    assert answer.error_kind is ErrorKind.NONE
    assert answer.reason.splitlines()[0].startswith("`socat` is required to setup Kubernetes")
    assert "`nc` is required" in answer.reason
    assert "$ sudo apt install socat netcat" in answer.reason
    assert "\x1b" not in answer.reason
    assert "Enabled infra" not in answer.reason  # the block ends at the blank line
    assert answer.endpoint == "http://127.0.0.1:46580"
    assert answer.contexts == ()


def test_parse_check_enabled_contexts_and_remote_endpoint() -> None:
    answer = checkoutput.parse_check(result(ENABLED))

    assert answer.verdict is CheckVerdict.ENABLED
    assert answer.contexts == (("npa-ctx", "enabled."),)
    assert answer.reason == "Allowed contexts:\n└── npa-ctx: enabled."
    assert answer.endpoint == "https://sky.example.com"


def test_parse_check_context_disabled_reason_per_context() -> None:
    answer = checkoutput.parse_check(result(CONTEXT_DISABLED))

    assert answer.verdict is CheckVerdict.DISABLED
    reason = "disabled. Reason: Invalid credentials - do you have permission to access the cluster?"
    assert answer.contexts == (("npa-ctx", reason),)
    assert answer.reason == f"Allowed contexts:\n└── npa-ctx: {reason}"


def test_parse_check_banner_before_answer_still_parsed() -> None:
    banner = (
        "\x1b[2mFailed to connect to SkyPilot API server at http://127.0.0.1:46580. "
        "Starting a local server.\x1b[0m\n\x1b[0m\x1b[32m✓ SkyPilot API server started. \x1b[0m\n"
    )

    assert checkoutput.parse_check(result(banner + ENABLED)).verdict is CheckVerdict.ENABLED


@pytest.mark.parametrize(
    ("code", "stderr", "kind"),
    [
        (
            1,
            "sky.exceptions.ApiServerConnectionError: Could not connect to SkyPilot API server "
            "at http://127.0.0.1:46580.",
            ErrorKind.API_WARMUP,
        ),
        (127, "sky: not found", ErrorKind.NOT_FOUND),
        (2, "Usage: sky check [OPTIONS]\nError: No such option: --x", ErrorKind.USAGE),
        (1, "RuntimeError: boom", ErrorKind.UNKNOWN),
    ],
    ids=["unreachable", "no-binary", "usage", "other"],
)
def test_parse_check_failed_command_unknown_never_enabled(
    code: int, stderr: str, kind: ErrorKind
) -> None:
    answer = checkoutput.parse_check(result(ENABLED, code, stderr))

    assert answer.verdict is CheckVerdict.UNKNOWN
    assert answer.error_kind is kind
    assert answer.detail == stderr.strip()


def test_parse_check_timed_out_unknown() -> None:
    timed_out = CommandResult(("sky",), -9, ENABLED, "", timed_out=True)

    answer = checkoutput.parse_check(timed_out)

    assert (answer.verdict, answer.error_kind) == (CheckVerdict.UNKNOWN, ErrorKind.TIMEOUT)


def test_parse_check_no_verdict_line_unknown() -> None:
    answer = checkoutput.parse_check(result("Checking credentials…\n  Kubernetes [compute]\n"))

    assert (answer.verdict, answer.error_kind) == (CheckVerdict.UNKNOWN, ErrorKind.UNKNOWN)
    assert "printed no 'Kubernetes: enabled|disabled' line" in answer.detail
    assert answer.endpoint is None


@given(strategies.sky_check_results())
def test_parse_check_total_and_enabled_only_when_proven(command: CommandResult) -> None:
    answer = checkoutput.parse_check(command)

    lines = classify.strip_ansi(command.stdout).splitlines()
    proven = (
        command.returncode == 0
        and not command.timed_out
        and any(ln.strip().startswith("Kubernetes: enabled") for ln in lines)
    )
    if answer.verdict is CheckVerdict.ENABLED:
        assert proven
    if answer.verdict is not CheckVerdict.UNKNOWN:
        assert answer.error_kind is ErrorKind.NONE
