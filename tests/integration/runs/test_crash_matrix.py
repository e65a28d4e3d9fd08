"""The fault matrix: a crash after every journal step × every simulator failure mode.

For each failure mode the scenario runs once to enumerate its journal steps;
then, for every step N, a fresh world runs the same submit in a child killed
right after write N, and ``--resume-run`` finishes it. Invariants: never two
provider jobs for one attempt name; the resumed run ends in a definite state
(submitted/adopted), or recovery-required for a terminal fault after a launch was
sent (one absent read is not proof, the operator guide); and the
run is never lost (the journal knows it after any crash past its creation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.runs.crash import KILLED, count_writes, run_killed_after
from tests.integration.runs.supervised import single_wave_spec
from tests.integration.runs.world import ROOT, World, make_world
from tests.support.fakekube import FakeKube

SPEC = ROOT / "workflows/testing/minimal.yaml"
RUN = "crash-run"

# (id, simulator rules, the exit codes a finished (resumed) run may end with)
MODES: list[tuple[str, list[dict[str, Any]], set[int]]] = [
    ("clean", [], {0}),
    (
        "transport-before-accept",
        [{"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "transport"}],
        {0},
    ),
    (
        "warmup-before-accept",
        [{"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "warmup"}],
        {0},
    ),
    (
        "server-after-accept",
        [{"command": "jobs.launch", "nth": 1, "action": "accept_then_fail", "kind": "server"}],
        {0},
    ),
    (
        "rate-limit-after-accept",
        [{"command": "jobs.launch", "nth": 1, "action": "accept_then_fail", "kind": "rate_limit"}],
        {0},
    ),
    (
        "delayed-appearance",
        [{"command": "jobs.launch", "nth": 1, "action": "delay_appearance", "queue_calls": 2}],
        {0},
    ),
    # sent, then read absent: recovery-required, never FAILED (the operator guide)
    ("auth-refused", [{"command": "jobs.launch", "action": "fail", "kind": "auth"}], {2}),
    (
        "queue-unreadable-once",
        [{"command": "jobs.queue", "nth": 2, "action": "fail", "kind": "unknown"}],
        {0, 2},
    ),
]


def _names(world: World) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in world.sim_jobs():
        counts[job["name"]] = counts.get(job["name"], 0) + 1
    return counts


@pytest.mark.parametrize(("mode", "rules", "allowed"), MODES, ids=[m[0] for m in MODES])
def test_crash_after_every_journal_step_resume_keeps_one_job_per_attempt(
    tmp_path: Path, fake_kube: FakeKube, mode: str, rules: list[dict[str, Any]], allowed: set[int]
) -> None:
    _crash_matrix(tmp_path, fake_kube, SPEC, mode, rules, allowed)


# A supervised (runtime) wave adds the settle tick between the accepted launch and the
# id's lookup (issue 19) and the supervision writes after it: a crash after each of them.
FINISHES = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING", "SUCCEEDED"]}
RUNTIME_MODES = [
    (mode, [*rules, FINISHES], allowed)
    for mode, rules, allowed in MODES
    if mode in ("clean", "server-after-accept", "delayed-appearance")
]


@pytest.mark.parametrize(
    ("mode", "rules", "allowed"), RUNTIME_MODES, ids=[m[0] for m in RUNTIME_MODES]
)
def test_crash_after_every_journal_step_of_a_supervised_wave_keeps_one_job(
    tmp_path: Path, fake_kube: FakeKube, mode: str, rules: list[dict[str, Any]], allowed: set[int]
) -> None:
    spec = single_wave_spec(tmp_path / "spec")
    _crash_matrix(tmp_path, fake_kube, spec, mode, rules, allowed)


def _crash_matrix(
    tmp_path: Path,
    fake_kube: FakeKube,
    spec: Path,
    mode: str,
    rules: list[dict[str, Any]],
    allowed: set[int],
) -> None:
    SPEC = spec  # the scenario's spec, under the module's name for it
    probe = make_world(tmp_path / "probe", fake_kube)
    probe.faults(*rules)
    _, labels = count_writes(lambda: probe.submit(SPEC, run_id=RUN))
    assert labels, "a submit writes the journal"
    for step in range(1, len(labels) + 1):
        world = make_world(tmp_path / f"step{step:02d}", fake_kube)
        world.faults(*rules)
        code = run_killed_after(
            step, lambda w=world: w.submit(SPEC, run_id=RUN), tmp_path / "child.json"
        )
        assert code == KILLED, f"{mode}: step {step} ({labels[step - 1]}) did not crash: {code}"
        assert all(n <= 1 for n in _names(world).values()), (mode, step, _names(world))
        resumed = world.submit(SPEC, resume_run=RUN)
        again = resumed
        if resumed.exit_code == 2:  # indeterminate: the remedy is to resume again
            again = world.submit(SPEC, resume_run=RUN)
        context = (mode, step, labels[step - 1], resumed.to_json())
        assert again.exit_code in allowed, context
        assert all(n <= 1 for n in _names(world).values()), (context, _names(world))
        if again.exit_code == 0:
            names = [t["job_name"] for t in again.transactions]
            assert sum(_names(world).get(n, 0) for n in names) == 1, context
            assert again.job_id is not None
