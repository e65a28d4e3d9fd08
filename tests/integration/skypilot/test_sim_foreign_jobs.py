"""The simulator's other operators (``as_user``): one API server, one controller, several users.

skypilot-0.12.md §3.1 (only ``-u`` lists other users' jobs) and §5.4 (``sky down`` of
the controller refuses while any job on it, of any user, is in progress).
"""

from __future__ import annotations

from pathlib import Path

from npa_infra.skypilot.models import DownOutcome, JobStatus
from tests.integration.skypilot.simenv import Sim, make_sim


def _sim(tmp_path: Path) -> Sim:
    (tmp_path / "sim").mkdir()
    return make_sim(tmp_path / "sim")


def test_sim_foreign_job_listed_only_with_all_users(tmp_path: Path) -> None:
    sim = _sim(tmp_path)
    sim.faults(
        {"command": "jobs.launch", "action": "as_user", "user_hash": "a1", "user_name": "alice"}
    )
    cli = sim.cli()
    assert cli.launch(sim.task(), name="theirs", infra="k8s/npa-ctx").accepted

    mine, everyone = cli.queue(), cli.queue(all_users=True)

    assert mine.records == ()
    assert [(r.job_name, r.user_name) for r in everyone.records] == [("theirs", "alice")]


def test_sim_down_refused_by_foreign_job_until_it_drains(tmp_path: Path) -> None:
    sim = _sim(tmp_path)
    sim.faults(
        {"command": "jobs.launch", "action": "as_user", "user_hash": "a1", "user_name": "alice"},
        {"command": "jobs.launch", "action": "timeline", "statuses": ["CANCELLING", "CANCELLED"]},
    )
    cli = sim.cli()
    assert cli.launch(sim.task(), name="theirs", infra="k8s/npa-ctx").accepted
    sim.faults()

    refused = cli.down_controller()
    statuses = [cli.queue(all_users=True).records[0].status for _ in range(2)]
    done = cli.down_controller()

    assert refused.outcome is DownOutcome.BLOCKED_IN_PROGRESS
    assert statuses == [JobStatus.CANCELLING, JobStatus.CANCELLED]
    assert done.outcome is DownOutcome.TORN_DOWN
    assert cli.down_controller().outcome is DownOutcome.ALREADY_ABSENT
