"""Assembling task documents into SkyPilot job files (dsl.md §5.4, §6.1).

One-shot mode is one serial pipeline: a header ``{name, execution: serial}``
and one task per step. Runtime mode is one job per wave, each batch of a
parallel wave a JobGroup with ``execution: parallel``. The YAML text must
load back to the same documents.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.errors import RenderError
from npa_infra.plan.model import Plan, PlanStep
from npa_infra.render import documents
from npa_infra.render.documents import RenderedJob, dump_documents, render_plan
from npa_infra.render.tasks import RenderSettings

IMAGE = "registry.example.com/team/trainer:1.0"
DIGEST = "sha256:" + "0123456789abcdef" * 4
SHA40 = "0123456789abcdef0123456789abcdef01234567"
PROFILE: dict[str, Any] = {"cloud": "kubernetes", "cpus": 2, "memory": "4Gi", "image": IMAGE}


def step(
    state: str,
    *,
    group: str = "",
    iteration: int | None = None,
    profile: dict[str, Any] | None = None,
    argv: tuple[str, ...] = ("python3", "-c", "print(1)"),
) -> PlanStep:
    return PlanStep(
        state=state,
        iteration=iteration,
        loop_label=group,
        group=group,
        argv=argv,
        shell="",
        tool_ref="",
        resources="default",
        resources_profile=dict(PROFILE if profile is None else profile),
        inputs=(),
        outputs=(),
    )


def plan(*steps: PlanStep, groups: dict[str, int] | None = None, run_id: str = "run-1") -> Plan:
    return Plan(
        workflow="wf",
        api_version="npa.workflow/v0.0.1",
        initial=steps[0].state if steps else "",
        run_id=run_id,
        assume_decision="",
        steps=tuple(steps),
        config={},
        group_concurrency=dict(groups or {}),
    )


def settings(**overrides: Any) -> RenderSettings:
    base: dict[str, Any] = {"workflow": "wf", "run_id": "run-1", "config": {}}
    base.update(overrides)
    return RenderSettings(**base)


FANOUT = plan(
    step("prep"),
    step("shard-0", group="fan"),
    step("shard-1", group="fan"),
    step("shard-2", group="fan"),
    step("aggregate"),
    groups={"fan": 2},
)


def task_names(job: RenderedJob) -> list[str]:
    return [str(d["name"]) for d in job.documents[1:]]


# -- one-shot ------------------------------------------------------------------


def test_render_plan_one_shot_single_serial_job_with_header_then_one_task_per_step() -> None:
    jobs = render_plan(FANOUT, settings(), runtime=False)

    assert len(jobs) == 1
    job = jobs[0]
    assert job.execution == "serial"
    assert job.wave is None
    assert job.documents[0] == {"name": job.job_name, "execution": "serial"}
    assert task_names(job) == ["prep", "shard-0", "shard-1", "shard-2", "aggregate"]
    assert job.images == (IMAGE,)


def test_render_plan_one_shot_job_named_after_run_id() -> None:
    jobs = render_plan(plan(step("a"), run_id="My_Run.7"), settings(), runtime=False)

    name = jobs[0].job_name
    assert re.fullmatch(r"[a-z0-9-]{1,60}", name)
    assert name.startswith("my-run-7")


def test_render_plan_one_shot_repeated_state_task_names_unique() -> None:
    repeated = plan(step("rollouts"), step("score"), step("rollouts"), step("score"))

    names = task_names(render_plan(repeated, settings(), runtime=False)[0])

    assert len(set(names)) == len(names) == 4
    assert names[:2] == ["rollouts", "score"]


def test_render_plan_one_shot_leaf_loop_iterations_named_state_iteration() -> None:
    looped = plan(step("train", iteration=1), step("train", iteration=2))

    names = task_names(render_plan(looped, settings(), runtime=False)[0])

    assert names == ["train-1", "train-2"]


# -- runtime -------------------------------------------------------------------


def test_render_plan_runtime_one_job_per_serial_wave_and_batch() -> None:
    jobs = render_plan(FANOUT, settings(), runtime=True)

    assert [(j.wave, j.execution, task_names(j)) for j in jobs] == [
        (0, "serial", ["prep"]),
        (1, "parallel", ["shard-0", "shard-1"]),
        (1, "parallel", ["shard-2"]),
        (2, "serial", ["aggregate"]),
    ]
    for job in jobs:
        assert job.documents[0] == {"name": job.job_name, "execution": job.execution}
        assert "primary_tasks" not in job.documents[0]


def test_render_plan_runtime_job_names_unique_and_bounded() -> None:
    long_plan = plan(
        step("prep"),
        step("shard-0", group="fan"),
        step("shard-1", group="fan"),
        step("shard-2", group="fan"),
        groups={"fan": 1},
        run_id="a-very-long-run-identifier-" + "x" * 60,
    )

    jobs = render_plan(long_plan, settings(), runtime=True)

    names = [j.job_name for j in jobs]
    assert len(jobs) == 4
    assert len(set(names)) == len(names)
    assert all(len(n) <= 60 for n in names)


def test_render_plan_runtime_group_without_cap_one_parallel_job() -> None:
    uncapped = plan(step("a", group="g"), step("b", group="g"), step("c", group="g"))

    jobs = render_plan(uncapped, settings(), runtime=True)

    assert [(j.execution, task_names(j)) for j in jobs] == [("parallel", ["a", "b", "c"])]


def test_render_plan_runtime_concurrency_cap_splits_batches() -> None:
    uncapped = plan(step("a", group="g"), step("b", group="g"), step("c", group="g"))

    jobs = render_plan(uncapped, settings(), runtime=True, max_concurrency_cap=1)

    assert [task_names(j) for j in jobs] == [["a"], ["b"], ["c"]]
    assert all(j.execution == "parallel" for j in jobs)


def test_render_plan_runtime_wave_indexes_follow_waves() -> None:
    two_groups = plan(step("a", group="g"), step("b", group="g"), step("mid"), step("a", group="g"))

    jobs = render_plan(two_groups, settings(), runtime=True)

    assert [(j.wave, j.execution) for j in jobs] == [
        (0, "parallel"),
        (1, "serial"),
        (2, "parallel"),
    ]


# -- YAML text --------------------------------------------------------------------


@pytest.mark.parametrize("runtime", [False, True], ids=["one-shot", "runtime"])
def test_render_plan_yaml_text_round_trips_through_safe_load_all(runtime: bool) -> None:
    multiline = step("report", argv=("bash", "-c", "echo 'a: b'\necho \"#not a comment\""))
    p = plan(*FANOUT.steps, multiline, groups={"fan": 2})

    for job in render_plan(p, settings(secret_env=("HF_TOKEN",)), runtime=runtime):
        assert list(yaml.safe_load_all(job.text)) == list(job.documents)


def test_dump_documents_multiline_strings_as_literal_blocks() -> None:
    text = dump_documents(({"name": "h", "execution": "serial"}, {"run": "a\nb\n"}))

    assert "run: |" in text
    assert text.count("---") == 1


# -- ${VAR} outside run and setup ---------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "config"),
    [
        ({**PROFILE, "region": "${REGION}"}, {}),
        ({**PROFILE, "image": "registry.example.com/${TEAM}/img:1"}, {}),
        (PROFILE, {"aws_endpoint_url": "${S3_ENDPOINT}"}),
        (
            {
                **PROFILE,
                "kubernetes": {"pod_config": {"metadata": {"labels": {"owner": "${USER}"}}}},
            },
            {},
        ),
    ],
    ids=["resources", "image", "envs", "pod-config"],
)
def test_render_plan_placeholder_outside_run_and_setup_raises_render_error(
    profile: dict[str, Any], config: dict[str, str]
) -> None:
    with pytest.raises(RenderError, match=r"\$\{[A-Z][A-Z0-9_]*\}"):
        render_plan(plan(step("a", profile=profile)), settings(config=config), runtime=False)


def test_render_plan_placeholder_inside_run_kept_verbatim() -> None:
    p = plan(step("a", argv=("bash", "-c", "echo ${HOME} ${SKYPILOT_NODE_RANK}")))

    job = render_plan(p, settings(), runtime=False)[0]

    assert "${HOME} ${SKYPILOT_NODE_RANK}" in job.documents[1]["run"]


# -- plan-level render errors --------------------------------------------------------


@pytest.mark.parametrize(
    "source_sha", ["", "abc123", SHA40.upper(), SHA40 + "0"], ids=["empty", "short", "upper", "41"]
)
def test_render_plan_baked_npa_bad_source_sha_raises_render_error(source_sha: str) -> None:
    image = f"registry.example.com/team/stage@{DIGEST}"
    p = plan(step("a", profile={"cloud": "kubernetes", "image": image}))
    s = settings(config={"require_baked_npa": "1", "source_sha": source_sha})

    with pytest.raises(RenderError, match=r"source_sha is not 40 hex"):
        render_plan(p, s, runtime=False)


def test_render_plan_baked_npa_pinned_images_and_sha_renders() -> None:
    image = f"registry.example.com/team/stage@{DIGEST}"
    p = plan(step("a", profile={"cloud": "kubernetes", "image": image}))
    s = settings(config={"require_baked_npa": "1", "source_sha": SHA40})

    job = render_plan(p, s, runtime=False)[0]

    assert job.documents[1]["resources"]["image_id"] == f"docker:{image}"
    assert job.documents[1]["envs"]["NPA_SIM2REAL_SOURCE_SHA"] == SHA40


def test_render_plan_baked_npa_one_mutable_image_among_pinned_raises_naming_step() -> None:
    pinned = {"cloud": "kubernetes", "image": f"registry.example.com/team/stage@{DIGEST}"}
    p = plan(step("a", profile=pinned), step("b", profile=PROFILE), step("c", profile=pinned))
    s = settings(config={"require_baked_npa": "1", "source_sha": SHA40})

    with pytest.raises(RenderError, match=r"planned step 'b' requires a registry-qualified"):
        render_plan(p, s, runtime=True)


def test_render_plan_empty_plan_raises_render_error() -> None:
    with pytest.raises(RenderError):
        render_plan(plan(), settings(), runtime=False)


# -- preflight pins ----------------------------------------------------------------------


@pytest.mark.parametrize("runtime", [False, True], ids=["one-shot", "runtime"])
def test_render_plan_pinned_run_emits_digest_never_the_tag(runtime: bool) -> None:
    from npa_infra.render.images import ImageSelection

    pinned = f"registry.example.com/team/trainer@{DIGEST}"
    pinned_settings = settings(selection=ImageSelection(pins={IMAGE: pinned}))

    jobs = render_plan(FANOUT, pinned_settings, runtime=runtime)
    again = render_plan(FANOUT, pinned_settings, runtime=runtime)

    for job in jobs:
        tasks = job.documents[1:]
        assert {t["resources"]["image_id"] for t in tasks} == {f"docker:{pinned}"}
        assert {t["envs"]["NPA_TASK_IMAGE"] for t in tasks} == {pinned}
        assert ":1.0" not in job.text
        assert job.images == (pinned,)
    assert [j.text for j in jobs] == [j.text for j in again]  # deterministic


# -- the placeholder filter (issue 19) -------------------------------------------------

_PIECES = st.sampled_from(["a", "$", "{", "}", "${", "${K}", "${K", "$ {K}", "K}", "é"])
_TEXT = st.lists(_PIECES, max_size=5).map("".join)
_VALUES = st.recursive(
    st.one_of(_TEXT, st.integers(), st.floats(), st.booleans(), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_TEXT, st.integers()), inner, max_size=3),
        st.sets(st.integers(), max_size=2),
    ),
    max_leaves=12,
)


@given(_VALUES)
def test_may_hold_placeholder_false_only_where_the_walk_finds_none(value: Any) -> None:
    if not documents._may_hold_placeholder(value):
        assert documents._placeholder(value) is None


@pytest.mark.parametrize(
    "value",
    [{"a": [{"b": ("x", "${DEEP}")}]}, {("k", "${TUPLE_KEY}"): 1}],
    ids=["nested", "not-json"],
)
def test_check_placeholders_deep_or_not_json_placeholder_still_raises(value: Any) -> None:
    found = documents._placeholder(value)

    assert found is not None and documents._may_hold_placeholder(value)
    with pytest.raises(RenderError, match=re.escape(found.group(0))):
        documents._check_placeholders({"name": "t", "envs": value}, "t")
