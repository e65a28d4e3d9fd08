"""npa's memory does not grow with SkyPilot's output; the launch log is capped and rotated.

Issue 24 item 7: 100 MB of ``sky jobs launch`` output took npa from 54 MB to 716 MB,
and the launch log had no size cap. Here the simulated launch prints 100 MB (and a
10 MB line without an end) before it fails with a failure ``runs.skyoutput`` knows.
The submit runs in a forked child whose peak RSS (``wait4``'s rusage) is compared with
the same submit printing a few kilobytes: it grows by less than 100 MB. The failure is
still recognised from the bounded tail, and the launch log stays within two parts of
``launchlog.LOG_BYTES``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from npa_infra.workflow.execution import launchlog
from tests.integration.runs.world import ROOT, World, make_world
from tests.support.fakekube import FakeKube

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
MB = 1024 * 1024
# a failure of the local SkyPilot install (runs.skyoutput, fastapi_server_crash), last
_CRASH = "TypeError: FastAPI.__init__() got an unexpected keyword argument 'on_startup'"


def _flooded_submit(world: World, run_id: str, flood: int) -> tuple[int, dict[str, Any]]:
    """Submit in a forked child whose launch first prints ``flood`` bytes; (peak KiB, result)."""
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "flood", "bytes": flood},
        {"command": "jobs.launch", "nth": 1, "action": "flood", "stream": "stderr",
         "bytes": min(flood, 10 * MB), "width": 10 * MB},
        {"command": "jobs.launch", "nth": 1, "action": "fail", "stderr": _CRASH},
    )  # fmt: skip
    report = world.root / f"{run_id}.json"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            result = world.submit(MINIMAL, run_id=run_id)
            report.write_text(json.dumps(result.to_json() | {"exit_code": result.exit_code}))
            os._exit(0)
        except BaseException as exc:
            report.write_text(json.dumps({"error": repr(exc)}))
            os._exit(3)
    _, status, usage = os.wait4(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, report.read_text()
    return usage.ru_maxrss, json.loads(report.read_text())


def test_bounded_output_100mb_launch_keeps_rss_flat_and_recognises_the_failure(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    small = make_world(tmp_path / "small", fake_kube)
    base_kib, _ = _flooded_submit(small, "flood-small", 4096)
    world = make_world(tmp_path / "big", fake_kube)
    peak_kib, result = _flooded_submit(world, "flood-big", 100 * MB)
    growth = (peak_kib - base_kib) / 1024
    assert growth < 100, f"npa's peak RSS grew by {growth:.0f} MB for 100 MB of output"
    # the failure at the end of the output is still recognised, and the run fails closed
    assert result["exit_code"] == 2, result
    assert (result["known_failure"] or {}).get("cause") == "fastapi_server_crash", result
    tx = result["launch_transaction"]
    assert tx["category"] == "skypilot_venv"
    assert len(tx["primary_error"]) <= 2000  # capped text, not the flood
    logs = sorted((world.home / "logs" / "flood-big").iterdir())
    assert [p.name for p in logs] == ["0-1-launch.log", "0-1-launch.log.1"]
    assert all(p.stat().st_size <= launchlog.LOG_BYTES + 11 * MB for p in logs)
    assert _CRASH in logs[0].read_text(encoding="utf-8", errors="replace")
