"""The pure checkpoint-recovery decision: checkpoint resume only with a loader and proof."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.plan import planner
from npa_infra.render.documents import render_plan, with_envs
from npa_infra.render.tasks import RenderSettings
from npa_infra.runs import checkpoints
from npa_infra.runs.checkpoints import Declaration, Found, Reason, ResumeMode, decide
from npa_infra.workflow.planning.loading import load_validated

URI = "s3://bucket/run/ckpt/"
DECLARED = Declaration("train", URI, "torch-dcp/v1")


@pytest.mark.parametrize(
    ("declaration", "found", "compatible", "mode", "reason"),
    [
        (Declaration("train"), None, True, ResumeMode.RESTART, Reason.NO_LOADER),
        (Declaration("train", URI), None, True, ResumeMode.RESTART, Reason.NO_LOADER),
        (Declaration("train", "", "x"), None, True, ResumeMode.RESTART, Reason.NO_LOADER),
        (DECLARED, Found.PRESENT, False, ResumeMode.RESTART, Reason.LOADER_INCOMPATIBLE),
        (DECLARED, Found.INVALID, True, ResumeMode.RESTART, Reason.CHECKPOINT_URI_INVALID),
        (DECLARED, Found.PRESENT, True, ResumeMode.CHECKPOINT, Reason.CHECKPOINT_VALIDATED),
        (DECLARED, Found.EMPTY, True, ResumeMode.RESTART, Reason.CHECKPOINT_EMPTY),
        (DECLARED, Found.ABSENT, True, ResumeMode.RESTART, Reason.CHECKPOINT_ABSENT),
        (DECLARED, Found.UNAVAILABLE, True, None, Reason.CHECKPOINT_UNREADABLE),
        (DECLARED, None, True, None, Reason.CHECKPOINT_UNREADABLE),
    ],
    ids=[
        "nothing-declared",
        "uri-without-loader",
        "loader-without-uri",
        "other-task-yaml",
        "malformed-uri",
        "validated",
        "empty",
        "absent",
        "unreadable",
        "not-probed",
    ],
)
def test_decide_resumes_from_a_checkpoint_only_with_loader_and_proof(
    declaration: Declaration,
    found: Found | None,
    compatible: bool,
    mode: ResumeMode | None,
    reason: Reason,
) -> None:
    resume = decide(declaration, found, compatible=compatible)
    assert (resume.mode, resume.reason) == (mode, reason)


@given(
    st.builds(Declaration, st.just("t"), st.sampled_from(["", URI]), st.sampled_from(["", "l"])),
    st.none() | st.sampled_from(list(Found)),
    st.booleans(),
)
def test_decide_claims_checkpoint_only_for_a_present_checkpoint_and_a_loader(
    declaration: Declaration, found: Found | None, compatible: bool
) -> None:
    resume = decide(declaration, found, compatible=compatible)
    claims = resume.mode is ResumeMode.CHECKPOINT
    assert claims == (declaration.resumable and compatible and found is Found.PRESENT)
    variables = checkpoints.exports(resume)
    assert (checkpoints.RESUME_CHECKPOINT in variables) == claims
    if resume.mode is not None:
        assert variables[checkpoints.RESUME_MODE] == resume.mode.value


def test_exports_blocked_resume_gets_no_variables() -> None:
    assert checkpoints.exports(decide(DECLARED, Found.UNAVAILABLE, compatible=True)) == {}


SETTINGS = RenderSettings(workflow="ck", run_id="run-1", config={}, src_s3_uri="s3://b/src/")
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: ck}
config:
  root_uri: s3://b/r
  checkpoint_uri: s3://b/models/base.pt  # as corpus specs use it: a model, not a loader
states:
  train:
    run: {argv: [python3, train.py]}
    params:
      checkpoint_uri: "s3://b/{{run.id}}/ckpt/"
      checkpoint_loader: torch-dcp/v1
    next: report
  report:
    run: {argv: [python3, report.py]}
    terminal: true
"""


def test_only_an_explicit_loader_declares_and_the_rendered_task_exports_it() -> None:
    spec = load_validated("ck.yaml", BUILTIN, text=textwrap.dedent(SPEC)).spec
    plan = planner.build_plan(spec, BUILTIN, run_id="run-1")
    train, report = plan.steps
    assert (train.checkpoint_uri, train.checkpoint_loader) == ("s3://b/run-1/ckpt/", "torch-dcp/v1")
    assert (report.checkpoint_uri, report.checkpoint_loader) == ("", "")
    assert "checkpoint" not in str(
        train.to_json()
    )  # the plan JSON and fingerprint keep their shape
    [job] = render_plan(plan, SETTINGS, runtime=False)
    found = checkpoints.declarations(job.documents)
    assert found == (
        Declaration("train", "s3://b/run-1/ckpt/", "torch-dcp/v1"),
        Declaration("report"),
    )
    envs = job.documents[2]["envs"]
    assert checkpoints.DECLARED_URI not in envs and checkpoints.DECLARED_LOADER not in envs


def test_with_envs_sets_fence_and_per_task_variables_and_keeps_the_planned_text_otherwise() -> None:
    spec = load_validated("ck.yaml", BUILTIN, text=textwrap.dedent(SPEC)).spec
    plan = planner.build_plan(spec, BUILTIN, run_id="run-1")
    [job] = render_plan(plan, SETTINGS, runtime=False)
    same = {checkpoints.FENCE_ATTEMPT: "1", checkpoints.FENCE_SEQUENCE: "1"}
    assert with_envs(job, same) == job.text
    import yaml

    text = with_envs(
        job,
        {checkpoints.FENCE_ATTEMPT: "3", checkpoints.FENCE_SEQUENCE: "2"},
        {"train": {checkpoints.RESUME_MODE: "checkpoint"}},
    )
    header, train, report = list(yaml.safe_load_all(text))
    assert header == job.documents[0]
    assert (
        train["envs"][checkpoints.FENCE_ATTEMPT] == report["envs"][checkpoints.FENCE_ATTEMPT] == "3"
    )
    assert train["envs"][checkpoints.FENCE_SEQUENCE] == "2"
    assert train["envs"][checkpoints.RESUME_MODE] == "checkpoint"
    assert checkpoints.RESUME_MODE not in report["envs"]
    assert list(train) == list(job.documents[1])  # key order as planned
