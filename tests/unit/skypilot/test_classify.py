"""The SkyPilot output classifier and parsers against recorded 0.12 output (skypilot-0.12.md).

Fixtures live in ``tests/fixtures/skypilot/<scenario>.txt``: an ``exit: N``
line, then the stdout and stderr sections, byte for byte (ANSI codes kept).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given

from npa_infra.skypilot import classify
from npa_infra.skypilot.models import (
    CommandResult,
    DownOutcome,
    ErrorKind,
    JobStatus,
    QueueRecord,
    QueueResult,
    QueueVerdict,
)
from tests.strategies import sky_command_results
from tests.support.skysim import harness

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skypilot"


def recorded(scenario: str) -> CommandResult:
    """``<scenario>.txt`` (hand-written from the contract) or ``real/<scenario>.txt`` (recorded)."""
    code, stdout, stderr = harness.read_recorded(FIXTURES / f"{scenario}.txt")
    return CommandResult(("sky",), code, stdout, stderr)


# -- classify ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("launch_async", ErrorKind.NONE),
        ("launch_aborted", ErrorKind.ABORTED),
        ("launch_usage", ErrorKind.USAGE),
        ("launch_secret_unset", ErrorKind.USAGE),
        ("launch_warmup", ErrorKind.API_WARMUP),
        ("launch_transport", ErrorKind.TRANSPORT),
        ("launch_server_error", ErrorKind.SERVER),
        ("launch_rate_limit", ErrorKind.RATE_LIMIT),
        ("launch_auth", ErrorKind.AUTH),
        ("launch_rbac", ErrorKind.RBAC),
        ("launch_context", ErrorKind.CONTEXT),
        ("launch_unknown", ErrorKind.UNKNOWN),
        ("launch_sync_failed", ErrorKind.UNKNOWN),
        ("queue_no_controller", ErrorKind.CLUSTER_NOT_UP),
        ("queue_server_error", ErrorKind.SERVER),
        ("cancel_duplicate_name", ErrorKind.NONE),  # exit 0: only parse_cancel can tell
        ("cancel_selector", ErrorKind.USAGE),
        ("down_aborted", ErrorKind.ABORTED),
        ("down_transport", ErrorKind.TRANSPORT),
        ("version_failed", ErrorKind.UNKNOWN),
    ],
    ids=lambda v: str(v),
)
def test_classify_recorded_output_maps_to_kind(scenario: str, kind: ErrorKind) -> None:
    assert classify.classify(recorded(scenario)) is kind


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (CommandResult(("sky",), -9, "", "", timed_out=True), ErrorKind.TIMEOUT),
        (CommandResult(("sky",), 0, "", "", timed_out=True), ErrorKind.TIMEOUT),
        (CommandResult(("sky",), 127, "", "sky: not found"), ErrorKind.NOT_FOUND),
        (CommandResult(("sky",), 0, "anything", "Forbidden"), ErrorKind.NONE),
        (CommandResult(("sky",), 2, "", "no usage text"), ErrorKind.UNKNOWN),
    ],
    ids=["timed-out", "timed-out-exit-0", "missing-binary", "exit-0", "exit-2-without-usage"],
)
def test_classify_process_outcome_maps_to_kind(result: CommandResult, kind: ErrorKind) -> None:
    assert classify.classify(result) is kind


@pytest.mark.parametrize(
    ("kind", "transient"),
    [(k, k in {"api_warmup", "transport", "rate_limit", "server"}) for k in ErrorKind],
    ids=[k.value for k in ErrorKind],
)
def test_error_kind_transient_only_for_retryable_kinds(kind: ErrorKind, transient: bool) -> None:
    assert kind.transient is transient


def test_strip_ansi_colour_codes_removed() -> None:
    assert classify.strip_ansi("\x1b[1;31mred\x1b[0m \x1b[2Kx") == "red x"


# -- version -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "version"),
    [("version", "0.12.2"), ("version_failed", None)],
    ids=["contract", "failed"],
)
def test_parse_version_recorded_output_extracts_version(scenario: str, version: str | None) -> None:
    assert classify.parse_version(recorded(scenario)) == version


def test_parse_version_real_0_12_2_output_extracts_version() -> None:
    stdout = (FIXTURES / "real" / "version.txt").read_text(encoding="utf-8")
    assert classify.parse_version(CommandResult(("sky", "--version"), 0, stdout, "")) == "0.12.2"


# -- queue ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "scenario",
    [
        "queue_no_controller",
        "queue_no_controller_banner",
        "queue_no_controller_ansi",
        "real/queue_no_controller",
        "real/queue_no_controller_server_start",
        "real/queue_verbose_no_controller",
    ],
    ids=["exact", "banner-preamble", "ansi-wrapped", "real", "real-server-start", "real-verbose"],
)
def test_parse_queue_exact_cluster_not_up_verified_empty(scenario: str) -> None:
    result = classify.parse_queue(recorded(scenario))
    assert result.verdict is QueueVerdict.VERIFIED_EMPTY
    assert result.records == ()
    assert result.error_kind is ErrorKind.NONE


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("queue_no_controller_extra_stderr", ErrorKind.CLUSTER_NOT_UP),
        ("queue_no_controller_traceback", ErrorKind.CLUSTER_NOT_UP),
        ("queue_no_controller_stdout_text", ErrorKind.CLUSTER_NOT_UP),
        ("queue_no_controller_exit0", ErrorKind.UNKNOWN),
        ("queue_no_controller_table", ErrorKind.UNKNOWN),
        ("real/queue_table_no_controller", ErrorKind.UNKNOWN),
        ("queue_trailing_text", ErrorKind.UNKNOWN),
        ("queue_two_documents", ErrorKind.UNKNOWN),
        ("queue_preamble_list", ErrorKind.UNKNOWN),
        ("queue_garbage", ErrorKind.UNKNOWN),
        ("queue_garbage_nonzero", ErrorKind.UNKNOWN),
        ("queue_unknown_status", ErrorKind.UNKNOWN),
        ("queue_row_without_job_id", ErrorKind.UNKNOWN),
        ("queue_row_string_job_id", ErrorKind.UNKNOWN),
        ("queue_row_not_object", ErrorKind.UNKNOWN),
        ("queue_server_error", ErrorKind.SERVER),
        ("queue_warmup", ErrorKind.API_WARMUP),
        ("queue_auth", ErrorKind.AUTH),
    ],
    ids=lambda v: str(v).replace("queue_", ""),
)
def test_parse_queue_unprovable_output_unavailable(scenario: str, kind: ErrorKind) -> None:
    result = classify.parse_queue(recorded(scenario))
    assert result.verdict is QueueVerdict.UNAVAILABLE
    assert result.records == ()
    assert result.error_kind is kind


@pytest.mark.parametrize(
    "scenario",
    ["queue_default", "queue_verbose", "queue_banner_preamble", "queue_preamble_with_brackets"],
    ids=["default", "verbose-indented", "banner-preamble", "mid-line-brackets-preamble"],
)
def test_parse_queue_json_rows_records(scenario: str) -> None:
    result = classify.parse_queue(recorded(scenario))
    assert result.verdict is QueueVerdict.RECORDS
    assert [(r.job_id, r.task_id) for r in result.records] == [(2, 0), (2, 1), (1, 0)]
    assert result.job_ids("npa-demo-train") == (2,)
    assert result.status_of(2) is JobStatus.RECOVERING
    assert result.status_of(1) is JobStatus.FAILED_PRECHECKS
    assert result.records[0].submitted_at == 1767225600.5


def test_parse_queue_default_fields_leave_verbose_keys_empty() -> None:
    record = classify.parse_queue(recorded("queue_default")).records[2]
    assert record.failure_reason is None
    assert record.user_hash is None


def test_parse_queue_verbose_fields_carry_failure_reason() -> None:
    record = classify.parse_queue(recorded("queue_verbose")).records[2]
    assert record.failure_reason is not None
    assert "does not contain any instances" in record.failure_reason
    assert record.user_hash is None  # only -uv adds user_hash (§3.2)


def test_parse_queue_all_users_verbose_carries_user_hash() -> None:
    records = classify.parse_queue(recorded("queue_all_users_verbose")).records
    assert {r.user_hash for r in records} == {"npa-0a1b2c3d4e"}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"npa_launch_id": "npa-launch-1", "git_commit": "abc"}, "npa-launch-1"),
        ('{"npa_launch_id": "npa-launch-1"}', "npa-launch-1"),  # as SkyPilot stores it
        ({}, None),
        ({"npa_launch_id": ""}, None),
        ({"npa_launch_id": 7}, None),
        ("not json", None),
        (None, None),
    ],
    ids=["dict", "json-text", "empty", "blank", "not-a-string", "bad-text", "absent"],
)
def test_parse_queue_verbose_metadata_carries_the_launch_identity(
    metadata: object, expected: str | None
) -> None:
    """issue 24: ``-v``'s per-task ``metadata`` holds the npa launch identity, if any."""
    row = {"job_id": 3, "task_id": 0, "job_name": "n", "status": "RUNNING", "metadata": metadata}
    answer = classify.parse_queue(CommandResult(("sky",), 0, json.dumps([row]), ""))
    assert answer.records[0].launch_id == expected


