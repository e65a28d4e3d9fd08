"""The launch identity a task carries, and the name lookup that checks it (issue 24).

Every task file npa sends stamps the attempt's logical launch id in ``_metadata``;
``sky jobs queue -v`` shows it per task as ``metadata`` (the simulator reads it the
same way), and ``reconciliation_of`` calls the one job of the name ``found`` only when
each of its tasks carries that id.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from npa_infra.render.documents import RenderedJob, dump_documents
from npa_infra.runs.checkpoints import FENCE_ATTEMPT, FENCE_SEQUENCE
from npa_infra.runs.models import ReconciliationState
from npa_infra.skypilot.models import JobStatus, QueueRecord, QueueResult, QueueVerdict
from npa_infra.workflow.execution import taskfiles
from npa_infra.workflow.execution.launcher import reconciliation_of
from tests.support.skysim import jobs as simjobs

LID = "npa-launch-0123456789abcdef0123456789abcdef"


def _job(*docs: dict[str, object]) -> RenderedJob:
    return RenderedJob("rel-col", None, "serial", docs, (), dump_documents(docs))


HEADER = {"name": "rel-col", "execution": "serial"}
TASKS = (
    {"name": "a", "run": "echo a", "envs": {"K": "v"}},
    {"name": "b", "run": "echo b", "_metadata": {"git_commit": "abc"}},
)


def test_attempt_text_stamps_every_task_and_keeps_its_metadata() -> None:
    text = taskfiles.attempt_text(_job(HEADER, *TASKS), 2, 3, {"b": {"R": "1"}}, LID)
    header, first, second = yaml.safe_load_all(text)
    assert header == HEADER
    assert first["_metadata"] == {"npa_launch_id": LID}
    assert second["_metadata"] == {"git_commit": "abc", "npa_launch_id": LID}
    assert first["envs"]["K"] == "v" and second["envs"]["R"] == "1"
    fence = (first["envs"][FENCE_ATTEMPT], first["envs"][FENCE_SEQUENCE])
    assert fence == ("2", "3")


def test_simulator_reads_the_stamp_back_as_queue_metadata(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(taskfiles.attempt_text(_job(HEADER, *TASKS), 1, 1, {}, LID), encoding="utf-8")
    _, _, tasks = simjobs.read_tasks(str(path), "rel-col")
    assert [t["metadata"] for t in tasks] == [
        {"npa_launch_id": LID},
        {"git_commit": "abc", "npa_launch_id": LID},
    ]


def _queue(*stamps: str | None, job_id: int = 5) -> QueueResult:
    rows = tuple(
        QueueRecord(job_id, i, "rel-col", f"t{i}", JobStatus.RUNNING, launch_id=stamp)
        for i, stamp in enumerate(stamps)
    )
    return QueueResult(QueueVerdict.RECORDS, rows)


@pytest.mark.parametrize(
    ("stamps", "state"),
    [
        ((LID, LID), ReconciliationState.FOUND),
        ((LID, "npa-launch-other"), ReconciliationState.FOREIGN),
        ((None,), ReconciliationState.UNPROVEN),
    ],
    ids=["ours", "foreign", "unproven"],
)
def test_reconciliation_of_judges_the_one_job_by_its_stamps(
    stamps: tuple[str | None, ...], state: ReconciliationState
) -> None:
    found = reconciliation_of(_queue(*stamps), "rel-col", 1.0, LID)
    assert found.state is state
    assert found.job_ids == (5,)
    assert found.job_id == (5 if state is ReconciliationState.FOUND else None)


def test_reconciliation_of_without_a_launch_id_reads_the_name_only() -> None:
    assert reconciliation_of(_queue(None), "rel-col", 1.0).state is ReconciliationState.FOUND
