"""Every ``sky`` call has a deadline, and a wait says what it awaits and until when.

Issue 24 item 7: a hung ``sky jobs queue`` kept ``status``, ``cancel``, ``cleanup``
and ``logs`` silent for 300 s with no deadline shown. Here the simulator hangs every
queue (and logs) call for two minutes, and the deadline is injected at 2 s
(``SkyCli(call_timeout=...)``): each command ends within seconds with an unproven
answer, and while it waited its progress said ``waiting for `sky jobs queue` ...
deadline 2 s``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest

from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.operations import cancellation, leftovers, runlogs, runstatus
from npa_infra.workflow.target.services import Services
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
DEADLINE = 2.0
HUNG = 120  # seconds the simulator would hang: far beyond any wait the test allows


def _hung_services(world: World, lines: list[str]) -> Services:
    def sky(isolated: IsolatedDir, env: Mapping[str, str], _bin: str | None) -> SkyCli:
        return SkyCli(
            world.sky_bin,
            isolated,
            env,
            check_ports=False,
            call_timeout=DEADLINE,
            progress=lines.append,
        )

    return Services(sky=sky, clock=world.clock.clock(), isolated_dir=world.isolated.root)


@pytest.fixture
def hung(world: World) -> tuple[World, list[str]]:
    """A submitted run, then every queue and logs call hangs."""
    assert world.submit(MINIMAL, run_id="hung-1").exit_code == 0
    world.faults(
        {"command": "jobs.queue", "action": "hang", "seconds": HUNG},
        {"command": "jobs.logs", "action": "hang", "seconds": HUNG},
    )
    return world, []


def _said_waiting(lines: list[str], what: str) -> None:
    waits = [line for line in lines if line.startswith(f"waiting for `sky {what}")]
    assert waits, lines
    assert all(f"deadline {DEADLINE:.0f} s" in line for line in waits), waits


def test_deadlines_status_hung_queue_times_out_and_says_so(hung: tuple[World, list[str]]) -> None:
    world, lines = hung
    started = time.monotonic()
    report = runstatus.run_status("hung-1", env=world.env, services=_hung_services(world, lines))
    assert time.monotonic() - started < 30  # the deadline, not the hang
    assert (report.status, report.exit_code) == ("VERIFICATION_UNAVAILABLE", 2)
    _said_waiting(lines, "jobs queue")


def test_deadlines_cancel_hung_queue_times_out_and_says_so(hung: tuple[World, list[str]]) -> None:
    world, lines = hung
    started = time.monotonic()
    report = cancellation.cancel_run("hung-1", env=world.env, services=_hung_services(world, lines))
    assert time.monotonic() - started < 60
    assert report.exit_code == 2, report.to_json()  # not proven, never "cancelled"
    _said_waiting(lines, "jobs queue")


def test_deadlines_logs_hung_logs_times_out_and_says_so(hung: tuple[World, list[str]]) -> None:
    world, lines = hung
    started = time.monotonic()
    report = runlogs.run_logs("hung-1", env=world.env, services=_hung_services(world, lines))
    assert time.monotonic() - started < 30
    assert report.exit_code == 2, report.model_dump()
    _said_waiting(lines, "jobs logs")


def test_deadlines_cleanup_hung_queue_times_out_and_says_so(hung: tuple[World, list[str]]) -> None:
    world, lines = hung
    started = time.monotonic()
    report = leftovers.cleanup(
        env=world.env, yes=False, project_root=None, services=_hung_services(world, lines)
    )
    assert time.monotonic() - started < 30
    verdicts = {jobs.state_dir: jobs.verdict for jobs in report.managed_jobs}
    assert verdicts.get(str(world.isolated.root)) == "unknown", report.model_dump()
    _said_waiting(lines, "jobs queue")


def test_deadlines_cli_services_real_sky_reports_waits_and_stays_real() -> None:
    """The CLI's text mode hands the real ``sky`` a progress sink; the drift gate still
    sees the real SkyPilot (``Services.real_sky``)."""
    from npa_infra.cli import services

    lines: list[str] = []
    built = services.build(None, waits=lines.append)
    assert built.real_sky()
    assert built.sky.keywords == {"progress": lines.append}  # type: ignore[attr-defined]
