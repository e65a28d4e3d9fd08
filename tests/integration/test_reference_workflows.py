"""The project's own workflows: ``workflows/main`` and ``workflows/testing``.

Every spec validates, plans under the three decision assumptions and renders
in one-shot and runtime mode, with the built-in catalog and with the catalog
the environment selects (``make test`` and ``make demo`` export
``NPA_TOOL_CATALOG``). ``raw-skypilot.yaml`` is a plain SkyPilot task and goes
through the raw path of ``submit`` instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from npa_infra.catalog.loader import select_catalog
from npa_infra.catalog.model import Catalog
from npa_infra.errors import SpecError
from npa_infra.plan.planner import build_plan
from npa_infra.render.documents import render_plan
from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.planning import api
from npa_infra.workflow.planning.loading import load_validated
from npa_infra.workflow.submission import pipeline, submitflags

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "workflows" / "main"
TESTING = REPO / "workflows" / "testing"
RAW = TESTING / "raw-skypilot.yaml"
SPECS = sorted(
    p for p in (*MAIN.glob("*.yaml"), *TESTING.glob("*.yaml")) if p.name != "raw-skypilot.yaml"
)
SPEC_IDS = [f"{p.parent.name}/{p.stem}" for p in SPECS]
ASSUMPTIONS = {"default": "", "loop_back": "loop_back", "promote": "promote_checkpoint"}
SRC = "s3://npa-test-src/npa-src/npa/fingerprint/"


def _catalogs() -> dict[str, Catalog]:
    return {
        "builtin-catalog": select_catalog(None, {}),
        "environment-catalog": select_catalog(None, os.environ),
    }


CATALOGS = _catalogs()


def test_workflows_main_holds_exactly_the_two_reference_workflows() -> None:
    assert sorted(p.name for p in MAIN.glob("*.yaml")) == ["paidf-cosmos3.yaml", "sim2real.yaml"]


def test_workflows_testing_holds_specs_and_the_raw_task() -> None:
    names = {p.name for p in TESTING.glob("*.yaml")}

    assert "raw-skypilot.yaml" in names
    assert "minimal.yaml" in names
    assert len(SPECS) >= 4


@pytest.mark.parametrize("catalog_id", CATALOGS.keys(), ids=CATALOGS.keys())
@pytest.mark.parametrize("path", SPECS, ids=SPEC_IDS)
def test_reference_workflow_validates_plans_and_renders_both_modes(
    path: Path, catalog_id: str
) -> None:
    catalog = CATALOGS[catalog_id]
    spec = load_validated(path, catalog).spec

    for label, assume in ASSUMPTIONS.items():
        plan = build_plan(spec, catalog, run_id=f"{spec.name}-ref", assume_decision=assume)
        assert plan.steps, label
        assert spec.states[plan.steps[-1].state].terminal, label
        s = RenderSettings(
            workflow=plan.workflow, run_id=plan.run_id, config=plan.config, src_s3_uri=SRC
        )
        for runtime in (False, True):
            jobs = render_plan(plan, s, runtime=runtime)
            assert sum(len(j.documents) - 1 for j in jobs) == len(plan.steps), (label, runtime)
            for job in jobs:
                assert list(yaml.safe_load_all(job.text)) == list(job.documents)
                names = [d["name"] for d in job.documents[1:]]
                assert len(set(names)) == len(names), (label, runtime, names)


@pytest.mark.parametrize("path", SPECS, ids=SPEC_IDS)
def test_reference_workflow_validate_spec_sdk_reports_valid(path: Path) -> None:
    report = api.validate_spec(path, env={})

    assert report.to_json()["status"] == "valid"
    assert report.states == sorted(report.states)
    assert report.initial in report.states


def test_submit_plan_only_main_sim2real_writes_parseable_yaml(tmp_path: Path) -> None:
    home = tmp_path / "home"
    options = submitflags.SubmitOptions(
        run_id="sim2real-ref",
        plan_only=True,
        render_dir=tmp_path / "rendered",
        preflight_images=False,  # offline: the registry check has its own tests
    )

    report = pipeline.submit(MAIN / "sim2real.yaml", options, env={"NPA_HOME": str(home)})

    assert report.to_json()["status"] == "PLANNED"
    assert report.yaml_paths
    total = 0
    for path in map(Path, report.yaml_paths):
        assert (tmp_path / "rendered") in path.parents
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        assert documents[0]["execution"] == "serial"
        assert all({"name", "resources", "envs", "run"} <= set(d) for d in documents[1:])
        total += len(documents) - 1
    assert report.plan is not None
    assert total == len(report.plan.steps)
    # nothing under the home but the journal, holding the run id as a plan (issue 17)
    journal_files = {"journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"}
    assert {p.name for p in home.iterdir()} <= journal_files


def test_submit_plan_only_main_sim2real_with_environment_catalog(tmp_path: Path) -> None:
    # make demo runs exactly this submit with NPA_TOOL_CATALOG exported.
    env = {"NPA_HOME": str(tmp_path / "home")}
    if os.environ.get("NPA_TOOL_CATALOG"):
        env["NPA_TOOL_CATALOG"] = os.environ["NPA_TOOL_CATALOG"]
    options = submitflags.SubmitOptions(
        plan_only=True, render_dir=tmp_path / "rendered", preflight_images=False
    )

    report = pipeline.submit(MAIN / "sim2real.yaml", options, env=env)

    assert report.yaml_paths


def test_submit_plan_only_raw_task_substitutes_var(tmp_path: Path) -> None:
    options = submitflags.SubmitOptions(
        run_id="raw-ref",
        plan_only=True,
        variables={"MESSAGE": "hello"},
        render_dir=tmp_path / "rendered",
    )

    report = pipeline.submit(RAW, options, env={"NPA_HOME": str(tmp_path / "home")})

    (path,) = report.yaml_paths
    (doc,) = yaml.safe_load_all(Path(path).read_text(encoding="utf-8"))
    assert doc["envs"]["MESSAGE"] == "hello"
    assert "hello" in doc["envs"]["BANNER"]
    assert report.mode == "raw"


def test_submit_plan_only_raw_task_without_var_located_issues(tmp_path: Path) -> None:
    options = submitflags.SubmitOptions(plan_only=True, render_dir=tmp_path / "rendered")

    with pytest.raises(SpecError) as info:
        pipeline.submit(RAW, options, env={"NPA_HOME": str(tmp_path / "home")})

    assert info.value.issues
    assert all("MESSAGE" in i.message and i.line > 0 for i in info.value.issues)
    assert not (tmp_path / "rendered").exists()
