"""Every external mutation npa makes, as data: what it journals before, what after, what proves it.

faults.md invariant 5: intent before every external mutation, outcome after
it, so a crash between any two lines leaves a state a resume completes or
refuses precisely. This table is the list of those mutations. For each one it
names the durable record written before the call, the record written after
it, and the crash-and-resume test that kills a real process at that boundary.
A guard test (tests/unit/runs/test_mutations.py) holds the table to the code:
each record name must be written by the code, and each named test must exist.
A boundary whose ``intent`` is None is a known gap, listed so that it stays
visible until it is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["BOUNDARIES", "Boundary", "Mutation", "gaps"]


class Mutation(StrEnum):
    LAUNCH = "sky jobs launch"
    OPERATOR_CANCEL = "sky jobs cancel (workflow cancel)"
    SUPERVISOR_CANCEL = "sky jobs cancel (recovery or permanent blocker)"
    CONTROLLER_DOWN = "sky down (jobs controller)"
    PROBE_POD_CREATE = "create pull-probe pod"
    PROBE_POD_DELETE = "delete pull-probe pod"
    S3_SOURCE_STAGING = "S3 writes of source staging (objects, then the marker)"
    PULUMI_UP = "pulumi up"
    PULUMI_DESTROY = "pulumi destroy"


@dataclass(frozen=True, slots=True)
class Boundary:
    mutation: Mutation
    intent: str | None  # the journal record written (durably) before the call
    outcome: str | None  # the journal record written after it
    crash_test: str | None  # ``path::test`` that kills a real process at this boundary
    note: str = ""


BOUNDARIES: tuple[Boundary, ...] = (
    Boundary(
        Mutation.LAUNCH,
        intent="outcome_pending",  # the transaction checkpoint with the new launch_sequence
        outcome="request_ids",  # the checkpoint with the request id (or the error)
        crash_test="tests/integration/runs/test_crash_matrix.py::"
        "test_crash_after_every_journal_step_resume_keeps_one_job_per_attempt",
        note="the gated child's identity (launch_child) is durable before it may act; "
        "tests/integration/runs/test_live_children.py kills npa with the child alive",
    ),
    Boundary(
        Mutation.OPERATOR_CANCEL,
        intent="cancel_requested",  # run data, then the event naming the exact ids
        outcome="cancel",
        crash_test="tests/integration/runs/test_status_cancel.py::"
        "test_cancel_killed_after_its_intent_then_rerun_cancels_once",
    ),
    Boundary(
        Mutation.SUPERVISOR_CANCEL,
        intent="cancel_intent",
        outcome="cancel_outcome",
        crash_test="tests/integration/runs/test_recovery_cancel_crash.py::"
        "test_crash_right_after_recovery_cancel_resume_continues_the_recovery",
    ),
    Boundary(
        Mutation.S3_SOURCE_STAGING,
        intent="source",  # the planned source action, in the run's data, before staging
        outcome="source_staging",
        crash_test="tests/integration/runs/test_source_staging.py::"
        "test_live_submit_killed_while_staging_then_resume_stages_and_launches_once",
        note="the marker is written last, so an interrupted upload is re-staged",
    ),
    Boundary(
        Mutation.CONTROLLER_DOWN,
        intent="begin_controller_down",  # journal.inflight: <state>/npa-locks/controller-down.json
        outcome="end_controller_down",  # cleared on a definite answer; launches refuse meanwhile
        crash_test="tests/integration/stack/test_controller.py::"
        "test_delete_killed_during_sky_down_blocks_launches_until_rerun_finishes",
        note="one journaled down for both teardown paths (stack.controllerdown); "
        "cleanup-controller's own: tests/integration/stack/test_controller_gate.py::"
        "test_cleanup_killed_during_sky_down_then_rerun_finishes",
    ),
    Boundary(
        Mutation.PROBE_POD_CREATE,
        intent="intend",  # preflight.probe_ledger: the pod's record, before the create
        outcome="created",  # ... with the UID the API server answered
        crash_test="tests/integration/preflight/test_probe_ledger.py::"
        "test_probe_killed_with_its_pod_alive_next_run_deletes_it",
    ),
    Boundary(
        Mutation.PROBE_POD_DELETE,
        intent="created",  # the record holds the UID the delete is preconditioned on
        outcome="removed",  # dropped only once the deletion is verified
        crash_test="tests/integration/preflight/test_probe_ledger.py::"
        "test_probe_killed_with_its_pod_alive_next_run_deletes_it",
    ),
    Boundary(
        Mutation.PULUMI_UP,
        intent="npa-operations",  # stack.runner: <PULUMI_HOME>/npa-operations/<stack>/<pid>.json
        outcome="npa-operations",  # removed once the engine answered; its checkpoint is the rest
        crash_test="tests/unit/stack/test_runner.py::"
        "test_engine_mutation_killed_then_next_one_refreshes_first",
        note="a leftover record makes the next up/destroy refresh first",
    ),
    Boundary(
        Mutation.PULUMI_DESTROY,
        intent="npa-operations",
        outcome="npa-operations",
        crash_test="tests/unit/stack/test_runner.py::"
        "test_engine_mutation_killed_then_next_one_refreshes_first",
    ),
)


def gaps() -> tuple[Mutation, ...]:
    """The mutations that do not yet journal intent and outcome with a crash test."""
    return tuple(
        b.mutation
        for b in BOUNDARIES
        if b.intent is None or b.outcome is None or b.crash_test is None
    )
