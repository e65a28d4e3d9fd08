"""Running the waves of a live submit, and supervising them in runtime mode.

One-shot: the run is one serial pipeline; it is done when its launch
transaction ends (submitted and reconciled, or adopted). Runtime: each wave
is launched, then polled (one ``sky jobs queue --all -v`` per tick for the
run) until its job is terminal; a failed wave fails the run; decision
artifacts route the next waves (``routing``). The outcome of every step is
journaled before the next one starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from npa_infra.errors import (
    InterruptedRunError,
    LaunchFailedError,
    NpaError,
    UncertainOutcomeError,
)
from npa_infra.runs.models import TransactionRecord
from npa_infra.skypilot.models import TERMINAL_STATUSES, JobStatus, QueueVerdict

if TYPE_CHECKING:
    from npa_infra.journal.store import Journal
    from npa_infra.plan.model import DecisionPoint
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.storage.base import ObjectStore
    from npa_infra.workflow.launcher import Clock, LaunchDriver
    from npa_infra.workflow.live import LiveRequest, LiveResult

__all__ = ["Launch", "PollPolicy", "run_waves"]

RETRY_PAUSE = 30.0  # runtime-reference.md §3: N+1 attempts, 30 s apart
_PAYLOAD_FAILURES = (JobStatus.FAILED, JobStatus.FAILED_SETUP)


class Launch(Protocol):
    """Launch (or re-enter) a wave; ``new_attempt`` starts the next immutable attempt."""

    def __call__(
        self, job: RenderedJob, wave_index: int, new_attempt: bool = False
    ) -> TransactionRecord: ...


_MAX_STATUS_ERRORS = 5  # the 6th consecutive unreadable poll fails the wave (§2)


@dataclass(frozen=True, slots=True)
class PollPolicy:
    interval: float = 30.0
    max_wait: float = 3600.0  # 0 = unbounded


def run_waves(
    request: LiveRequest,
    *,
    journal: Journal,
    driver: LaunchDriver,
    sky: SkyPilot,
    clock: Clock,
    store: Callable[[], ObjectStore],
    launch: Launch,
) -> LiveResult:
    """Launch every wave in order; one-shot stops after the launch, runtime waits for each."""
    from npa_infra.workflow import live

    records: list[TransactionRecord] = []
    job_ids: list[int] = []
    command = live.resume_command(request.invocation, request.run_id)
    try:
        if request.mode == "runtime" and request.replan is not None:
            return _run_routed(request, journal, sky, clock, store, launch, records, job_ids)
        return _run_listed(request, journal, sky, clock, launch, records, job_ids)
    except KeyboardInterrupt:
        error = InterruptedRunError(
            "interrupted while supervising; every launch so far is journaled",
            remedy=f"rerun: {command}",
        )
        return _finish(request, journal, clock, records, job_ids, error)


def _run_listed(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    launch: Launch,
    records: list[TransactionRecord],
    job_ids: list[int],
) -> LiveResult:
    """The rendered jobs in order (one-shot: one serial pipeline; no routing)."""
    from npa_infra.workflow import live

    command = live.resume_command(request.invocation, request.run_id)
    policy = PollPolicy(**dict(request.extra.get("poll") or {}))
    for index, job in enumerate(request.jobs):
        record = launch(job, index)
        records.append(record)
        error = live.outcome_error(record, command)
        if error is not None:
            return _finish(request, journal, clock, records, job_ids, error)
        assert record.job_id is not None  # SUBMITTED/ADOPTED always carry the reconciled id
        job_ids.append(record.job_id)
        if request.mode != "runtime":
            continue
        status = _wait_terminal(request, journal, sky, clock, index, record, policy)
        if status is not JobStatus.SUCCEEDED:
            failure: NpaError = LaunchFailedError(
                f"wave {index:02d} ({record.job_name}) ended {status.value if status else 'without a readable status'}",
                remedy=f"inspect: npa workbench workflow status {request.run_id}",
            )
            if status is None:
                failure = UncertainOutcomeError(
                    f"wave {index:02d} ({record.job_name}) status could not be read",
                    remedy=f"rerun: {command}",
                )
            return _finish(request, journal, clock, records, job_ids, failure)
    return _finish(request, journal, clock, records, job_ids, None)


def _run_routed(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    store: Callable[[], ObjectStore],
    launch: Launch,
    records: list[TransactionRecord],
    job_ids: list[int],
) -> LiveResult:
    """Runtime mode with decisions: run the plan prefix, read the decision, re-plan, go on.

    Decisions already read are kept in the run's journal data, so a resumed
    run re-plans to the same prefix and replays its succeeded waves instead of
    relaunching them (dsl.md §5.4, runtime-reference.md §3).
    """
    from npa_infra.workflow import live

    assert request.replan is not None
    run = journal.get_run(request.run_id)
    decided: dict[str, str] = dict((run.data if run else {}).get("decisions") or {})
    done: set[int] = set()
    command = live.resume_command(request.invocation, request.run_id)
    while True:
        routed = request.replan(decided)
        for position, job in enumerate(routed.jobs):
            index = job.wave if job.wave is not None else position
            if index in done:
                continue
            error = _run_wave(request, journal, sky, clock, launch, job, index, records, job_ids)
            if error is not None:
                return _finish(request, journal, clock, records, job_ids, error)
            done.add(index)
        if routed.pending is None:
            return _finish(request, journal, clock, records, job_ids, None)
        value, failure = _read_decision(store, routed.pending, command)
        if failure is not None:
            return _finish(request, journal, clock, records, job_ids, failure)
        decided[routed.pending.key] = value
        now = clock.now()
        journal.update_run(request.run_id, data={"decisions": decided}, now=now)
        journal.append_event(
            request.run_id,
            "decision",
            {**routed.pending.to_json(), "decision": value},
            now=now,
        )


def _run_wave(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    launch: Launch,
    job: RenderedJob,
    index: int,
    records: list[TransactionRecord],
    job_ids: list[int],
) -> NpaError | None:
    """Launch one wave and wait for it; a payload failure spends the ``--retries`` budget."""
    from npa_infra.workflow import live

    command = live.resume_command(request.invocation, request.run_id)
    policy = PollPolicy(**dict(request.extra.get("poll") or {}))
    retries_left = _retries_left(request, journal, index)
    new_attempt = False
    while True:
        record = launch(job, index, new_attempt)
        records.append(record)
        error = live.outcome_error(record, command)
        if error is not None:
            return error
        assert record.job_id is not None  # SUBMITTED/ADOPTED carry the reconciled id
        job_ids.append(record.job_id)
        status = _wait_terminal(request, journal, sky, clock, index, record, policy)
        if status in _PAYLOAD_FAILURES and retries_left > 0:
            retries_left -= 1
            now = clock.now()
            journal.update_wave(
                request.run_id, index, budgets={"retries_left": retries_left}, now=now
            )
            journal.append_event(
                request.run_id,
                "payload_retry",
                {
                    "wave": index,
                    "job_id": record.job_id,
                    "status": status.value if status else None,
                    "retries_left": retries_left,
                },
                now=now,
            )
            clock.sleep(RETRY_PAUSE)
            new_attempt = True
            continue
        return _wave_failure(request, index, record, command, status)


def _retries_left(request: LiveRequest, journal: Journal, index: int) -> int:
    """The wave's persisted payload budget, else ``--retries`` (never borrowed across waves)."""
    for wave in journal.waves(request.run_id):
        if wave.wave_index == index and "retries_left" in wave.budgets:
            return int(wave.budgets["retries_left"])
    return int(request.extra.get("retries") or 0)


