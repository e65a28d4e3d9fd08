"""When a succeeded wave counts as complete: its declared outputs validate (runtime-reference.md §2).

"Completed waves require validated declared outputs": after SUCCEEDED, every
output the wave's steps declare must exist and be non-empty (a key with
ContentLength > 0, a ``/``-ending prefix with an object of Size > 0). Each
probe is journaled on the attempt with the output's ``schema`` label when
the spec declares one, and one ``outputs_validated`` event records the
verdict. A missing or empty output fails the wave; a store that cannot
answer leaves the outcome uncertain (the run is resumable), never complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from npa_infra.errors import LaunchFailedError, NpaError, UncertainOutcomeError

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.storage.base import ObjectStore

__all__ = ["validate_outputs"]

_RESUME = "rerun the same command with --resume-run once the bucket is readable"


def validate_outputs(
    *,
    journal: Journal,
    run_id: str,
    wave_index: int,
    attempt: int,
    what: str,
    uris: Sequence[str],
    schemas: Mapping[str, str],
    store: Callable[[], ObjectStore],
    now: Callable[[], float],
) -> NpaError | None:
    """None when the wave counts as complete; otherwise why not. ``what`` names the wave."""
    if not uris:
        journal.update_wave(run_id, wave_index, status="succeeded", now=now())
        return None
    from npa_infra.errors import StorageError
    from npa_infra.storage.models import ProbeState
    from npa_infra.workflow.execution import recovery

    try:
        probes = recovery.probe_outputs(store, uris)
    except (StorageError, ValueError) as exc:
        _record(journal, run_id, wave_index, attempt, [], "indeterminate", str(exc), now())
        return UncertainOutcomeError(
            f"{what} succeeded, but its outputs could not be checked: {exc}", remedy=_RESUME
        )
    found: list[dict[str, Any]] = [
        {
            "uri": uri,
            "state": probe.state.value,
            "size": probe.size,
            **({"schema": schemas[uri]} if schemas.get(uri) else {}),
        }
        for uri, probe in probes
    ]
    missing = [f for f in found if f["state"] != ProbeState.PRESENT.value]
    if not missing:
        _record(journal, run_id, wave_index, attempt, found, "valid", "", now())
        return None
    first = missing[0]
    if first["state"] == ProbeState.UNAVAILABLE.value:
        _record(journal, run_id, wave_index, attempt, found, "indeterminate", first["uri"], now())
        return UncertainOutcomeError(
            f"{what} succeeded, but {first['uri']} could not be read", remedy=_RESUME
        )
    _record(journal, run_id, wave_index, attempt, found, "invalid", first["uri"], now())
    return LaunchFailedError(
        f"{what} succeeded but its declared output {first['uri']} "
        f"is {first['state']}: the wave does not count as complete",
        remedy="inspect the step's logs: it must write every declared output",
    )


def _record(
    journal: Journal,
    run_id: str,
    wave_index: int,
    attempt: int,
    found: list[dict[str, Any]],
    verdict: str,
    detail: str,
    at: float,
) -> None:
    """The probes on the attempt, the verdict as an event, and the wave's status."""
    if found:
        journal.update_attempt(run_id, wave_index, attempt, data={"outputs": found}, now=at)
    journal.append_event(
        run_id,
        "outputs_validated",
        {
            "wave": wave_index,
            "attempt": attempt,
            "verdict": verdict,
            "detail": detail,
            "outputs": found,
        },
        now=at,
    )
    status = {"valid": "succeeded", "invalid": "failed"}.get(verdict)
    if status is not None:
        journal.update_wave(run_id, wave_index, status=status, now=at)
