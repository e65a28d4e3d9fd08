"""One wave attempt of a live submit: its journal rows, its task file, its launch transaction.

``launch_wave`` re-enters the wave's latest attempt or creates the next one.
An attempt is immutable once created (runtime-reference.md §3): its
``-aN`` job name, its logical launch id (over stack, run, wave, attempt and
the planned YAML's digest) and its resume variables are journaled before
its first launch request, so a crash anywhere re-enters the same attempt,
under the name it was journaled with (an npa that names it otherwise launches
nothing). Every task file stamps the logical launch id (``taskfiles``), so a
lookup adopts only this launch's job (``runs.ownership``). A stored adopted id
is re-verified by exact name before it is trusted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import RunCancelledError, RunStateError, UncertainOutcomeError
from npa_infra.runs import codec, ownership, transaction
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.runs.models import LaunchState, ReconciliationState, TransactionRecord
from npa_infra.workflow.execution import taskfiles
from npa_infra.workflow.execution.launcher import AttemptKey, LaunchDriver
from npa_infra.workflow.target.services import Clock

if TYPE_CHECKING:
    from npa_infra.journal.lock import RunLock
    from npa_infra.journal.records import AttemptRow
    from npa_infra.journal.store import Journal
    from npa_infra.render.documents import RenderedJob
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.workflow.execution.liverun import LiveRequest

__all__ = ["SUCCESS_STATES", "attempt_name", "launch_wave", "logical_launch_id", "secret_record"]

SUCCESS_STATES = (LaunchState.SUBMITTED, LaunchState.ADOPTED)
# A cancel holds the launch lock while it polls its jobs to terminal (at most 900 s).
LAUNCH_LOCK_WAIT = 1200.0


def logical_launch_id(*parts: str) -> str:
    """``npa-launch-`` + 32 hex of sha256 over the NUL-joined parts (§1 Identity)."""
    return "npa-launch-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def secret_record(names: Sequence[str], secrets: Mapping[str, str]) -> dict[str, object]:
    """Names and a fingerprint of the values (runtime-reference.md §2), never the values."""
    from npa_infra.journal import guard

    return {
        "secret_names": list(names),
        "secret_fingerprint": guard.fingerprint(dict(secrets)) if secrets else None,
        "values_persisted": False,
    }


def launch_wave(
    request: LiveRequest,
    journal: Journal,
    driver: LaunchDriver,
    sky: SkyPilot,
    clock: Clock,
    isolated: IsolatedDir,
    job: RenderedJob,
    wave_index: int,
    *,
    infra: str,
    secrets: Mapping[str, str],
    command: str,
    new_attempt: bool = False,
    exports: Mapping[str, Mapping[str, str]] | None = None,
) -> TransactionRecord:
    """One wave: re-enter its latest attempt, or start attempt 1 (or the next, for a retry).

    A retry is a new immutable attempt: a new ``-aN`` name and a new logical
    launch id (runtime-reference.md §3), so it can never be confused with the
    attempt it replaces. ``exports`` (per task name) are the new attempt's resume
    variables; they are journaled with the attempt, so re-entering it (``--resume-run``)
    sends the same ones.
    """
    from npa_infra.journal.records import AttemptRow, WaveRow

    latest = journal.latest_attempt(request.run_id, wave_index)
    number = latest.attempt if latest is not None else 1
    if new_attempt and latest is not None:
        number = latest.attempt + 1
    creating = latest is None or number != latest.attempt
    variables: Mapping[str, Mapping[str, str]] = (
        dict(exports or {}) if creating else taskfiles.journaled_exports(latest)
    )
    name = attempt_name(job.job_name, number)
    yaml_digest = hashlib.sha256(job.text.encode()).hexdigest()
    wave_part = "single-wave" if request.mode != "runtime" else f"wave-{wave_index:03d}"
    lid = logical_launch_id(
        request.stack_name or "default", request.run_id, wave_part, f"attempt-{number}", yaml_digest
    )
    if not creating:
        _refuse_renamed(request.run_id, latest, name)
    path = taskfiles.write(
        isolated, request.run_id, name, taskfiles.attempt_text(job, number, 1, variables, lid)
    )
    key = AttemptKey(request.run_id, wave_index, number)
    now = clock.now()
    if creating:
        if journal.wave(request.run_id, wave_index) is None:
            journal.upsert_wave(
                WaveRow(
                    run_id=request.run_id,
                    wave_index=wave_index,
                    key=f"{wave_index:03d}|{job.execution}|{job.job_name}",
                    name=job.job_name,
                    kind=job.execution,
                    states=[str(d.get("name")) for d in job.documents if "execution" not in d],
                    status="pending",
                    updated_at=now,
                )
            )
        journal.create_attempt(
            AttemptRow(
                run_id=request.run_id,
                wave_index=wave_index,
                attempt=number,
                job_name=name,
                logical_launch_id=lid,
                created_at=now,
                status="pending",
                job_id=None,
                sky_status=None,
                data={
                    "yaml_sha256": yaml_digest,
                    "task_yaml": str(path),
                    **secret_record(request.secret_names, secrets),
                    **(
                        {"exports": {k: dict(v) for k, v in variables.items()}} if variables else {}
                    ),
                },
                updated_at=now,
            )
        )
    stored = journal.transaction(lid)
    if stored is None:
        record = transaction.begin(
            logical_launch_id=lid, job_name=name, context=infra.removeprefix("k8s/"), now=now
        )
        driver.checkpoint(key, record)
    else:
        record = codec.record_from_json(stored.record)
        if record.state in SUCCESS_STATES:
            _verify_adopted(record, sky, clock, journal, key)
            return record
        record = _reenter(record, clock)
    lock, foreign = _launch_lock(
        request, journal, isolated, clock, driver.progress, sky, driver.home
    )
    # issue 19: the lookup before the launch may take a shared answer read inside the
    # run's lock, unless another home's launch settled since (it may postdate that answer)
    since = None if foreign else driver.held_since
    try:
        return _drive(
            request,
            journal,
            driver,
            clock,
            isolated,
            job,
            key,
            record,
            path,
            name,
            number,
            variables,
            infra=infra,
            secrets=secrets,
            command=command,
            reconcile_since=since,
        )
    finally:
        lock.release()


def _refuse_renamed(run_id: str, latest: AttemptRow | None, name: str) -> None:
    """An attempt keeps the job name it was journaled with: an npa that names it otherwise
    (issue 24 changed names that were not one-to-one) must not launch it again under the
    new name beside a job that may hold the old one.

    Raises:
        RunStateError: the journaled name differs from the one computed now.
    """
    if latest is None or latest.job_name == name:
        return
    raise RunStateError(
        f"run {run_id} wave {latest.wave_index} attempt {latest.attempt} was journaled as job "
        f"{latest.job_name}, but this npa names it {name}",
        remedy=f"finish the run with the npa version that started it, or inspect "
        f"{latest.job_name} with `sky jobs queue` and submit under a new run id",
        details={"run_id": run_id, "journaled": latest.job_name, "computed": name},
    )


def _refuse_during_controller_down(request: LiveRequest, isolated: IsolatedDir) -> None:
    """Never launch into a state whose controller a teardown may be taking down.

    Raises:
        RunStateError: a ``sky down`` of this controller is recorded as under way.
    """
    from npa_infra.journal import inflight

    down = inflight.controller_down(isolated.root)
    if down is None:
        return
    raise RunStateError(
        f"the SkyPilot controller of {isolated.root} is being torn down (stack {down.stack}, "
        f"pid {down.pid}): a launch now could be lost with it",
        remedy=f"finish the teardown (`npa stack destroy --stack {down.stack} --yes`), bring "
        "the stack up again, then rerun this command",
        details={"run_id": request.run_id, "stack": down.stack},
    )


def _settle_foreign(
    request: LiveRequest, sky: SkyPilot, isolated: IsolatedDir, home: str, clock: Clock
) -> bool:
    """Another npa home's launch of this run, still in flight in this SkyPilot state, must
    settle before this home launches (journal.inflight; judged by runs.cancel). True when
    there was one: its job may have appeared after any answer read before now.

    Raises:
        UncertainOutcomeError: that launch may still create the job.
    """
    from npa_infra.journal import inflight
    from npa_infra.runs import cancel as launch_rules
    from npa_infra.runs.children import ChildState
    from npa_infra.skypilot import children
    from npa_infra.workflow.execution.launcher import check_request, reconcile

    path = inflight.inflight_path(isolated.root, request.run_id)
    other = inflight.read(path)
    if other is None or other.home == home:
        return False  # nothing in flight, or our own journal's launch: its record governs
    found = reconcile(sky, other.job_name, clock.now())
    child = ChildState.NOT_RECORDED if other.child is None else children.observe(other.child)
    answer = None
    if found.state is ReconciliationState.ABSENT:
        answer = check_request(sky, other.request_ids[-1] if other.request_ids else None).state
    verdict = launch_rules.judge_unreconciled(None, found.state, child, answer)
    if verdict in (launch_rules.LaunchVerdict.ABSENT, launch_rules.LaunchVerdict.CANCEL_FOUND):
        inflight.remove(path)  # settled: the name's lookup now tells the whole truth
        return True
    raise UncertainOutcomeError(
        f"run {request.run_id} has a launch in flight from npa home {other.home} "
        f"({other.job_name}, launch {other.launch_sequence}) that may still create its job",
        remedy=f"continue the run from that home (NPA_HOME={other.home} with --resume-run "
        f"{request.run_id}), or rerun this command once that launch has settled",
        details={"run_id": request.run_id, "job_name": other.job_name, "home": other.home},
    )


def _launch_lock(
    request: LiveRequest,
    journal: Journal,
    isolated: IsolatedDir,
    clock: Clock,
    progress: Callable[[str], None] | None,
    sky: SkyPilot,
    home: str,
) -> tuple[RunLock, bool]:
    """Hold the run's launch lock while a launch may be in flight; refuse a cancelled run.
    The flag: another home's launch of this run had to settle first (``_settle_foreign``).

    ``workflow cancel`` takes the same lock, so it waits for this launch to settle
    and then cancels by exact id; a cancel recorded before we got the lock stops
    the run here, before any request is sent (faults.md, concurrent operators).

    Raises:
        RunLockedError: the lock stayed held past the wait.
        RunCancelledError: an operator cancelled the run.
    """
    from npa_infra.journal.lock import RunLock

    def waiting(holder: Mapping[str, object]) -> None:
        if progress is not None:
            progress(
                f"waiting for pid {holder.get('pid')} ({holder.get('argv')}) to release "
                f"the launch lock of run {request.run_id}"
            )

    lock = RunLock.in_state(
        isolated.root,
        "launches",
        request.run_id,
        stack=request.stack_name,
        argv=list(request.invocation),
        now=clock.now(),
    )
    lock.acquire(wait=LAUNCH_LOCK_WAIT, on_wait=waiting)
    try:
        _refuse_during_controller_down(request, isolated)
        foreign = _settle_foreign(request, sky, isolated, home, clock)
        run = journal.get_run(request.run_id)
        cancel = (run.data or {}).get("cancel_requested") if run is not None else None
        if cancel:
            raise RunCancelledError(
                f"run {request.run_id} was cancelled (workflow cancel); nothing more is launched",
                remedy=f"see what remains with `npa workbench workflow status {request.run_id}`",
                details={"run_id": request.run_id},
            )
    except BaseException:
        lock.release()
        raise
    return lock, foreign


def _drive(
    request: LiveRequest,
    journal: Journal,
    driver: LaunchDriver,
    clock: Clock,
    isolated: IsolatedDir,
    job: RenderedJob,
    key: AttemptKey,
    record: TransactionRecord,
    path: Path,
    name: str,
    number: int,
    variables: Mapping[str, Mapping[str, str]],
    *,
    infra: str,
    secrets: Mapping[str, str],
    command: str,
    reconcile_since: float | None = None,
) -> TransactionRecord:
    record = driver.settle_child(key, record)  # an earlier submit's launch child is gone
    journal.update_run(
        request.run_id, status=RunStatus.LAUNCHING, lifecycle_state="mutating", now=clock.now()
    )

    def before_post(intent: TransactionRecord) -> None:
        # the intent checkpoint wrote this launch's in-flight record; a teardown writes its
        # down record before listing those: checked again now, one of the two sees the other
        _refuse_during_controller_down(request, isolated)
        # the sequence this POST carries is durable (the intent checkpoint) before it is sent
        taskfiles.write(
            isolated,
            request.run_id,
            name,
            taskfiles.attempt_text(
                job, number, intent.launch_sequence, variables, intent.logical_launch_id
            ),
        )

    try:
        record = driver.run(
            key,
            record,
            task_yaml=path,
            infra=infra,
            secrets=secrets,
            resume_command=command,
            before_post=before_post,
            reconcile_since=reconcile_since,
        )
    finally:
        journal.update_attempt(
            request.run_id,
            key.wave_index,
            number,
            status=record.state.value,
            job_id=record.job_id,
            now=clock.now(),
        )
    return record


def _verify_adopted(
    record: TransactionRecord, sky: SkyPilot, clock: Clock, journal: Journal, key: AttemptKey
) -> None:
    """On resume, the stored id must still be the one job with the attempt's exact name,
    and not a job that carries another launch's identity (runs.ownership). A job without
    any identity was adopted before npa stamped its launches: its id is the evidence."""
    from npa_infra.workflow.execution.launcher import reconcile

    found = reconcile(sky, record.job_name, clock.now(), record.logical_launch_id)
    journal.append_event(
        key.run_id,
        "resume_lookup",
        {"wave": key.wave_index, "attempt": key.attempt, **found.to_json()},
        now=clock.now(),
    )
    named = found.job_ids[0] if len(found.job_ids) == 1 else None
    if found.state in (ReconciliationState.FOUND, ReconciliationState.UNPROVEN) and (
        named != record.job_id
    ):
        raise UncertainOutcomeError(
            f"{record.job_name} now belongs to job {named}, but the journal adopted "
            f"job {record.job_id}",
            remedy="inspect both jobs with `sky jobs queue`; npa will not guess which is the run",
            details={"job_name": record.job_name},
        )
    if found.state is ReconciliationState.FOREIGN:
        raise UncertainOutcomeError(
            f"{record.job_name} (job {named}) is not this launch's: {found.error}",
            remedy=ownership.remedy(record.job_name, named, found.error),
            details={"job_name": record.job_name},
        )
    if found.state in (ReconciliationState.AMBIGUOUS, ReconciliationState.UNAVAILABLE):
        raise UncertainOutcomeError(
            f"cannot verify {record.job_name} (job {record.job_id}): the queue answered "
            f"{found.state.value} {found.error}".strip(),
            remedy="rerun the same command once `sky jobs queue` answers",
            details={"job_name": record.job_name},
        )


def attempt_name(base: str, attempt: int) -> str:
    """The ``-aN`` name of attempt ``attempt`` of the job named ``base`` (plan.waves)."""
    from npa_infra.plan import waves

    return waves.attempt_name(base, attempt)


def _reenter(record: TransactionRecord, clock: Clock) -> TransactionRecord:
    """Re-arm an unfinished or blocked record for ``--resume-run``.

    A launch that failed with a terminal category after one absent read is looked
    up again (its request re-checked, its exact name re-read): a job that appeared
    is adopted. It is never relaunched (sticky, runtime-reference.md §3
    ``resume_block_terminal_or_legacy_absence``): the terminal ``last_category``
    is kept, so an absence read again ends it as before, still recovery-required.
    """
    return transaction.reenter(record, now=clock.now())