def _wave_failure(
    request: LiveRequest,
    index: int,
    record: TransactionRecord,
    command: str,
    status: JobStatus | None,
) -> NpaError | None:
    if status is JobStatus.SUCCEEDED:
        return None
    if status is None:
        return UncertainOutcomeError(
            f"wave {index:02d} ({record.job_name}, job {record.job_id}) did not reach a terminal "
            "state: its status stayed unreadable, or --max-wait-seconds passed; the job was left "
            "running",
            remedy=f"check it with `npa workbench workflow status {request.run_id}`, then rerun: "
            f"{command}",
        )
    return LaunchFailedError(
        f"wave {index:02d} ({record.job_name}) ended {status.value}",
        remedy=f"inspect: npa workbench workflow status {request.run_id}",
    )


def _read_decision(
    store: Callable[[], ObjectStore], point: DecisionPoint, command: str
) -> tuple[str, NpaError | None]:
    """The decision artifact's value; a missing or malformed artifact fails closed (dsl.md §5.4)."""
    from npa_infra.errors import StorageError
    from npa_infra.plan import decisions
    from npa_infra.runs import artifacts
    from npa_infra.storage.models import S3Uri

    where = f"the decision of {point.state} (written by {point.writer_state})"
    if not point.uri:
        return "", LaunchFailedError(
            f"{where} has no decision URI to read",
            remedy="declare an output whose schema contains 'decision', or set config.decision_uri",
        )
    try:
        payload = store().read_bytes(S3Uri.parse(point.uri))
    except StorageError as exc:
        return "", UncertainOutcomeError(
            f"{where} could not be read from {point.uri}: {exc.message}",
            remedy=f"{exc.remedy}; then rerun: {command}",
        )
    except ValueError as exc:
        return "", LaunchFailedError(
            f"{where}: invalid URI {point.uri!r}: {exc}", remedy="fix the spec"
        )
    if payload is None:
        return "", LaunchFailedError(
            f"{where} is missing: no object at {point.uri}",
            remedy='the writer step must upload {"decision": "..."} there; inspect its logs',
        )
    read = artifacts.parse_decision(payload, uri=point.uri, normalize=decisions.normalize)
    if read.error is not None or read.decision is None:
        return "", LaunchFailedError(
            f"{where} is malformed: {read.error}",
            remedy='the artifact must be a JSON object like {"decision": "promote_checkpoint"}',
        )
    return read.decision, None


