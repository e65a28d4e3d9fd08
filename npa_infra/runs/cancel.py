"""What may be concluded about a launch whose job id was never reconciled.

Asked by ``workflow cancel``, and by a submit that finds another npa home's
launch of the same run in flight in the shared SkyPilot state.

Cancel holds the run's launch lock, so no live submit is inside this launch;
but a crashed one may have left a launch child or an API request that can
still create the job. Only when neither can act any more does an exact-name
absence prove that the launch left nothing (faults.md invariant 4: unknown is
not absent). A cancel never reports success while a job of the run can still
appear.
"""

from __future__ import annotations

from enum import StrEnum

from npa_infra.runs.children import ChildState
from npa_infra.runs.models import Existence, ReconciliationState, RequestState, TransactionRecord

__all__ = ["LaunchVerdict", "judge_unreconciled"]


class LaunchVerdict(StrEnum):
    CANCEL_FOUND = "cancel_found"  # the name resolves to one job: cancel that id
    ABSENT = "absent"  # nothing can appear any more
    IN_FLIGHT = "in_flight"  # a child or request may still create the job
    UNKNOWN = "unknown"  # the queue could not answer for the name


def judge_unreconciled(
    record: TransactionRecord | None,
    name: ReconciliationState,
    child: ChildState,
    request: RequestState | None,
) -> LaunchVerdict:
    """The verdict for one launched transaction without an id; ``request`` None = not read.

    ``record`` None: only another npa home's in-flight record is known (journal.inflight).
    """
    if name is ReconciliationState.FOUND:
        return LaunchVerdict.CANCEL_FOUND
    if name is not ReconciliationState.ABSENT:  # unavailable, ambiguous
        return LaunchVerdict.UNKNOWN
    if child in (ChildState.ALIVE, ChildState.UNKNOWN):  # runs.children: it may still act
        return LaunchVerdict.IN_FLIGHT
    if (
        record is not None
        and record.done
        and record.existence is Existence.ABSENT
        and record.request_settled
    ):
        return LaunchVerdict.ABSENT  # the transaction itself proved it, with its request settled
    if request is None or request in (
        RequestState.PENDING,
        RequestState.RUNNING,
        RequestState.UNKNOWN,
    ):
        return LaunchVerdict.IN_FLIGHT
    if request is RequestState.SUCCEEDED:  # the request made a job the queue does not show yet
        return LaunchVerdict.IN_FLIGHT
    return LaunchVerdict.ABSENT  # FAILED, CANCELLED, or no launch request active
