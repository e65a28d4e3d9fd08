"""Wave grouping and job names (dsl.md §5.3 ``--waves``, §5.4; cli.md §0)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.plan import planner, waves
from npa_infra.plan.model import Plan, PlanStep, Wave
from npa_infra.workflow.planning.loading import load_validated

REPO = Path(__file__).resolve().parents[3]


def step(state: str, group: str = "", iteration: int | None = None) -> PlanStep:
    return PlanStep(
        state=state,
        iteration=iteration,
        loop_label=group,
        group=group,
        argv=("echo", state),
        shell="",
        tool_ref="",
        resources="default",
        resources_profile={},
        inputs=(),
        outputs=(),
    )


def plan(*steps: PlanStep, concurrency: dict[str, int] | None = None) -> Plan:
    return Plan(
        workflow="w",
        api_version="npa.workflow/v0.0.1",
        initial=steps[0].state if steps else "",
        run_id="run",
        assume_decision="",
        steps=steps,
        group_concurrency=concurrency or {},
    )


def shape(result: list[Wave]) -> list[tuple[str, str, list[str]]]:
    return [(w.kind, w.name, [s.state for s in w.steps]) for w in result]


# -- grouping ---------------------------------------------------------------------------------


def test_compute_serial_steps_each_own_wave() -> None:
    result = waves.compute(plan(step("a"), step("b"), step("c")))
    assert shape(result) == [
        ("serial", "a", ["a"]),
        ("serial", "b", ["b"]),
        ("serial", "c", ["c"]),
    ]
    assert [w.index for w in result] == [0, 1, 2]
    assert all((w.max_concurrency, w.batches, w.group) == (1, 1, "") for w in result)


def test_compute_consecutive_same_group_forms_one_parallel_wave() -> None:
    result = waves.compute(plan(step("a"), step("m1", "g"), step("m2", "g"), step("z")))
    assert shape(result) == [
        ("serial", "a", ["a"]),
        ("parallel", "g", ["m1", "m2"]),
        ("serial", "z", ["z"]),
    ]
    assert result[1].group == "g"


def test_compute_repeated_member_starts_new_wave() -> None:
    result = waves.compute(plan(step("m1", "g"), step("m2", "g"), step("m1", "g"), step("m2", "g")))
    assert shape(result) == [("parallel", "g", ["m1", "m2"]), ("parallel", "g", ["m1", "m2"])]


def test_compute_adjacent_different_groups_are_separate_waves() -> None:
    result = waves.compute(plan(step("a1", "ga"), step("b1", "gb"), step("b2", "gb")))
    assert shape(result) == [("parallel", "ga", ["a1"]), ("parallel", "gb", ["b1", "b2"])]


def test_compute_same_group_split_by_serial_step_is_two_waves() -> None:
    result = waves.compute(plan(step("m1", "g"), step("x"), step("m2", "g")))
    assert [w.kind for w in result] == ["parallel", "serial", "parallel"]


def test_compute_serial_wave_name_includes_iteration() -> None:
    result = waves.compute(plan(step("a", iteration=1), step("a", iteration=2)))
    assert [w.name for w in result] == ["a-1", "a-2"]


def test_compute_empty_plan_has_no_waves() -> None:
    assert waves.compute(plan()) == []


# -- batches -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "declared", "cap", "max_concurrency", "batches"),
    [
        (3, None, 0, 3, 1),
        (3, 2, 0, 2, 2),
        (3, 2, 1, 2, 3),
        (3, 2, 5, 2, 2),
        (4, 4, 3, 4, 2),
        (5, 1, 0, 1, 5),
        (1, None, 0, 1, 1),
        (7, 3, 0, 3, 3),
    ],
    ids=[
        "unset-uses-member-count",
        "declared-two",
        "cap-below-declared",
        "cap-above-declared",
        "cap-splits-four",
        "serialised-group",
        "single-member",
        "seven-by-three",
    ],
)
def test_compute_batches_ceil_members_over_min_concurrency_and_cap(
    members: int, declared: int | None, cap: int, max_concurrency: int, batches: int
) -> None:
    steps = [step(f"m{i}", "g") for i in range(members)]
    concurrency = {"g": declared} if declared is not None else {}
    (wave,) = waves.compute(plan(*steps, concurrency=concurrency), max_concurrency_cap=cap)
    assert wave.max_concurrency == max_concurrency
    assert wave.batches == batches
    effective = min(max_concurrency, cap) if cap > 0 else max_concurrency
    assert wave.batches == math.ceil(members / effective)


def test_compute_parallel_fanout_spec_matches_documented_waves() -> None:
    spec = load_validated(REPO / "workflows" / "testing" / "parallel-fanout.yaml", BUILTIN).spec
    result = waves.compute(planner.build_plan(spec, BUILTIN, run_id="r"))
    assert [(w.kind, w.name, len(w.steps), w.max_concurrency, w.batches) for w in result] == [
        ("parallel", "envgen", 3, 2, 2),
        ("serial", "aggregate", 1, 1, 1),
    ]


def test_compute_main_sim2real_score_lanes_wave_per_round() -> None:
    spec = load_validated(REPO / "workflows" / "main" / "sim2real.yaml", BUILTIN).spec
    built = planner.build_plan(spec, BUILTIN, run_id="r", assume_decision="loop_back")
    result = waves.compute(built)
    parallel = [w for w in result if w.kind == "parallel"]
    rounds = sum(1 for s in built.steps if s.state == "ppo-update")
    assert [w.name for w in parallel] == ["envgen-fanout"] + ["score-lanes"] * rounds
    assert [s for w in result for s in w.steps] == list(built.steps)


def test_wave_to_json_lists_output_uris() -> None:
    with_output = PlanStep(**{**_fields(step("a")), "outputs": ({"uri": "s3://x", "schema": "s"},)})
    (wave,) = waves.compute(plan(with_output))
    assert wave.to_json()["steps"] == [
        {
            "state": "a",
            "iteration": None,
            "tool_ref": "",
            "resources": "default",
            "outputs": ["s3://x"],
        }
    ]


def _fields(s: PlanStep) -> dict[str, object]:
    return dict(s._asdict())


# -- job names ---------------------------------------------------------------------------------


def wave(index: int, name: str) -> Wave:
    return Wave(index, "serial", "", name, 1, 1, (step(name),))


@pytest.mark.parametrize(
    ("run_id", "shown"),
    [
        ("Sim2Real_Run.ID", "sim2real-run-id"),
        ("a b/c:d", "a-b-c-d"),
        ("café", "caf"),
    ],
    ids=["upper-underscore-dot", "space-slash-colon", "non-ascii"],
)
def test_job_name_one_shot_sanitised_id_keeps_a_hash_of_the_full_id(
    run_id: str, shown: str
) -> None:
    assert re.fullmatch(rf"{shown}-[0-9a-f]{{10}}", waves.job_name(run_id))


def test_job_name_one_shot_clean_id_is_the_name() -> None:
    assert waves.job_name("sim2real-plan") == "sim2real-plan"


def test_job_name_runtime_wave_has_two_digit_index_and_name() -> None:
    assert waves.job_name("run1", wave(12, "x-2")) == "run1-12-x-2"
    assert waves.job_name("run1", wave(3, "stage_7")) == "run1-03-stage_7"
    assert re.fullmatch(
        r"run1-03-stage-seven-[0-9a-f]{10}", waves.job_name("run1", wave(3, "Stage.Seven"))
    )


@pytest.mark.parametrize("attempt", [0, 1], ids=["zero", "one"])
def test_job_name_first_attempt_has_no_suffix(attempt: int) -> None:
    assert waves.job_name("run", attempt=attempt) == "run"


def test_job_name_attempt_two_appends_suffix() -> None:
    assert waves.job_name("run", wave(0, "s"), attempt=2) == "run-00-s-a2"


def test_job_name_long_name_cut_keeps_a_hash_within_60_chars() -> None:
    assert re.fullmatch(r"r{45}-[0-9a-f]{10}", waves.job_name("r" * 100))
    assert waves.job_name("r" * 60) == "r" * 60


def test_job_name_long_name_keeps_attempt_suffix_when_truncating() -> None:
    name = waves.job_name("r" * 100, wave(1, "stage" * 20), attempt=12)
    assert re.fullmatch(r"r{45}-[0-9a-f]{10}-a12", name)
    first = waves.job_name("r" * 100, wave(1, "stage" * 20))
    assert name == f"{first}-a12"  # a retry keeps the first attempt's hash


def test_job_name_only_allowed_characters() -> None:
    name = waves.job_name("Weird!@#$%^&*()Name", wave(5, "Ünïcode stage"), attempt=3)
    assert all(ch.islower() or ch.isdigit() or ch in "-_" for ch in name)
    assert name.isascii()
