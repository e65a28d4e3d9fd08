"""A property of supervision (issue 9) over random pod events, statuses and budgets.

Each example builds one world (the ``sky`` simulator, run in-process, and the
Kubernetes double with one node) and submits a one-wave runtime run under
random ``--retries`` and ``--max-infrastructure-recoveries``. Every launch
follows its own random SkyPilot status timeline; every poll applies the next
random pod event to the newest job's pod (and node); a few queue calls fail.
The virtual clock moves only when the supervisor sleeps. Invariants:

- no two attempts of the wave are ever live at once (checked at every launch);
- every cancel names exactly one job id, and a relaunch after an
  infrastructure failure follows a verified-terminal cancel of the old id;
  one after a payload failure follows that job's own FAILED status;
- a permanent blocker cancels exactly that job and nothing is launched after;
- the two budgets never borrow from each other and are never exceeded.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings

from npa_infra.journal.store import Journal
from tests.integration.runs import supervised
from tests.integration.runs.world import VirtualClock, World, make_world
from tests.strategies import supervision_scenarios
from tests.support.fakekube import FakeKube
from tests.support.skysim import harness, jobs
from tests.support.skysim.inprocess import InProcessRunner

POLL = 7.0  # distinct from the cancel poll (5 s) and the retry pause (30 s)
NODE = "node-a"
RUN = "prop-1"
TERMINAL = jobs.TERMINAL
PAYLOAD = ("FAILED", "FAILED_SETUP")


@dataclass
class PodEvents(VirtualClock):
    """A virtual clock that applies the next scripted pod event at every supervision poll."""

    world: World | None = None
    events: list[str] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if seconds == POLL and self.events and self.world is not None:
            _apply(self.world, self.events.pop(0))


def _newest_pod(world: World) -> tuple[str, str] | None:
    found = [j for j in world.sim_jobs() if j.get("pods")]
    if not found:
        return None
    pod = max(found, key=lambda j: j["job_id"])["pods"][0]
    return (pod["name"], pod["namespace"]) if "uid" in pod else None


def _apply(world: World, event: str) -> None:
    """Reset the newest pod to a plain pending pod, then apply one event (kubernetes.md §4)."""
    fake = world.fake
    if event in ("node_not_ready", "node_ready"):
        fake.set_node_ready(NODE, event == "node_ready")
        return
    where = _newest_pod(world)
    if where is None:
        return
    name, ns = where
    fake.set_pod_phase(name, "Pending", namespace=ns)
    fake.set_container_status(name, reason="ContainerCreating", namespace=ns)
    fake.set_pod_condition(name, "PodScheduled", "True", namespace=ns)
    fake.set_pod_condition(name, "DisruptionTarget", "False", namespace=ns)
    waiting = {
        "image_pull_brief": (
            "ImagePullBackOff",
            'Back-off pulling image "x": ErrImagePull: dial tcp 10.0.0.1:443: i/o timeout',
        ),
        "image_pull_auth": ("ErrImagePull", "failed to authorize: 401 Unauthorized"),
        "missing_secret": ("CreateContainerConfigError", 'secret "hf-token" not found'),
    }
    unschedulable = {
        "unschedulable_gpu": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        "impossible_shape": "0/1 nodes are available: 1 node(s) didn't match Pod's node "
        "affinity/selector (nvidia.com/gpu.product=NVIDIA-H200).",
        "unschedulable_cpu": "0/1 nodes are available: 1 Insufficient cpu.",
    }
    if event in waiting:
        reason, message = waiting[event]
        fake.set_container_status(name, reason=reason, message=message, namespace=ns)
    elif event in unschedulable:
        fake.set_pod_condition(
            name,
            "PodScheduled",
            "False",
            reason="Unschedulable",
            message=unschedulable[event],
            namespace=ns,
        )
    elif event == "preempted":
        fake.disrupt_pod(name, namespace=ns)
    elif event == "running":
        fake.set_pod_phase(name, "Running", namespace=ns)
        fake.set_container_status(name, state="running", namespace=ns)
    elif event in ("succeeded", "failed"):
        fake.set_pod_phase(name, event.capitalize(), namespace=ns)


class Launches:
    """The ``before`` hook of the in-process ``sky``: what was live at each launch."""

    def __init__(self) -> None:
        self.world: World | None = None
        self.at_launch: list[dict[int, str]] = []  # job id → status, at each launch

    def __call__(self, argv: list[str]) -> None:
        if argv[:2] != ["jobs", "launch"] or self.world is None:
            return
        state = harness.read_state(self.world.state_dir)
        statuses = {
            j["job_id"]: jobs.job_status(j, state["tick"], time.time()) for j in state["jobs"]
        }
        live = [job for job, status in statuses.items() if status not in TERMINAL]
        assert not live, f"launching while jobs {live} are live: {statuses}"
        self.at_launch.append(statuses)


def _timeline_rules(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        {"command": "jobs.launch", "nth": n, "action": "timeline", "statuses": statuses}
        for n, statuses in enumerate(scenario["timelines"], start=1)
    ]
    rules += [
        {"command": "jobs.queue", "nth": n, "action": "fail", "kind": "server"}
        for n in scenario["unreadable_queue_calls"]
    ]
    return rules


def _journal(world: World) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    journal = Journal.open(world.home)
    try:
        events = [(e.kind, dict(e.data)) for e in journal.events(RUN)]
        budgets = next((dict(w.budgets) for w in journal.waves(RUN)), {})
    finally:
        journal.close()
    return events, budgets


def _check(world: World, launches: Launches, scenario: dict[str, Any], runner: Any) -> None:
    events, budgets = _journal(world)
    kinds = [k for k, _ in events]
    payload = [d for k, d in events if k == "payload_retry"]
    infra = [d for k, d in events if k == "infrastructure_recovery"]
    # the budgets: never exceeded, never borrowed, persisted as spent
    assert len(payload) <= scenario["retries"] and len(infra) <= scenario["recoveries"]
    assert all(d["verdict"] == "payload_failed" for d in payload)
    assert all(d["verdict"] in ("transient_expired", "infrastructure_failed") for d in infra)
    if budgets:
        assert budgets["retries_left"] == scenario["retries"] - len(payload)
        assert budgets["infrastructure_recoveries_left"] == scenario["recoveries"] - len(infra)
    sim = sorted(world.sim_jobs(), key=lambda j: j["job_id"])
    relaunched = len(payload) + len(infra)
    assert len(sim) == len(launches.at_launch)
    # a launch whose request never got through (an unreadable queue first) creates no job
    assert len(sim) in (relaunched, relaunched + 1) and (sim or not relaunched)
    # every cancel names one id; relaunches follow the old job's end or its verified cancel
    calls = runner.calls
    cancels = [(i, c) for i, c in enumerate(calls) if c[:2] == ["jobs", "cancel"]]
    assert all(len(c) == 4 and c[2] == "--yes" and c[3].isdigit() for _, c in cancels), cancels
    starts = [i for i, c in enumerate(calls) if c[:2] == ["jobs", "launch"]]
    relaunches = [k for k in kinds if k in ("payload_retry", "infrastructure_recovery")]
    for n, why in enumerate(relaunches[: len(sim) - 1], start=1):
        old, seen = sim[n - 1]["job_id"], launches.at_launch[n]
        if why == "payload_retry":
            assert seen[old] in PAYLOAD, (old, seen)
        else:
            between = [c for i, c in cancels if starts[n - 1] < i < starts[n]]
            assert between == [["jobs", "cancel", "--yes", str(old)]], (old, between)
            assert seen[old] in TERMINAL
    # a permanent blocker: that exact job is cancelled, nothing launches after it
    permanent = [d for k, d in events if k == "permanent_blocker"]
    if permanent:
        [stop] = permanent
        assert stop["job_id"] == sim[-1]["job_id"]
        after = [c for i, c in cancels if i > starts[-1]]
        assert after == [["jobs", "cancel", "--yes", str(stop["job_id"])]]
        assert kinds[-1] == "outcome" and "permanent_blocker" in kinds[-3:]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenario=supervision_scenarios())
def test_supervision_never_overlaps_attempts_or_borrows_budgets(scenario: dict[str, Any]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="npa-supervision-"))
    fake = FakeKube.start(tmp / "fakekube")
    try:
        fake.add_node(NODE)
        launches = Launches()
        runner = InProcessRunner(before=launches)
        world = make_world(tmp / "world", fake, pods=True, runner=runner)
        world.clock = PodEvents(world=world, events=list(scenario["pod_events"]))
        launches.world = world
        world.faults(*_timeline_rules(scenario))
        with supervised.settings(heartbeat_seconds=60.0, stale_after_seconds=60.0):
            result = supervised.run(
                world,
                supervised.single_wave_spec(tmp / "spec"),
                run_id=RUN,
                poll_seconds=POLL,
                max_wait_seconds=140.0,
                retries=scenario["retries"],
                max_infrastructure_recoveries=scenario["recoveries"],
                infrastructure_grace_seconds=28.0,
            )
        assert result.exit_code in (0, 1, 2), result.to_json()
        _check(world, launches, scenario, runner)
        for kind, _ in _journal(world)[0]:
            if kind in ("payload_retry", "infrastructure_recovery", "permanent_blocker"):
                event(kind)
        event(f"exit {result.exit_code}")
    finally:
        fake.stop()
        shutil.rmtree(tmp, ignore_errors=True)