def test_parse_queue_empty_list_records_without_rows() -> None:
    result = classify.parse_queue(recorded("queue_controller_up_empty"))
    assert result.verdict is QueueVerdict.RECORDS
    assert result.records == ()


# -- launch --------------------------------------------------------------------
@pytest.mark.parametrize(
    "scenario",
    ["launch_async", "launch_async_banner", "launch_async_ansi"],
    ids=["plain", "banner", "ansi"],
)
def test_parse_launch_async_block_accepted_with_request_id(scenario: str) -> None:
    result = classify.parse_launch(recorded(scenario))
    assert result.accepted
    assert result.request_id == "3f2b8c1e-9d4a-4e6b-8f00-1a2b3c4d5e6f"
    assert result.error_kind is ErrorKind.NONE


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("launch_sync_detached", ErrorKind.UNKNOWN),
        ("launch_sync_failed", ErrorKind.UNKNOWN),
        ("launch_aborted", ErrorKind.ABORTED),
        ("launch_usage", ErrorKind.USAGE),
        ("launch_warmup", ErrorKind.API_WARMUP),
        ("launch_transport", ErrorKind.TRANSPORT),
        ("launch_server_error", ErrorKind.SERVER),
        ("launch_rate_limit", ErrorKind.RATE_LIMIT),
        ("launch_auth", ErrorKind.AUTH),
        ("launch_rbac", ErrorKind.RBAC),
        ("launch_context", ErrorKind.CONTEXT),
    ],
    ids=lambda v: str(v).removeprefix("launch_"),
)
def test_parse_launch_without_async_block_not_accepted(scenario: str, kind: ErrorKind) -> None:
    result = classify.parse_launch(recorded(scenario))
    assert not result.accepted
    assert result.request_id is None  # never a job id from launch output (§2.2)
    assert result.error_kind is kind


