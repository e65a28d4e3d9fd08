"""One-shot live submits against the simulator and the Kubernetes double."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from npa_infra.errors import RunStateError, UncertainOutcomeError
from npa_infra.skypilot.isolation import ControllerSettings
from tests.integration.runs.world import ROOT, World

MINIMAL = ROOT / "workflows/testing/minimal.yaml"


def test_submit_one_shot_clean_launch_is_submitted_and_reconciled(world: World) -> None:
    result = world.submit(MINIMAL, run_id="min-run-1")
    assert result.exit_code == 0, result.to_json()
    assert result.status == "SUBMITTED"
    tx = result.transactions[-1]
    assert tx["state"] == "submitted"
    assert tx["recovery_decision"] == "submitted_and_reconciled"
    assert tx["launch_sequence"] == 1
    jobs = world.jobs_named(tx["job_name"])
    assert len(jobs) == 1
    assert result.job_id == jobs[0]["job_id"]


def _launches(world: World) -> int:
    return sum(1 for _ in world.sim_jobs())


def test_submit_transient_first_launch_recovers_at_sequence_2_in_same_command(world: World) -> None:
    # runtime-reference.md §15 "Live": the first POST fails, then the run reaches
    # sequence 2 with kubernetes_transport, >= 2 absent reconciliations, a final
    # found, and >= 3 readiness samples.
    world.faults({"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "transport"})
    result = world.submit(MINIMAL, run_id="transient-1")
    tx = result.transactions[-1]
    assert result.exit_code == 0, tx
    assert tx["state"] == "submitted"
    assert tx["launch_sequence"] == 2
    assert tx["category"] == "kubernetes_transport"
    states = [r["state"] for r in tx["reconciliations"]]
    assert states.count("absent") >= 2 and states[-1] == "found"
    samples = sum(len(r.get("samples", [])) for r in tx["readiness"])
    assert samples >= 3
    assert _launches(world) == 1
    assert any(d > 0 for d in world.clock.slept)  # a backoff happened, on the virtual clock


def test_submit_accepted_then_transport_error_adopts_the_one_job(world: World) -> None:
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "accept_then_fail", "kind": "transport"}
    )
    result = world.submit(MINIMAL, run_id="adopt-1")
    tx = result.transactions[-1]
    assert result.exit_code == 0, tx
    assert (tx["state"], tx["recovery_decision"]) == ("adopted", "adopt_after_uncertain_launch")
    assert tx["launch_sequence"] == 1
    assert _launches(world) == 1


def test_submit_auth_refusal_sent_then_absent_is_recovery_required_never_failed(
    world: World,
) -> None:
    # the operator guide: any failure after a launch may have been issued remains
    # recovery-required; one absent read is not proof that no job exists
    world.faults({"command": "jobs.launch", "action": "fail", "kind": "auth"})
    result = world.submit(MINIMAL, run_id="auth-1")
    tx = result.transactions[-1]
    assert (result.exit_code, result.status) == (2, "RECOVERY_REQUIRED")
    assert (tx["state"], tx["recovery_decision"]) == (
        "terminal_failure",
        "verified_absent_no_retry",
    )
    assert tx["category"] == "auth"
    assert tx["launch_sequence"] == 1
    assert result.error is not None and "--resume-run auth-1" in result.error.remedy
    assert _launches(world) == 0
    assert world.status("auth-1").status == "RECOVERY_REQUIRED"
    # the resume looks the name up again; after a terminal failure it never relaunches
    launches = [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]
    again = world.submit(MINIMAL, resume_run="auth-1")
    assert (again.exit_code, again.status) == (2, "RECOVERY_REQUIRED")
    assert [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]] == launches
    assert again.transactions[-1]["reconciliations"][-1]["state"] == "absent"


def test_submit_terminal_failure_resume_adopts_a_job_that_appeared(world: World) -> None:
    world.faults({"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "rbac"})
    first = world.submit(MINIMAL, run_id="late-1")
    assert (first.exit_code, first.status) == (2, "RECOVERY_REQUIRED")
    name = first.transactions[-1]["job_name"]
    sent = world.isolated.root / "submissions" / "late-1" / f"{name}.yaml"
    _launch_out_of_band(world, name, sent)  # the job the failed launch "did not" create shows up
    resumed = world.submit(MINIMAL, resume_run="late-1")
    assert resumed.exit_code == 0, resumed.to_json()
    assert resumed.transactions[-1]["state"] == "adopted"
    assert resumed.job_id == world.jobs_named(name)[0]["job_id"]


def test_submit_unreadable_first_queue_is_a_no_op_rollback_that_blocks_nothing(
    world: World,
) -> None:
    world.faults({"command": "jobs.queue", "nth": 1, "action": "fail", "kind": "unknown"})
    first = world.submit(MINIMAL, run_id="rollback-1")
    assert first.exit_code == 1
    assert first.status == "ROLLED_BACK"
    assert first.transactions[-1]["launch_sequence"] == 0
    assert _launches(world) == 0
    again = world.submit(MINIMAL, run_id="rollback-1")  # the same command, no --resume-run
    assert again.exit_code == 0, again.to_json()
    assert _launches(world) == 1


def _launch_out_of_band(world: World, name: str, task: Path | None = None) -> None:
    """Another client launches a job with ``name`` under the same controller identity: of
    ``task`` (an attempt's own file, carrying its launch identity) or of a task of its own."""
    if task is None:
        task = world.root / "other.yaml"
        task.write_text("name: x\nrun: echo\n", encoding="utf-8")
    world.isolated.prepare(world.env, context="fake-a", controller=ControllerSettings())
    subprocess.run(
        [str(world.sky_bin), "jobs", "launch", "--name", name, "--yes", "--detach-run", str(task)],
        env=world.isolated.environment(world.env),
        check=True,
        capture_output=True,
    )


def test_submit_two_jobs_already_named_like_the_run_is_ambiguous_and_launches_nothing(
    world: World,
) -> None:
    _launch_out_of_band(world, "dup-1")
    _launch_out_of_band(world, "dup-1")
    result = world.submit(MINIMAL, run_id="dup-1")
    tx = result.transactions[-1]
    assert result.exit_code == 1  # nothing was sent: a no-op rollback
    assert (tx["state"], tx["recovery_decision"]) == ("indeterminate", "block_indeterminate")
    assert tx["reconciliations"][-1]["state"] == "ambiguous"
    assert tx["launch_sequence"] == 0
    assert len(world.jobs_named("dup-1")) == 2


def test_submit_one_job_already_named_like_the_run_is_not_adopted_nor_relaunched(
    world: World,
) -> None:
    """A name is no proof of ownership (issue 24): another client's job holding the run's
    name carries no npa launch identity, so it is neither adopted nor launched beside
    (tests/integration/runs/test_job_identity.py has the foreign and the own-launch cases)."""
    _launch_out_of_band(world, "same-1")
    result = world.submit(MINIMAL, run_id="same-1")
    tx = result.transactions[-1]
    assert result.exit_code == 1
    assert (tx["state"], tx["recovery_decision"]) == ("indeterminate", "block_indeterminate")
    assert tx["reconciliations"][-1]["state"] == "unproven"
    assert len(world.jobs_named("same-1")) == 1


def test_submit_delayed_appearance_waits_for_the_request_then_reconciles(world: World) -> None:
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "delay_appearance", "queue_calls": 3}
    )
    result = world.submit(MINIMAL, run_id="delay-1")
    tx = result.transactions[-1]
    assert result.exit_code == 0, tx
    assert tx["state"] == "submitted"
    assert tx["launch_sequence"] == 1
    assert _launches(world) == 1


