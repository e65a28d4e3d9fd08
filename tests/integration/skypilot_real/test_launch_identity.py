"""The launch identity and job names against the real skypilot==0.12.2 (issue 24).

A job's ownership is read back from ``sky jobs queue -v``'s per-task ``metadata``,
which SkyPilot fills from each task's ``_metadata`` (``Task.metadata_json``). Here
the real library loads npa's stamped task file (a pipeline and a JobGroup), writes
it the way the client sends it to the API server and loads it again: every task must
still carry the stamp. And every job name npa makes must pass SkyPilot's own name
check. Like the other real tests this bootstraps the venv when it is missing and
fails (never skips) when it cannot.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from npa_infra.plan import waves
from npa_infra.plan.model import Wave
from npa_infra.render.documents import RenderedJob, dump_documents
from npa_infra.runs import ownership
from npa_infra.workflow.execution import taskfiles

pytestmark = pytest.mark.slow

LID = "npa-launch-0123456789abcdef0123456789abcdef"

_PROBE = """
import json, sys
from sky.utils import common_utils, dag_utils
request = json.loads(sys.stdin.read())
stamps = []
for text in request["files"]:
    dag = dag_utils.load_dag_from_yaml_str(text)
    sent = dag_utils.load_dag_from_yaml_str(dag_utils.dump_dag_to_yaml_str(dag))
    stamps.append([json.loads(t.metadata_json) for t in sent.tasks])
invalid = []
for name in request["names"]:
    try:
        common_utils.check_cluster_name_is_valid(name)
    except Exception:
        invalid.append(name)
print(json.dumps({"stamps": stamps, "invalid": invalid}))
"""


def _file(execution: str) -> str:
    docs: tuple[dict[str, Any], ...] = (
        {"name": "job", "execution": execution},
        {"name": "a", "run": "echo a", "resources": {"cpus": 1}},
        {"name": "b", "run": "echo b", "_metadata": {"git_commit": "abc"}},
    )
    job = RenderedJob("job", None, execution, docs, (), dump_documents(docs))
    return taskfiles.attempt_text(job, 1, 1, {}, LID)


def _names() -> list[str]:
    ids = ["rel_col", "rel-col", "2025-exp", "Run.x-", "r" * 96, "a-20250101T120000000001Z-abc"]
    wave = Wave(3, "parallel", "g", "Grp.Name", 2, 2, ())
    return [
        name
        for run in ids
        for name in (
            waves.job_name(run),
            waves.job_name(run, attempt=12),
            waves.job_name(run, wave, 3, batch=2),
        )
    ]


def test_real_skypilot_keeps_the_stamp_and_accepts_every_name(real_venv: Any) -> None:
    python = Path(real_venv.report.sky_bin).with_name("python")
    request = {"files": [_file("serial"), _file("parallel")], "names": _names()}
    done = subprocess.run(
        [str(python), "-c", _PROBE],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    for tasks in answer["stamps"]:
        assert [t.get(ownership.STAMP_KEY) for t in tasks] == [LID, LID]
        assert tasks[1]["git_commit"] == "abc"
    assert answer["invalid"] == []