# -- cancel --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "scheduled", "nothing"),
    [
        ("cancel_one", (3,), False),
        ("cancel_many", (3, 4), False),
        ("cancel_named", (3,), False),
        ("cancel_ansi_banner", (3,), False),
        ("cancel_nothing", (), True),
        ("cancel_no_running_name", (), True),
    ],
    ids=["one", "many", "named", "ansi-banner", "nothing", "no-running-name"],
)
def test_parse_cancel_success_line_acknowledged(
    scenario: str, scheduled: tuple[int, ...], nothing: bool
) -> None:
    result = classify.parse_cancel(recorded(scenario))
    assert result.scheduled == scheduled
    assert result.nothing_to_cancel is nothing
    assert result.error_kind is ErrorKind.NONE


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("cancel_duplicate_name", ErrorKind.UNKNOWN),
        ("cancel_not_up", ErrorKind.CLUSTER_NOT_UP),
        ("real/cancel_no_controller", ErrorKind.CLUSTER_NOT_UP),
        ("cancel_selector", ErrorKind.USAGE),
        ("cancel_unrecognised", ErrorKind.UNKNOWN),
    ],
    ids=["duplicate-name", "not-up", "real-not-up", "selector", "unrecognised"],
)
def test_parse_cancel_error_or_unknown_text_not_acknowledged(
    scenario: str, kind: ErrorKind
) -> None:
    result = classify.parse_cancel(recorded(scenario))
    assert result.scheduled == ()
    assert not result.nothing_to_cancel
    assert result.error_kind is kind


# -- down ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "outcome", "kind"),
    [
        ("down_absent", DownOutcome.ALREADY_ABSENT, ErrorKind.NONE),
        ("real/down_controller_absent", DownOutcome.ALREADY_ABSENT, ErrorKind.NONE),
        ("down_in_progress", DownOutcome.BLOCKED_IN_PROGRESS, ErrorKind.NONE),
        ("down_torn_down", DownOutcome.TORN_DOWN, ErrorKind.NONE),
        ("down_aborted", DownOutcome.FAILED, ErrorKind.ABORTED),
        ("down_usage", DownOutcome.FAILED, ErrorKind.USAGE),
        ("down_transport", DownOutcome.FAILED, ErrorKind.TRANSPORT),
    ],
    ids=["absent", "real-absent", "in-progress", "torn-down", "aborted", "usage", "transport"],
)
def test_parse_down_recorded_output_outcome(
    scenario: str, outcome: DownOutcome, kind: ErrorKind
) -> None:
    result = classify.parse_down(recorded(scenario))
    assert result.outcome is outcome
    assert result.error_kind is kind


