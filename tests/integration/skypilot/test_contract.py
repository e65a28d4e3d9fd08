"""Contract suite: the real ``SkyCli`` against the ``sky`` simulator (skypilot-0.12.md §2-§5, §12).

Every call runs the simulator as a child process through ``SubprocessRunner``,
with the isolated directory's environment and cwd. Simulated time advances
one step per ``jobs queue`` call, so no test sleeps.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import pytest

from npa_infra.skypilot.models import (
    CommandResult,
    DownOutcome,
    ErrorKind,
    JobStatus,
    QueueResult,
    QueueVerdict,
)
from npa_infra.skypilot.runner import SubprocessRunner
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.skypilot.simenv import ShortTimeout, Sim

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
PIPELINE = """name: npa-pipe
execution: {execution}
---
name: prep
run: echo prep
---
name: train
resources: {{accelerators: H100:8}}
run: echo train
---
name: eval
run: echo eval
"""


def _statuses(cli: SkyCli, name: str, calls: int) -> list[JobStatus | None]:
    out = []
    for _ in range(calls):
        queue = cli.queue(verbose=True)
        assert queue.verdict is QueueVerdict.RECORDS
        (job_id,) = queue.job_ids(name)
        out.append(queue.status_of(job_id))
    return out


def _launch(cli: SkyCli, sim: Sim, name: str = "npa-job") -> None:
    result = cli.launch(sim.task(), name=name, infra="k8s/npa-ctx")
    assert result.accepted, result.detail


def _only_id(queue: QueueResult, name: str) -> int:
    (job_id,) = queue.job_ids(name)
    return job_id


# -- version and the empty queue -------------------------------------------------
def test_version_simulator_reports_pinned_version(sim: Sim) -> None:
    assert sim.cli().version() == "0.12.2"


def test_queue_no_controller_verified_empty_with_and_without_banner(sim: Sim) -> None:
    cli = sim.cli()
    first = cli.queue()  # starts the simulated local server: banner on stdout (§1)
    second = cli.queue(verbose=True)
    assert [first.verdict, second.verdict] == [QueueVerdict.VERIFIED_EMPTY] * 2
    calls = sim.state()["calls"]
    assert [c["argv"][-2:] for c in calls] == [["--output", "json"]] * 2


# -- launch and reconciliation by exact name ----------------------------------------
def test_launch_async_accepted_then_queue_finds_exactly_one_id(sim: Sim) -> None:
    cli = sim.cli()
    result = cli.launch(sim.task(), name="npa-demo-1", infra="k8s/npa-ctx")
    assert result.accepted
    assert result.request_id is not None and UUID4.match(result.request_id)
    queue = cli.queue(verbose=True)
    assert queue.verdict is QueueVerdict.RECORDS
    assert len(queue.job_ids("npa-demo-1")) == 1
    assert queue.job_ids("npa-demo") == ()  # exact names only
    call = sim.state()["calls"][-2]
    assert call["argv"][:8] == [
        "jobs",
        "launch",
        "--name",
        "npa-demo-1",
        "--yes",
        "--detach-run",
        "--async",
        "--infra",
    ]
    assert call["cwd"] == str(sim.root / "state")


def test_launch_delayed_appearance_absent_then_found(sim: Sim) -> None:
    sim.faults({"command": "jobs.launch", "action": "delay_appearance", "queue_calls": 2})
    cli = sim.cli()
    _launch(cli, sim, "npa-late")
    # While the request is in flight no controller is up yet: "verified empty" is not
    # proof of absence here (runtime-reference.md: async acceptance).
    early = [cli.queue(), cli.queue()]
    assert [q.verdict for q in early] == [QueueVerdict.VERIFIED_EMPTY] * 2
    found = cli.queue()
    assert found.verdict is QueueVerdict.RECORDS
    assert len(found.job_ids("npa-late")) == 1


def test_launch_duplicate_names_two_ids_ambiguity_visible(sim: Sim) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-dup")
    _launch(cli, sim, "npa-dup")
    ids = cli.queue().job_ids("npa-dup")
    assert len(ids) == 2 and ids[0] != ids[1]


@pytest.mark.parametrize("execution", ["serial", "parallel"], ids=["pipeline", "job-group"])
def test_launch_three_task_file_one_job_three_rows(sim: Sim, execution: str) -> None:
    cli = sim.cli()
    task = sim.task(PIPELINE.format(execution=execution), "pipe.yaml")
    assert cli.launch(task, name="npa-pipe").accepted
    queue = cli.queue(verbose=True)
    rows = queue.by_name("npa-pipe")
    assert len({r.job_id for r in rows}) == 1
    assert [(r.task_id, r.task_name) for r in rows] == [(0, "prep"), (1, "train"), (2, "eval")]


# -- status timelines ------------------------------------------------------------------
@pytest.mark.parametrize(
    "timeline",
    [
        ["PENDING", "STARTING", "RUNNING", "SUCCEEDED"],
        ["PENDING", "STARTING", "RUNNING", "RECOVERING", "RUNNING", "SUCCEEDED"],
        ["PENDING", "FAILED_PRECHECKS"],
        ["PENDING", "STARTING", "FAILED_NO_RESOURCE"],
        ["PENDING", "STARTING", "RUNNING", "FAILED"],
    ],
    ids=["succeeded", "recovered", "failed-prechecks", "failed-no-resource", "failed"],
)
def test_queue_scripted_timeline_observed_then_terminal_stays(
    sim: Sim, timeline: list[str]
) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": timeline})
    cli = sim.cli()
    _launch(cli, sim, "npa-tl")
    seen = _statuses(cli, "npa-tl", len(timeline) + 2)
    assert seen == [JobStatus(s) for s in timeline] + [JobStatus(timeline[-1])] * 2
    last = cli.queue(verbose=True).by_name("npa-tl")[0]
    if timeline[-1].startswith("FAILED"):
        assert last.failure_reason
    if "RECOVERING" in timeline:
        assert last.status is JobStatus.SUCCEEDED


def test_queue_serial_pipeline_tasks_run_in_order(sim: Sim) -> None:
    sim.faults(
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING", "SUCCEEDED"]}
    )
    cli = sim.cli()
    assert cli.launch(sim.task(PIPELINE.format(execution="serial")), name="npa-pipe").accepted
    per_call = [[r.status.value for r in cli.queue().by_name("npa-pipe")] for _ in range(5)]
    assert per_call == [
        ["RUNNING", "PENDING", "PENDING"],
        ["SUCCEEDED", "RUNNING", "PENDING"],
        ["SUCCEEDED", "SUCCEEDED", "RUNNING"],
        ["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"],
        ["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"],
    ]


# -- cancellation ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("faults", "cancelling_calls"),
    [([], 1), ([{"command": "jobs.cancel", "action": "slow_cancel", "delay": 3}], 3)],
    ids=["default-delay", "slow-cancel"],
)
def test_cancel_running_job_cancelling_then_cancelled(
    sim: Sim, faults: list[dict[str, Any]], cancelling_calls: int
) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]}, *faults)
    cli = sim.cli()
    _launch(cli, sim, "npa-run")
    job_id = _only_id(cli.queue(), "npa-run")
    result = cli.cancel([job_id])
    assert (result.scheduled, result.nothing_to_cancel) == ((job_id,), False)
    seen = [cli.queue().status_of(job_id) for _ in range(cancelling_calls + 1)]
    assert seen == [JobStatus.CANCELLING] * cancelling_calls + [JobStatus.CANCELLED]
    assert sim.state()["calls"][-cancelling_calls - 2]["argv"] == [
        "jobs",
        "cancel",
        "--yes",
        str(job_id),
    ]


def test_cancel_pending_job_cancelled_at_once(sim: Sim) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING"]})
    cli = sim.cli()
    _launch(cli, sim, "npa-pend")
    queue = cli.queue()
    job_id = _only_id(queue, "npa-pend")
    assert queue.status_of(job_id) is JobStatus.PENDING
    assert cli.cancel([job_id]).scheduled == (job_id,)
    assert cli.queue().status_of(job_id) is JobStatus.CANCELLED  # no CANCELLING step (§4.2)


@pytest.mark.parametrize("target", ["terminal", "unknown"], ids=["terminal", "unknown"])
def test_cancel_terminal_or_unknown_id_nothing_to_cancel(sim: Sim, target: str) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    cli = sim.cli()
    _launch(cli, sim, "npa-done")
    job_id = _only_id(cli.queue(), "npa-done")
    result = cli.cancel([job_id if target == "terminal" else job_id + 100])
    assert (result.scheduled, result.nothing_to_cancel) == ((), True)
    assert result.error_kind is ErrorKind.NONE


def test_cancel_without_controller_cluster_not_up(sim: Sim) -> None:
    result = sim.cli().cancel([1])
    assert result.error_kind is ErrorKind.CLUSTER_NOT_UP
    assert result.scheduled == ()


# -- faults ------------------------------------------------------------------------------
KIND_CASES = [
    ("warmup", ErrorKind.API_WARMUP),
    ("transport", ErrorKind.TRANSPORT),
    ("server", ErrorKind.SERVER),
    ("rate_limit", ErrorKind.RATE_LIMIT),
    ("auth", ErrorKind.AUTH),
    ("rbac", ErrorKind.RBAC),
    ("context", ErrorKind.CONTEXT),
    ("unknown", ErrorKind.UNKNOWN),
]
KIND_IDS = [k for k, _ in KIND_CASES]


@pytest.mark.parametrize(("kind", "expected"), KIND_CASES, ids=KIND_IDS)
def test_launch_fails_before_acceptance_kind_mapped_no_job(
    sim: Sim, kind: str, expected: ErrorKind
) -> None:
    sim.faults({"command": "jobs.launch", "nth": 1, "action": "fail", "kind": kind})
    cli = sim.cli()
    result = cli.launch(sim.task(), name="npa-f")
    assert not result.accepted
    assert result.error_kind is expected
    assert result.error_kind.transient is (kind in {"warmup", "transport", "server", "rate_limit"})
    assert cli.queue().verdict is QueueVerdict.VERIFIED_EMPTY  # nothing was created
    assert cli.launch(sim.task(), name="npa-f").accepted  # only the first call failed


@pytest.mark.parametrize(("kind", "expected"), KIND_CASES, ids=KIND_IDS)
def test_queue_failure_unavailable_never_empty(sim: Sim, kind: str, expected: ErrorKind) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    sim.faults({"command": "jobs.queue", "action": "fail", "kind": kind})
    result = cli.queue()
    assert result.verdict is QueueVerdict.UNAVAILABLE
    assert result.records == ()
    assert result.error_kind is expected


@pytest.mark.parametrize(
    ("rule", "kind"),
    [
        ({"action": "garbage"}, ErrorKind.UNKNOWN),
        ({"action": "garbage", "exit": 1, "stderr": "Segmentation fault"}, ErrorKind.UNKNOWN),
        ({"action": "trailing", "text": "Tip: see the dashboard."}, ErrorKind.UNKNOWN),
        (
            {
                "action": "fail",
                "stderr": "sky.exceptions.ClusterNotUpError: No in-progress "
                "managed jobs.\nW Request retried.",
            },
            ErrorKind.CLUSTER_NOT_UP,
        ),
    ],
    ids=["garbage-exit-0", "garbage-exit-1", "trailing-text", "not-up-plus-extra-line"],
)
def test_queue_unreadable_output_unavailable(
    sim: Sim, rule: dict[str, Any], kind: ErrorKind
) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    sim.faults({"command": "jobs.queue", **rule})
    result = cli.queue()
    assert (result.verdict, result.error_kind) == (QueueVerdict.UNAVAILABLE, kind)


def test_queue_unknown_status_row_unavailable(sim: Sim) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["EXPLODED"]})
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    assert cli.queue().verdict is QueueVerdict.UNAVAILABLE


def test_queue_banner_preamble_records(sim: Sim) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    sim.faults({"command": "jobs.queue", "action": "preamble"})
    result = cli.queue()
    assert result.verdict is QueueVerdict.RECORDS
    assert len(result.job_ids("npa-q")) == 1


@pytest.mark.parametrize("kind", ["transport", "server"], ids=["transport", "server"])
def test_launch_accept_then_error_uncertain_success(sim: Sim, kind: str) -> None:
    sim.faults({"command": "jobs.launch", "action": "accept_then_fail", "kind": kind})
    cli = sim.cli()
    result = cli.launch(sim.task(), name="npa-unsure")
    assert not result.accepted
    assert result.error_kind.transient
    assert len(cli.queue().job_ids("npa-unsure")) == 1  # the job exists all the same


@pytest.mark.parametrize("after_accept", [False, True], ids=["before-accept", "after-accept"])
def test_launch_hang_times_out_outcome_unknown(sim: Sim, after_accept: bool) -> None:
    sim.faults(
        {"command": "jobs.launch", "action": "hang", "seconds": 30, "after_accept": after_accept}
    )
    slow = sim.cli(runner=ShortTimeout(1.0))
    result = slow.launch(sim.task(), name="npa-hang")
    assert not result.accepted
    assert result.error_kind is ErrorKind.TIMEOUT
    assert result.command.timed_out
    found = sim.cli().queue().job_ids("npa-hang")
    assert len(found) == (1 if after_accept else 0)


def test_queue_hang_unavailable_timeout(sim: Sim) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    sim.faults({"command": "jobs.queue", "action": "hang", "seconds": 30})
    result = sim.cli(runner=ShortTimeout(1.0)).queue()
    assert (result.verdict, result.error_kind) == (QueueVerdict.UNAVAILABLE, ErrorKind.TIMEOUT)


def test_queue_controller_up_without_jobs_empty_records(sim: Sim) -> None:
    sim.faults({"command": "jobs.queue", "nth": 1, "action": "controller", "up": True})
    result = sim.cli().queue()
    assert (result.verdict, result.records) == (QueueVerdict.RECORDS, ())


def test_queue_controller_removed_verified_empty(sim: Sim) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-q")
    sim.faults({"command": "jobs.queue", "nth": 2, "action": "controller", "up": False})
    assert cli.queue().verdict is QueueVerdict.RECORDS
    assert cli.queue().verdict is QueueVerdict.VERIFIED_EMPTY


# -- identity ------------------------------------------------------------------------------
def test_queue_per_user_filtering_by_isolated_identity(sim: Sim) -> None:
    sim.env["SKYSIM_STATE_DIR"] = str(sim.root / "server")  # one API server, two clients
    alice, bob, carol = sim.cli("alice"), sim.cli("bob"), sim.cli("carol")
    _launch(alice, sim, "npa-alice")
    _launch(bob, sim, "npa-bob")
    mine = alice.queue()
    assert mine.job_ids("npa-alice") and not mine.job_ids("npa-bob")
    everyone = alice.queue(all_users=True, verbose=True)
    assert everyone.job_ids("npa-alice") and everyone.job_ids("npa-bob")
    hashes = {r.job_name: r.user_hash for r in everyone.records}
    assert hashes["npa-alice"] == alice.isolated.user_id({})
    assert hashes["npa-alice"] != hashes["npa-bob"]
    assert carol.queue().verdict is QueueVerdict.VERIFIED_EMPTY  # no controller of carol's


def test_queue_explicit_user_id_selects_controller_namespace(sim: Sim) -> None:
    sim.env["SKYSIM_STATE_DIR"] = str(sim.root / "server")
    first = sim.cli("one", env={"SKYPILOT_USER_ID": "team-a"})
    second = sim.cli("two", env={"SKYPILOT_USER_ID": "team-a"})
    _launch(first, sim, "npa-shared")
    assert second.queue().job_ids("npa-shared")
    assert second.down_controller().command.argv[2] == "sky-jobs-controller-team-a"


# -- down ----------------------------------------------------------------------------------
def test_down_no_controller_already_absent(sim: Sim) -> None:
    result = sim.cli().down_controller()
    assert (result.outcome, result.error_kind) == (DownOutcome.ALREADY_ABSENT, ErrorKind.NONE)


def test_down_jobs_in_progress_blocked(sim: Sim) -> None:
    cli = sim.cli()
    _launch(cli, sim, "npa-busy")
    result = cli.down_controller()
    assert result.outcome is DownOutcome.BLOCKED_IN_PROGRESS
    assert "npa-busy" in result.detail
    assert cli.queue().job_ids("npa-busy")  # nothing was torn down


def test_down_refusal_fault_blocked(sim: Sim) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    cli = sim.cli()
    _launch(cli, sim, "npa-done")
    sim.faults({"command": "down", "action": "refuse_down"})
    assert cli.down_controller().outcome is DownOutcome.BLOCKED_IN_PROGRESS


def test_down_after_jobs_terminal_torn_down_then_absent(sim: Sim) -> None:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]})
    cli = sim.cli()
    _launch(cli, sim, "npa-end")
    job_id = _only_id(cli.queue(), "npa-end")
    assert cli.cancel([job_id]).scheduled == (job_id,)
    statuses = [cli.queue().status_of(job_id) for _ in range(2)]  # one step per call
    assert statuses == [JobStatus.CANCELLING, JobStatus.CANCELLED]
    result = cli.down_controller()
    assert (result.outcome, result.error_kind) == (DownOutcome.TORN_DOWN, ErrorKind.NONE)
    assert result.command.argv[1:] == (
        "down",
        f"sky-jobs-controller-{cli.isolated.user_id({})}",
        "--yes",
    )
    assert cli.queue().verdict is QueueVerdict.VERIFIED_EMPTY
    assert cli.down_controller().outcome is DownOutcome.ALREADY_ABSENT


class _NoStdin(SubprocessRunner):
    """Runs the command with stdin closed: nobody answers the ``delete`` prompt."""

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        return super().run(argv, **{**kwargs, "stdin": None})


def test_down_without_delete_answer_aborted_even_with_yes(sim: Sim) -> None:
    cli = sim.cli()
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    _launch(cli, sim, "npa-x")
    result = sim.cli(runner=_NoStdin()).down_controller()
    assert (result.outcome, result.error_kind) == (DownOutcome.FAILED, ErrorKind.ABORTED)
    assert cli.queue().job_ids("npa-x")  # the controller is still there


# -- secrets ---------------------------------------------------------------------------------
def test_launch_secret_value_reaches_child_env_never_argv(sim: Sim) -> None:
    canary = "canary-7f3a9c0e51"
    cli = sim.cli()
    result = cli.launch(sim.task(), name="npa-secret", secrets={"HF_TOKEN": canary})
    assert result.accepted
    argv = list(result.command.argv)
    assert argv[argv.index("--secret") + 1] == "HF_TOKEN"
    assert all(canary not in arg for arg in argv)
    state = sim.state()
    (job,) = state["jobs"]
    assert job["secrets"]["HF_TOKEN"] == {
        "source": "env",
        "sha256": hashlib.sha256(canary.encode()).hexdigest(),
    }
    assert "HF_TOKEN" in state["calls"][-1]["env_names"]
    assert canary not in (sim.state_dir() / "skysim.json").read_text()
