"""Recognising the local SkyPilot install's known failures in its output (issue 17)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.runs import classifier, skyoutput, transaction
from npa_infra.runs.classifier import ClassifierPhase
from npa_infra.runs.models import Category, LaunchState
from npa_infra.runs.skyoutput import KnownCause
from npa_infra.skypilot import drift
from npa_infra.workflow.execution import liverun
from tests.strategies import SKY_KNOWN_LINES, SKY_ORDINARY_LINES, sky_output_fragments

TOKEN = ("NEBIUS_IAM_TOKEN",)
POD_CONFIG = SKY_KNOWN_LINES[0][0]


@pytest.mark.parametrize(
    ("line", "cause"), SKY_KNOWN_LINES, ids=[cause for _, cause in SKY_KNOWN_LINES]
)
def test_recognise_recorded_line_names_cause_and_remedy(line: str, cause: str) -> None:
    found = skyoutput.recognise(f"\x1b[31m{line}\x1b[0m", TOKEN)
    assert found is not None and found.cause is KnownCause(cause)
    expected_remedy = {
        "kubernetes_client_pod_config": "npa skypilot bootstrap",
        "fastapi_server_crash": "npa skypilot bootstrap",
        "foreign_api_server": drift.PORT_REMEDY,
        "stale_nebius_token": drift.TOKEN_REMEDY,
    }[cause]
    assert found.remedy == expected_remedy
    assert found.category.terminal  # permanent: never retried as a warm-up
    assert found.message and "then submit" not in found.remedy


@pytest.mark.parametrize("line", SKY_ORDINARY_LINES, ids=repr)
def test_recognise_ordinary_line_or_near_miss_none(line: str) -> None:
    assert skyoutput.recognise(line, TOKEN) is None


@pytest.mark.parametrize(
    "line",
    [line for line, cause in SKY_KNOWN_LINES if cause == "stale_nebius_token"],
    ids=["PermissionDenied", "UNAUTHENTICATED"],
)
def test_recognise_nebius_refusal_without_exported_token_none(line: str) -> None:
    """Without an ambient static token, PermissionDenied is an ordinary auth failure."""
    assert skyoutput.recognise(line) is None


def test_recognise_pod_config_loop_is_skypilot_venv_with_bootstrap_remedy() -> None:
    found = skyoutput.recognise(POD_CONFIG)
    assert found is not None
    assert found.category is Category.SKYPILOT_VENV
    assert found.remedy == drift.BOOTSTRAP_COMMAND == skyoutput.BOOTSTRAP_REMEDY
    assert "kubernetes client >= 36" in found.message


def test_recognise_two_failures_on_one_line_leftmost_wins() -> None:
    fastapi = SKY_KNOWN_LINES[1][0]
    found = skyoutput.recognise(f"{fastapi} then {POD_CONFIG}")
    assert found is not None and found.cause is KnownCause.FASTAPI_SERVER_CRASH


@given(sky_output_fragments(), st.data())
@example([(SKY_ORDINARY_LINES[4], None), (POD_CONFIG, "kubernetes_client_pod_config")], None)
def test_first_any_line_split_or_join_same_first_recognition(
    fragments: list[tuple[str, str | None]], data: st.DataObject | None
) -> None:
    """However the output's lines break (or arrive joined), the first known failure named is
    the earliest one printed; line by line and whole text agree."""
    expected = next((cause for _, cause in fragments if cause is not None), None)

    def joined() -> str:
        if not fragments:
            return ""
        seps = [
            data.draw(st.sampled_from(("\n", "\r\n", " ", "; "))) if data else "\n"
            for _ in fragments[1:]
        ]
        text = fragments[0][0]
        for sep, (line, _) in zip(seps, fragments[1:], strict=True):
            text += sep + line
        return text

    for text in (joined(), joined()):
        whole = skyoutput.first(text, TOKEN)
        assert (whole.cause.value if whole else None) == expected
        per_line = next(
            (f for f in (skyoutput.recognise(ln, TOKEN) for ln in text.splitlines()) if f), None
        )
        assert per_line == whole


@pytest.mark.parametrize("phase", list(ClassifierPhase), ids=str)
def test_classify_pod_config_loop_skypilot_venv_not_schema(phase: ClassifierPhase) -> None:
    assert classifier.classify(POD_CONFIG, phase) is Category.SKYPILOT_VENV
    # the task's own pod_config mistake stays a schema error
    assert classifier.classify(SKY_ORDINARY_LINES[4], phase) is Category.SCHEMA


def test_classify_fastapi_crash_beside_warmup_text_skypilot_venv_not_transient() -> None:
    text = "Failed to start SkyPilot API server\n" + SKY_KNOWN_LINES[1][0]
    assert classifier.classify(text, ClassifierPhase.LAUNCH) is Category.SKYPILOT_VENV


def _terminal(category: Category) -> transaction.TransactionRecord:
    import dataclasses

    record = transaction.begin(logical_launch_id="npa-launch-x", job_name="j", context="c", now=0)
    return dataclasses.replace(
        record,
        state=LaunchState.TERMINAL_FAILURE,
        launch_sequence=1,
        category=category,
        last_category=category,
        primary_error="boom",
    )


@pytest.mark.parametrize(
    ("category", "remedy"),
    [
        (Category.SKYPILOT_VENV, "npa skypilot bootstrap and submit a new run"),
        (Category.STALE_IAM_TOKEN, f"{drift.TOKEN_REMEDY} and submit a new run"),
        (Category.SCHEMA, "fix the cause and submit a new run"),
    ],
    ids=["skypilot_venv", "stale_iam_token", "schema"],
)
def test_outcome_error_terminal_failure_known_category_names_its_remedy(
    category: Category, remedy: str
) -> None:
    error = liverun.outcome_error(_terminal(category), "npa submit --resume-run r")
    # sent, then read absent: recovery-required (exit 2) with the resume command first
    assert error is not None and error.exit_code == 2
    assert error.remedy.startswith("rerun: npa submit --resume-run r ")
    assert error.remedy.endswith(f"once it stays absent, {remedy}")


def test_remedy_for_terminal_record_known_category_names_bootstrap() -> None:
    text = transaction.remedy_for(_terminal(Category.SKYPILOT_VENV), "npa x")
    assert "npa skypilot bootstrap" in text