def test_parse_down_in_progress_detail_keeps_indented_table() -> None:
    detail = classify.parse_down(recorded("down_in_progress")).detail
    assert "\x1b[" not in detail
    assert "\n   3   -     npa-demo-train" in detail


# -- totality (style.md rule 19) --------------------------------------------------
@given(sky_command_results())
@example(CommandResult(("sky",), 0, "[" * 5000, ""))
@example(CommandResult(("sky",), 0, '[{"job_id": 1, "task_id": 1e999, "status": "PENDING"}]', ""))
@example(
    CommandResult(
        ("sky",), 0, '[{"job_id": 1, "status": "PENDING", "end_at": 1' + "0" * 400 + "}]", ""
    )
)
@example(CommandResult(("sky",), 0, "[" + "1" * 5000 + "]", ""))
@example(
    CommandResult(("sky",), 0, "Job with ID " + "9" * 5000 + " is scheduled to be cancelled.", "")
)
def test_parsers_arbitrary_output_never_raise(result: CommandResult) -> None:
    assert isinstance(classify.classify(result), ErrorKind)
    queue = classify.parse_queue(result)
    assert isinstance(classify.parse_launch(result).accepted, bool)
    assert isinstance(classify.parse_cancel(result).scheduled, tuple)
    assert isinstance(classify.parse_down(result).outcome, DownOutcome)
    if queue.verdict is QueueVerdict.VERIFIED_EMPTY:  # only the exact recorded answer (§3.3)
        lines = [ln.strip() for ln in classify.strip_ansi(result.stderr).splitlines() if ln.strip()]
        assert (result.returncode, lines) == (1, [classify.CLUSTER_NOT_UP_LINE])
        assert not result.timed_out
    if queue.verdict is not QueueVerdict.RECORDS:
        assert queue.records == ()


def test_parse_queue_jobs_object_form_reads_records() -> None:
    # runtime-reference.md §1: the document may be a list or {"jobs": [...]}.
    result = classify.parse_queue(recorded("queue_jobs_object"))
    assert result.verdict is QueueVerdict.RECORDS
    assert [(r.job_id, r.task_id, r.status.value) for r in result.records] == [
        (2, 0, "SUCCEEDED"),
        (2, 1, "RECOVERING"),
        (1, 0, "FAILED_PRECHECKS"),
    ]
    assert result.status_of(2) is JobStatus.RECOVERING
    assert result.status_of(1) is JobStatus.FAILED_PRECHECKS


def test_parse_queue_jobs_object_with_extra_keys_unavailable() -> None:
    text = '{"jobs": [], "total": 0}\n'
    result = classify.parse_queue(CommandResult(("sky",), 0, text, ""))
    assert result.verdict is QueueVerdict.UNAVAILABLE


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["SUCCEEDED", "FAILED", "RUNNING"], "FAILED"),
        (["SUCCEEDED", "CANCELLED"], "CANCELLED"),
        (["SUCCEEDED", "SUCCEEDED"], "SUCCEEDED"),
        (["SUCCEEDED", "PENDING", "RUNNING"], "RUNNING"),
        (["PENDING", "RECOVERING"], "RECOVERING"),
        (["CANCELLING", "PENDING"], "PENDING"),
        (["CANCELLING"], "CANCELLING"),
    ],
    ids=[
        "failed-wins",
        "cancelled-wins",
        "all-succeeded",
        "running-first",
        "recovering",
        "pending",
        "cancelling",
    ],
)
def test_queue_status_of_multi_task_job_aggregates_by_reference_rule(
    statuses: list[str], expected: str
) -> None:
    records = tuple(
        QueueRecord(job_id=7, task_id=i, job_name="j", task_name=f"t{i}", status=JobStatus(s))
        for i, s in enumerate(statuses)
    )
    assert QueueResult(QueueVerdict.RECORDS, records).status_of(7) is JobStatus(expected)
