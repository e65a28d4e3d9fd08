"""The controller's teardown gate (``runs.controllergate``): rule order, and DOWN only on a
queue proven all-terminal or empty, under ``--yes`` (skypilot-0.12.md §3.3, §4.1, §5.4)."""

from __future__ import annotations

import pytest
from hypothesis import given

from npa_infra.runs import controllergate as gate
from tests.strategies import controller_gate_inputs

A, D, K = gate.Action, gate.DownKind, gate.QueueKind


FLIGHT = (gate.PendingLaunch("r9", "r9-00-train", "/home/a/.npa"),)


def job(job_id: int, status: str, user: str = "tester") -> gate.ManagedJob:
    return gate.ManagedJob(job_id, f"job-{job_id}", user, status)


def jobs(*listed: gate.ManagedJob) -> gate.QueueObservation:
    return gate.QueueObservation(K.JOBS, listed)


@pytest.mark.parametrize(
    ("inputs", "action", "reason"),
    [
        (gate.GateInput(jobs(job(1, "SUCCEEDED")), confirmed=True), A.DOWN, "queue_all_terminal"),
        (gate.GateInput(gate.QueueObservation(K.EMPTY), confirmed=True), A.DOWN, "queue_empty"),
        (
            gate.GateInput(jobs(job(1, "FAILED")), confirmed=False),
            A.WOULD_REMOVE,
            "confirmation_required",
        ),
        (gate.GateInput(jobs(job(1, "RUNNING", "alice")), confirmed=True), A.REFUSE, "active_jobs"),
        (
            gate.GateInput(jobs(job(1, "PENDING"), job(2, "CANCELLING")), confirmed=True),
            A.REFUSE,
            "active_jobs",
        ),
        (gate.GateInput(jobs(job(1, "CANCELLING")), confirmed=True), A.WAIT, "cancelling_jobs"),
        (
            gate.GateInput(jobs(job(1, "CANCELLING")), deadline_passed=True, confirmed=True),
            A.TIMED_OUT,
            "cancelling_jobs_past_deadline",
        ),
        (gate.GateInput(jobs(job(1, "CANCELLING"))), A.WOULD_REMOVE, "cancelling_jobs_unconfirmed"),
        (
            gate.GateInput(gate.QueueObservation(K.CONTROLLER_ABSENT)),
            A.ALREADY_GONE,
            "no_controller",
        ),
        (
            gate.GateInput(gate.QueueObservation(K.UNKNOWN, detail="503"), confirmed=True),
            A.FAIL_CLOSED,
            "queue_unknown",
        ),
        (gate.GateInput(None, confirmed=True), A.FAIL_CLOSED, "queue_not_observed"),
        (gate.GateInput(None, D.REMOVED, confirmed=True), A.REMOVED, "torn_down"),
        (
            gate.GateInput(None, D.ALREADY_ABSENT, confirmed=True),
            A.ALREADY_GONE,
            "down_found_no_controller",
        ),
        (gate.GateInput(None, D.FAILED, "boom", confirmed=True), A.STOP_FAILED, "down_failed"),
        (
            gate.GateInput(None, D.IN_PROGRESS, confirmed=True),
            A.RETRY_AFTER_DRAIN,
            "in_progress_refusal_reread_queue",
        ),
        (
            gate.GateInput(None, D.IN_PROGRESS, deadline_passed=True, confirmed=True),
            A.TIMED_OUT,
            "in_progress_refusal_past_deadline",
        ),
        (
            gate.GateInput(jobs(job(1, "CANCELLED")), D.IN_PROGRESS, confirmed=True),
            A.DOWN,
            "queue_all_terminal",
        ),
        # issue 24: a launch in flight, not yet in the queue, holds the down off
        (
            gate.GateInput(gate.QueueObservation(K.EMPTY), confirmed=True, launches=FLIGHT),
            A.WAIT,
            "launches_in_flight",
        ),
        (
            gate.GateInput(
                jobs(job(1, "SUCCEEDED")), deadline_passed=True, confirmed=True, launches=FLIGHT
            ),
            A.TIMED_OUT,
            "launches_in_flight_past_deadline",
        ),
        (
            gate.GateInput(gate.QueueObservation(K.EMPTY), launches=FLIGHT),
            A.REFUSE,
            "launches_in_flight_unconfirmed",
        ),
        (
            gate.GateInput(
                gate.QueueObservation(K.CONTROLLER_ABSENT), confirmed=True, launches=FLIGHT
            ),
            A.WAIT,
            "launches_in_flight",
        ),
        (
            gate.GateInput(jobs(job(1, "RUNNING")), confirmed=True, launches=FLIGHT),
            A.REFUSE,
            "active_jobs",
        ),
        (
            gate.GateInput(gate.QueueObservation(K.EMPTY), confirmed=True, launches=None),
            A.FAIL_CLOSED,
            "launch_records_unknown",
        ),
    ],
    ids=[
        "terminal-down",
        "empty-down",
        "terminal-without-yes",
        "foreign-running-refuses",
        "pending-beside-cancelling-refuses",
        "cancelling-waits",
        "cancelling-past-deadline",
        "cancelling-without-yes",
        "no-controller",
        "unknown-fails-closed",
        "unobserved-fails-closed",
        "removed",
        "down-found-nothing",
        "down-failed",
        "in-progress-rereads",
        "in-progress-past-deadline",
        "drained-after-refusal-downs-again",
        "launch-in-flight-waits",
        "launch-in-flight-past-deadline",
        "launch-in-flight-without-yes",
        "launch-in-flight-without-controller",
        "running-job-refuses-before-launch-wait",
        "unlistable-launch-records-fail-closed",
    ],
)
def test_decide_table_each_rule(inputs: gate.GateInput, action: gate.Action, reason: str) -> None:
    decision = gate.decide(inputs)

    assert (decision.action, decision.reason.value) == (action, reason)