def test_resume_with_changed_plan_is_refused(world: World) -> None:
    assert world.submit(MINIMAL, run_id="fp-1").exit_code == 0
    with pytest.raises(RunStateError, match="different plan"):
        world.submit(MINIMAL, resume_run="fp-1", variables={"bucket": "other-bucket"})


def test_resume_of_unknown_run_is_refused(world: World) -> None:
    with pytest.raises(RunStateError, match="unknown run"):
        world.submit(MINIMAL, resume_run="never-1")


def test_submit_existing_run_id_without_resume_is_refused_with_the_resume_command(
    world: World,
) -> None:
    assert world.submit(MINIMAL, run_id="twice-1").exit_code == 0
    with pytest.raises(RunStateError, match="already exists") as info:
        world.submit(MINIMAL, run_id="twice-1")
    assert "--resume-run twice-1" in info.value.remedy
    assert _launches(world) == 1


def test_submit_async_request_failed_transiently_is_retried_after_it_settles(world: World) -> None:
    world.faults({"command": "jobs.launch", "nth": 1, "action": "request_fails", "kind": "server"})
    result = world.submit(MINIMAL, run_id="reqfail-1")
    tx = result.transactions[-1]
    assert result.exit_code == 0, tx
    assert tx["state"] == "submitted"
    assert tx["launch_sequence"] == 2
    assert tx["category"] == "kubernetes_server"
    assert len(tx["request_ids"]) == 2
    assert any(c[:2] == ["api", "logs"] for c in world.sim_calls())
    assert _launches(world) == 1