def _wait_terminal(
    request: LiveRequest,
    journal: Journal,
    sky: SkyPilot,
    clock: Clock,
    wave_index: int,
    record: TransactionRecord,
    policy: PollPolicy,
) -> JobStatus | None:
    """Poll until the wave's job is terminal; None after too many unreadable polls or max-wait."""
    assert record.job_id is not None
    started = clock.now()
    errors = 0
    last: JobStatus | None = None
    while True:
        queue = sky.queue(verbose=True)
        now = clock.now()
        if queue.verdict is QueueVerdict.RECORDS:
            errors = 0
            status = queue.status_of(record.job_id)
            if status is None:
                status = JobStatus.FAILED_CONTROLLER  # missing from a good queue (§1 npa must)
            if status is not last:
                journal.update_attempt(
                    request.run_id,
                    wave_index,
                    _attempt_of(journal, request.run_id, wave_index),
                    sky_status=status.value,
                    now=now,
                )
                journal.append_event(
                    request.run_id,
                    "job_status",
                    {"wave": wave_index, "job_id": record.job_id, "status": status.value},
                    now=now,
                )
                last = status
            if status in TERMINAL_STATUSES:
                return status
        else:
            errors += 1
            if errors > _MAX_STATUS_ERRORS:
                return None
        if policy.max_wait and now - started >= policy.max_wait:
            journal.append_event(
                request.run_id,
                "wave_timeout",
                {"wave": wave_index, "job_id": record.job_id, "waited_s": now - started},
                now=now,
            )
            return None
        clock.sleep(policy.interval)


def _attempt_of(journal: Journal, run_id: str, wave_index: int) -> int:
    latest = journal.latest_attempt(run_id, wave_index)
    return latest.attempt if latest is not None else 1


def _finish(
    request: LiveRequest,
    journal: Journal,
    clock: Clock,
    records: list[TransactionRecord],
    job_ids: list[int],
    error: NpaError | None,
) -> LiveResult:
    from npa_infra.workflow.live import LiveResult

    if error is None:
        status = "SUCCEEDED" if request.mode == "runtime" else "SUBMITTED"
        lifecycle = "committed"
    elif isinstance(error, UncertainOutcomeError) or error.exit_code == 130:
        status, lifecycle = "RECOVERY_REQUIRED", "recovery-required"
    elif records and records[-1].launch_sequence == 0 and len(records) == 1:
        status, lifecycle = "ROLLED_BACK", "rolled-back"
    else:
        status, lifecycle = "FAILED", "committed"
    now = clock.now()
    journal.update_run(
        request.run_id,
        status=status,
        lifecycle_state=lifecycle,
        data={"sky_job_ids": job_ids},
        now=now,
    )
    journal.append_event(
        request.run_id,
        "outcome",
        {"status": status, "error": error.message if error else None},
        now=now,
    )
    return LiveResult(
        run_id=request.run_id,
        workflow=request.workflow,
        mode=request.mode,
        status=status,
        job_id=job_ids[-1] if job_ids else None,
        job_ids=job_ids,
        submitted_yaml_path=None,
        transactions=[r.to_json() for r in records],
        error=error,
        exit_code=error.exit_code if error else 0,
    )
