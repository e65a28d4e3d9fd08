"""``workflow list`` and plan-only runs through the CLI, against the simulator (issue 17).

``list`` reads the journal only (no ``sky`` call at all). Plan-only runs are
journaled as plans: listed as ``plan-only``, ``PLANNED`` to ``status`` too, a no-op
to ``cancel``, never active to the teardown gate.
"""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.journal.records import PlanRow
from npa_infra.journal.store import Journal
from npa_infra.projects import store
from npa_infra.projects.record import Project
from npa_infra.stack import gate
from tests.integration.runs.world import CONTEXT, ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"


def _npa(world: World, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app,
        ["workbench", "workflow", *args],
        obj=world.services(),
        env=world.env,
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


def _plan_only(world: World, run_id: str, *extra: str) -> None:
    code, stdout, stderr = _npa(
        world,
        "submit",
        str(MINIMAL),
        "--plan-only",
        "--run-id",
        run_id,
        "--render-dir",
        str(world.root / "rendered"),
        "--no-preflight-images",
        "--json",
        *extra,
    )
    assert code == 0, stderr
    assert json.loads(stdout)["status"] == "PLANNED"


# -- list ------------------------------------------------------------------------------


def test_list_shows_finished_active_and_plan_only_runs_newest_first_no_sky_call(
    world: World,
) -> None:
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "timeline", "statuses": ["SUCCEEDED"]}
    )
    done = world.submit(MINIMAL, run_id="ls-done")
    world.cancel("ls-done")  # verified terminal: the journal now says so
    active = world.submit(MINIMAL, run_id="ls-active")
    _plan_only(world, "ls-plan", "--infra", f"k8s/{CONTEXT}")
    calls = len(world.sim_calls())
    code, stdout, stderr = _npa(world, "list", "--json")
    assert code == 0, stderr
    assert len(world.sim_calls()) == calls  # the journal only
    payload = json.loads(stdout)
    assert set(payload) == {"status", "runs", "omitted", "source"}
    assert (payload["status"], payload["omitted"], payload["source"]) == ("ok", 0, "journal")
    rows = {r["run_id"]: r for r in payload["runs"]}
    assert [r["run_id"] for r in payload["runs"]] == ["ls-plan", "ls-active", "ls-done"]
    assert set(rows["ls-done"]) == {
        "run_id",
        "stack",
        "workflow",
        "mode",
        "status",
        "waves",
        "job_ids",
        "created_at",
        "updated_at",
        "age_seconds",
    }
    assert (rows["ls-done"]["mode"], rows["ls-done"]["job_ids"]) == ("one-shot", [done.job_id])
    assert rows["ls-done"]["status"] in ("SUBMITTED", "CANCELLED")
    assert (rows["ls-active"]["status"], rows["ls-active"]["job_ids"]) == (
        "SUBMITTED",
        [active.job_id],
    )
    plan = rows["ls-plan"]
    assert (plan["mode"], plan["status"], plan["waves"], plan["job_ids"]) == (
        "plan-only",
        "PLANNED",
        1,
        [],
    )
    assert all(r["age_seconds"] >= 0 for r in payload["runs"])
    code, stdout, _ = _npa(world, "list")
    lines = stdout.splitlines()
    assert lines[0].split() == [
        "RUN",
        "STACK",
        "WORKFLOW",
        "MODE",
        "STATUS",
        "WAVES",
        "JOB_IDS",
        "AGE",
    ]
    assert lines[1].split()[:6] == ["ls-plan", "-", "minimal", "plan-only", "PLANNED", "1"]


def test_list_scoped_by_stack_and_by_project(world: World) -> None:
    store.save(Project(alias="ctxproj", context=CONTEXT), world.env)
    world.submit(MINIMAL, run_id="sc-ctx", project="ctxproj")  # on context fake-a, no stack
    _plan_only(world, "sc-dev", "--stack", "dev")

    def listed(*args: str) -> list[str]:
        code, stdout, stderr = _npa(world, "list", "--json", *args)
        assert code == 0, stderr
        return [r["run_id"] for r in json.loads(stdout)["runs"]]

    assert listed() == ["sc-dev", "sc-ctx"]
    assert listed("-s", "dev") == ["sc-dev"]
    assert listed("--project", "ctxproj") == ["sc-ctx"]
    code, _, stderr = _npa(world, "list", "-p", "no-such-project")
    assert code == 1 and "Error: " in stderr


def test_two_projects_sharing_a_context_never_see_each_others_runs(world: World) -> None:
    """Issue 24 item 9: ``-p`` scopes by the project's own identity (the alias its runs
    were submitted under), not by the Kubernetes context both projects are bound to."""
    store.save(Project(alias="alpha", context=CONTEXT), world.env)
    store.save(Project(alias="beta", context=CONTEXT), world.env)
    world.submit(MINIMAL, run_id="a-live", project="alpha")
    world.submit(MINIMAL, run_id="b-live", project="beta")
    _plan_only(world, "b-plan", "-p", "beta")
    world.submit(MINIMAL, run_id="nobody")  # --infra alone: no project's run

    def listed(*args: str) -> list[str]:
        code, stdout, stderr = _npa(world, "list", "--json", *args)
        assert code == 0, stderr
        return sorted(r["run_id"] for r in json.loads(stdout)["runs"])

    assert listed("-p", "alpha") == ["a-live"]
    assert listed("-p", "beta") == ["b-live", "b-plan"]
    for run_id in ("b-live", "b-plan", "nobody"):
        code, stdout, _ = _npa(world, "status", run_id, "--cached", "-p", "alpha", "--json")
        payload = json.loads(stdout)
        assert (code, payload["status"]) == (1, "NOT_FOUND"), run_id
        assert "not of project alpha" in payload["detail"]
    code, stdout, _ = _npa(world, "status", "--all", "--cached", "-p", "alpha", "--json")
    assert [r["run_id"] for r in json.loads(stdout)["runs"]] == ["a-live"]
    code, stdout, _ = _npa(world, "cancel", "b-live", "-p", "alpha", "--json")
    assert json.loads(stdout)["status"] == "unknown_run"
    assert [j.get("cancel") for j in world.sim_jobs()] == [None, None, None]