def test_submit_async_request_failed_on_auth_is_recovery_required(world: World) -> None:
    world.faults({"command": "jobs.launch", "nth": 1, "action": "request_fails", "kind": "rbac"})
    result = world.submit(MINIMAL, run_id="reqfail-2")
    tx = result.transactions[-1]
    assert (result.exit_code, result.status) == (2, "RECOVERY_REQUIRED")
    assert (tx["state"], tx["recovery_decision"]) == (
        "terminal_failure",
        "verified_absent_no_retry",
    )
    assert tx["category"] == "rbac"
    assert _launches(world) == 0


def test_ctrl_c_during_backoff_is_exit_130_then_resume_launches_once(world: World) -> None:
    world.faults({"command": "jobs.launch", "nth": 1, "action": "fail", "kind": "transport"})
    original = world.clock.sleep
    calls = {"n": 0}

    def interrupting_sleep(seconds: float) -> None:
        calls["n"] += 1
        if seconds > 0 and calls["n"] > 3:  # past the readiness samples: the retry backoff
            world.clock.sleep = original  # type: ignore[method-assign]  # one interrupt only
            raise KeyboardInterrupt
        original(seconds)

    world.clock.sleep = interrupting_sleep  # type: ignore[method-assign]  # Ctrl-C stand-in
    result = world.submit(MINIMAL, run_id="ctrlc-1")
    tx = result.transactions[-1]
    assert result.exit_code == 130, tx
    assert result.status == "RECOVERY_REQUIRED"
    assert (tx["state"], tx["recovery_decision"]) == ("interrupted", "interrupted_verified_absent")
    assert "--resume-run ctrlc-1" in tx["operator_remedy"]
    assert _launches(world) == 0
    resumed = world.submit(MINIMAL, resume_run="ctrlc-1")
    assert resumed.exit_code == 0, resumed.to_json()
    assert _launches(world) == 1


def test_journal_keeps_secret_names_and_fingerprint_never_values(world: World) -> None:
    from npa_infra.journal.store import Journal

    world.env["NPA_FP_TOKEN"] = "fp-value-1234"
    assert world.submit(MINIMAL, run_id="fp-2", secret_env=["NPA_FP_TOKEN"]).exit_code == 0
    journal = Journal.open(world.home)
    try:
        run = journal.get_run("fp-2")
        attempt = journal.attempts("fp-2")[0]
    finally:
        journal.close()
    assert run is not None
    for data in (run.data, attempt.data):
        assert data["secret_names"] == ["NPA_FP_TOKEN"]
        assert len(data["secret_fingerprint"]) == 16
        assert data["values_persisted"] is False


def test_resume_of_a_submitted_run_verifies_the_exact_name_still_maps_to_its_id(
    world: World,
) -> None:
    first = world.submit(MINIMAL, run_id="verify-1")
    assert first.exit_code == 0
    _launch_out_of_band(world, "verify-1")  # a second job now carries the run's exact name
    with pytest.raises(UncertainOutcomeError, match="cannot verify"):
        world.submit(MINIMAL, resume_run="verify-1")
    assert len(world.jobs_named("verify-1")) == 2  # nothing launched, nothing guessed
