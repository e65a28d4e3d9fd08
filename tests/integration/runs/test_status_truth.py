"""Status tells the truth: one status for a run across ``submit``, ``status``, ``list``, the SDK.

Issue 24 item 5: a submit that stopped on an internal error after its launch was
sent left a RUNNING job, while ``status`` said ``NOT_SUBMITTED`` and the submit
exited 1 with no resume command. Here the journal write right after the launch
fails (a bug's ``InvariantError``, or a full disk's ``OSError``): the submit ends
recovery-required (exit 2, the exact ``--resume-run`` command), ``status`` and
``list`` both say ``RECOVERY_REQUIRED``, and the resume adopts the one job.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.errors import InvariantError, UncertainOutcomeError
from npa_infra.journal.store import Journal
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"


def _npa(world: World, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["workbench", "workflow", *args], obj=world.services(), env=world.env
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def failing_after_launch(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    """The first checkpoint after a launch request was answered raises what the list holds."""
    raised: list[BaseException] = []
    original = Journal.checkpoint

    def checkpoint(self: Journal, *args: Any, **kwargs: Any) -> None:
        record = args[3]
        answered = record.get("launch_sequence", 0) >= 1 and not record.get("outcome_pending")
        if raised and answered:
            error = raised.pop()
            raise error
        original(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "checkpoint", checkpoint)
    yield raised


@pytest.mark.parametrize(
    "error",
    [
        InvariantError("refusing to journal checkpoint.record.primary_error: a secret value"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
    ids=["internal-error", "disk-full"],
)
def test_status_crash_after_launch_is_recovery_required_everywhere_and_resume_adopts(
    world: World, failing_after_launch: list[BaseException], error: BaseException
) -> None:
    failing_after_launch.append(error)
    with pytest.raises(UncertainOutcomeError) as stopped:
        world.submit(MINIMAL, run_id="truth-1")
    assert stopped.value.exit_code == 2
    assert stopped.value.remedy.startswith("rerun the identical command: ")
    assert "--resume-run truth-1" in stopped.value.remedy
    [job] = world.jobs_named("truth-1")  # the launch was sent: its job exists, unadopted
    live = world.status("truth-1")
    cached = world.status("truth-1", cached=True)
    _, listed, _ = _npa(world, "list", "--json")
    [row] = json.loads(listed)["runs"]
    assert live.status == cached.status == row["status"] == "RECOVERY_REQUIRED"
    assert live.exit_code == 2 and live.remedy.endswith("--resume-run truth-1")
    resumed = world.submit(MINIMAL, resume_run="truth-1")
    assert resumed.exit_code == 0, resumed.to_json()
    assert resumed.job_id == job["job_id"] and len(world.jobs_named("truth-1")) == 1
    _, listed, _ = _npa(world, "list", "--json")
    [row] = json.loads(listed)["runs"]
    assert row["status"] == world.status("truth-1", cached=True).status == "SUBMITTED"


def test_status_crash_after_launch_cli_exit_2_prints_the_resume_command(
    world: World, failing_after_launch: list[BaseException]
) -> None:
    failing_after_launch.append(InvariantError("a bug"))
    args = ["submit", str(MINIMAL), "--infra", "k8s/fake-a", "--no-resolve-accelerators"]
    code, _, err = _npa(world, *args, "--no-preflight-images", "--run-id", "truth-2")
    assert code == 2, err
    assert "unexpected InvariantError" in err  # what stopped it, named (never its text)
    assert "Hint: rerun the identical command: npa workbench workflow submit" in err
    assert "--resume-run truth-2" in err
    code, out, _ = _npa(world, "status", "truth-2", "--json")
    assert (code, json.loads(out)["status"]) == (2, "RECOVERY_REQUIRED")
