"""``stack.controllerdown.observation``: an all-users queue answer as the controller gate reads it."""

from __future__ import annotations

import pytest

from npa_infra.runs import controllergate as gate
from npa_infra.skypilot.models import ErrorKind, JobStatus, QueueRecord, QueueResult, QueueVerdict
from npa_infra.stack import controllerdown


def row(
    job_id: int, status: JobStatus, task_id: int = 0, user: str | None = "alice"
) -> QueueRecord:
    return QueueRecord(job_id, task_id, f"job-{job_id}", "t", status, user_name=user)


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (
            QueueResult(QueueVerdict.VERIFIED_EMPTY, (), ErrorKind.NONE, "no jobs controller"),
            "controller_absent",
        ),
        (QueueResult(QueueVerdict.UNAVAILABLE, (), ErrorKind.SERVER, "503"), "unknown"),
        (QueueResult(QueueVerdict.RECORDS, ()), "empty"),
        (QueueResult(QueueVerdict.RECORDS, (row(1, JobStatus.RUNNING, user=None),)), "unknown"),
        (QueueResult(QueueVerdict.RECORDS, (row(1, JobStatus.RUNNING),)), "jobs"),
    ],
    ids=["cluster-not-up", "unavailable", "empty-list", "row-without-user-partial", "rows"],
)
def test_observation_kinds(result: QueueResult, kind: str) -> None:
    assert controllerdown.observation(result).kind.value == kind


def test_observation_collapses_tasks_per_job_with_user() -> None:
    result = QueueResult(
        QueueVerdict.RECORDS,
        (
            row(4, JobStatus.FAILED, task_id=0),
            row(4, JobStatus.RUNNING, task_id=1),
            row(5, JobStatus.CANCELLED, user="bob"),
        ),
    )

    observed = controllerdown.observation(result)

    assert observed.jobs == (
        gate.ManagedJob(4, "job-4", "alice", "RUNNING"),  # a running task holds the controller
        gate.ManagedJob(5, "job-5", "bob", "CANCELLED"),
    )