def test_decide_refusal_names_id_name_and_user() -> None:
    decision = gate.decide(
        gate.GateInput(jobs(job(7, "RECOVERING", "alice"), job(8, "CANCELLING")), confirmed=True)
    )

    assert [j.job_id for j in decision.blocking] == [7]
    assert [j.job_id for j in decision.draining] == [8]
    assert "job 7 'job-7' of user alice (RECOVERING)" in decision.describe()


def test_decide_down_failure_keeps_skypilots_text() -> None:
    decision = gate.decide(gate.GateInput(None, D.FAILED, "RuntimeError: boom", confirmed=True))

    assert decision.describe() == "RuntimeError: boom"


@pytest.mark.parametrize(
    ("tasks", "status"),
    [
        (["FAILED", "RUNNING"], "RUNNING"),
        (["CANCELLING", "CANCELLED"], "CANCELLING"),
        (["SUCCEEDED", "FAILED_SETUP"], "FAILED_SETUP"),
        (["SUCCEEDED", "SUCCEEDED"], "SUCCEEDED"),
        (["CANCELLING", "PENDING"], "PENDING"),
    ],
    ids=[
        "running-task-blocks",
        "cancelling",
        "failure",
        "all-succeeded",
        "pending-beats-cancelling",
    ],
)
def test_job_status_multi_task_teardown_view(tasks: list[str], status: str) -> None:
    assert gate.job_status(tasks) == status


@given(controller_gate_inputs())
def test_decide_down_only_on_a_proven_terminal_or_empty_queue(inputs: gate.GateInput) -> None:
    decision = gate.decide(inputs)  # total: never raises

    assert isinstance(decision.action, gate.Action)
    if decision.action is A.DOWN:
        assert inputs.confirmed
        assert inputs.launches == ()  # issue 24: never while a launch may be in flight
        assert inputs.last_down in (D.NONE, D.IN_PROGRESS)
        assert inputs.queue is not None and inputs.queue.kind in (K.JOBS, K.EMPTY)
        assert all(j.status in gate.TERMINAL for j in inputs.queue.jobs)
    if decision.action in (A.ALREADY_GONE, A.WOULD_REMOVE):
        assert inputs.launches == () or inputs.last_down is D.ALREADY_ABSENT
    if decision.action is A.REFUSE and not decision.blocking:
        assert decision.launches and not inputs.confirmed
    if decision.action is A.REFUSE and decision.blocking:
        assert all(
            j.status not in gate.TERMINAL and j.status != "CANCELLING" for j in decision.blocking
        )
    if decision.action is A.WAIT:
        assert inputs.confirmed and not inputs.deadline_passed
        assert decision.draining or decision.launches
    if inputs.queue is not None and inputs.queue.kind is K.UNKNOWN and inputs.last_down is D.NONE:
        assert decision.action is A.FAIL_CLOSED