def test_project_with_its_own_state_dir_admits_its_runs_journaled_without_an_alias(
    world: World,
) -> None:
    """A run journaled before runs recorded their project (or submitted with --infra into
    the project's own state directory) is the project's only by that directory."""
    world.submit(MINIMAL, run_id="old-run")
    own = Project(alias="owner", context=CONTEXT, state_dir=str(world.isolated.root))
    store.save(own, world.env)
    store.save(Project(alias="other", context=CONTEXT), world.env)

    def listed(*args: str) -> list[str]:
        code, stdout, stderr = _npa(world, "list", "--json", *args)
        assert code == 0, stderr
        return [r["run_id"] for r in json.loads(stdout)["runs"]]

    assert listed("-p", "owner") == ["old-run"]
    assert listed("-p", "other") == []


def test_list_all_shows_every_run_default_the_newest_50(world: World) -> None:
    with Journal.open(world.home) as journal:
        for i in range(52):
            at = 1_800_000_000.0 + i
            journal.record_plan(
                PlanRow(
                    run_id=f"old-{i:02d}",
                    stack=None,
                    workflow="wf",
                    mode="raw",
                    spec_path="x.yaml",
                    fingerprint="",
                    status="PLANNED",
                    created_at=at,
                    updated_at=at,
                )
            )
    code, stdout, stderr = _npa(world, "list", "--json")
    payload = json.loads(stdout)
    assert (code, len(payload["runs"]), payload["omitted"]) == (0, 50, 2)
    assert payload["runs"][0]["run_id"] == "old-51"
    code, stdout, stderr = _npa(world, "list")
    assert "2 older run(s) not shown: --all lists every run" in stderr
    code, stdout, _ = _npa(world, "list", "--all", "--json")
    everything = json.loads(stdout)
    assert (len(everything["runs"]), everything["omitted"]) == (52, 0)


def test_list_without_a_journal_is_empty_and_creates_nothing(world: World) -> None:
    code, stdout, _ = _npa(world, "list", "--json")
    assert (code, json.loads(stdout)) == (
        0,
        {"status": "ok", "runs": [], "omitted": 0, "source": "journal"},
    )
    assert not (world.home / "journal.sqlite3").exists()
    code, stdout, _ = _npa(world, "list")
    assert stdout == "no run in the journal\n"


# -- plan-only runs: status, cancel, the teardown gate -------------------------------------


def test_plan_only_run_is_found_by_status_cancel_is_a_no_op_gate_ignores_it(
    world: World,
) -> None:
    _plan_only(world, "po-1", "--infra", f"k8s/{CONTEXT}")
    world.faults({"command": "*", "action": "fail", "kind": "auth"})  # no sky call may happen
    code, stdout, _ = _npa(world, "status", "po-1", "--json")
    status: dict[str, Any] = json.loads(stdout)
    assert (status["status"], status["lifecycle_state"], status["sky_job_ids"]) == (
        "PLANNED",  # one status with list and submit --plan-only (runs.runview)
        "PLAN_ONLY",
        [],
    )
    assert code == 0  # issue 17: a proven answer, nothing failed (cli.md §1.5's 4 is gone)
    assert status["mode"] == "one-shot" and "--plan-only" in status["detail"]
    for _ in range(2):  # repeat-safe
        code, stdout, _ = _npa(world, "cancel", "po-1", "--json")
        assert (code, json.loads(stdout)["outcome"]) == (0, "not_submitted")
    assert world.sim_calls() == []
    with Journal.open(world.home) as journal:
        assert gate.decide(gate.observe(journal)).clear  # never an active run
        assert journal.events("po-1") == []  # the no-op cancel wrote nothing
    code, stdout, _ = _npa(world, "status", "--all", "--json")
    assert json.loads(stdout)["runs"] == []


def test_plan_only_then_live_submit_of_the_same_id_starts_the_run(world: World) -> None:
    _plan_only(world, "po-2", "--infra", f"k8s/{CONTEXT}")
    live = world.submit(MINIMAL, run_id="po-2")
    assert live.job_id is not None
    status = world.status("po-2")
    assert status.sky_job_ids == [live.job_id]
    _, stdout, _ = _npa(world, "list", "--json")
    [row] = json.loads(stdout)["runs"]
    assert (row["run_id"], row["mode"], row["job_ids"]) == ("po-2", "one-shot", [live.job_id])
    _plan_only(world, "po-2", "--infra", f"k8s/{CONTEXT}")  # a preview of a run records nothing
    with Journal.open(world.home) as journal:
        assert journal.get_plan("po-2") is not None  # the first plan, from before the run
        assert journal.get_run("po-2") is not None
