"""The lifecycle of a run: the one status vocabulary of the journal, status and the gates.

``RunStatus`` values are exactly the strings ``runs.status`` holds in the
journal (and ``--json`` shows), so a member compares equal to the stored
text. ``LAUNCHING`` while a launch is open; ``SUBMITTED`` when a one-shot
run's job is launched and reconciled (npa does not watch it); ``SUCCEEDED``
when a runtime run's every planned job ended validated (``runs.outcome``);
``FAILED`` on a proven failure; ``RECOVERY_REQUIRED`` when the outcome is not
proven and ``--resume-run`` continues it; ``ROLLED_BACK`` when nothing was
launched, so the identical command may run again; ``CANCELLED`` after a
verified cancel. ``PLANNED`` is what ``--plan-only`` reports; it is journaled
only as a plan (the journal's ``plans`` table, issue 17), never as the status of
a row of ``runs``, so no gate, ``status --all`` or cleanup that reads runs ever
counts a plan as active.
"""

from __future__ import annotations

from enum import StrEnum

from npa_infra.errors import InvariantError

__all__ = ["SETTLED", "RunStatus", "lifecycle_state"]


class RunStatus(StrEnum):
    PLANNED = "PLANNED"
    LAUNCHING = "LAUNCHING"
    SUBMITTED = "SUBMITTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    RECOVERY_REQUIRED = "RECOVERY_REQUIRED"
    ROLLED_BACK = "ROLLED_BACK"


# a journaled status after which no job of the run can still be live (cli.md §2.4)
SETTLED = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.ROLLED_BACK}
)

_LIFECYCLE = {
    RunStatus.SUBMITTED: "committed",
    RunStatus.SUCCEEDED: "committed",
    RunStatus.FAILED: "committed",
    RunStatus.CANCELLED: "committed",  # the operator's cancel, not a failure
    RunStatus.RECOVERY_REQUIRED: "recovery-required",
    RunStatus.ROLLED_BACK: "rolled-back",
}


def lifecycle_state(status: RunStatus) -> str:
    """The journal's ``lifecycle_state`` for a finished run's status.

    Raises:
        InvariantError: ``status`` is not one a finished supervision writes.
    """
    found = _LIFECYCLE.get(status)
    if found is None:
        raise InvariantError(f"run status {status} does not end a supervision")
    return found
