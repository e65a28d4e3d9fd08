"""The pure launch-transaction state machine: one wave attempt, at most one live launch.

The driver (``npa_infra.workflow``) loops ``action = next_action(record)``,
performs the action against SkyPilot, Kubernetes or the journal, and feeds
the observation back through the matching ``on_*`` function until
``record.done``. Nothing here does I/O: ``now`` and the jitter draw are
parameters. Every transition returns a new frozen record; an observation in
a phase where it cannot happen raises ``InvariantError`` (a driver bug).

The algorithm (runtime-reference.md §1 Algorithm, with the asynchronous
request rules of §1 "npa-infra must"):

1. START: reconcile by exact name. No request was ever sent by this
   transaction, so ``absent`` is authoritative. ``found`` (the one job is
   this launch's own, ``runs.ownership``) → ``adopted`` / ``adopt_existing``
   (whatever the status); ``absent`` → READINESS; ``unavailable``/
   ``ambiguous``, or a job that is ``foreign`` or ``unproven`` →
   ``indeterminate`` / ``block_indeterminate``: never adopted, never launched
   beside (issue 24).
2. READINESS: not ready → ``readiness_blocked`` (nothing is in flight). Ready
   after a transient retry with the deadline passed →
   ``recovery_deadline_exhausted_verified_absent``. Otherwise LAUNCH.
3. LAUNCH: ``on_launch_intent`` increments ``launch_sequence`` and the driver
   journals that record *before* POSTing; ``on_launched`` records the request
   id (accepted) or the classified error (first failure kept), then
   RECONCILE_AFTER_LAUNCH.
4. RECONCILE_AFTER_LAUNCH: an accepted launch may ask to wait ``settle_delay``
   first (SLEEP, then the lookup): the id is taken from the next shared queue
   read, one tick later, not from a read of its own right after the POST
   (issue 19). ``found`` → ``submitted_and_reconciled`` when
   accepted, else ``adopt_after_uncertain_launch`` (the id always comes from
   the queue); ``unavailable``/``ambiguous``/``foreign``/``unproven`` → block
   (uncertain success when accepted); ``absent`` before the request settled → REQUEST_CHECK;
   ``absent`` after it settled is authoritative: a SUCCEEDED request without
   a job blocks; a transient (or interrupted) latest failure backs off unless
   the delay would pass the deadline; anything else is
   ``verified_absent_no_retry``.
5. REQUEST_CHECK: ``sky api status`` for the accepted request id (or, with
   no id, for any active ``sky.jobs.launch`` request). Settled → reconcile
   again (only a read after settlement is authoritative). In flight or
   unreadable → sleep ``REQUEST_POLL`` (``poll_delay`` > 0, the phase stays
   REQUEST_CHECK and ``next_action`` is SLEEP), then reconcile again with
   ``request_settled`` still false; if the poll would pass the deadline, block.
6. BACKOFF: sleep ``backoff_delay``; then ``retries`` + 1 and READINESS again
   (readiness is re-proven before every retry).
7. Ctrl-C (``on_interrupted``): before any launch → ``interrupted`` with no
   decision; with absence proven and nothing in flight →
   ``interrupted_verified_absent``; otherwise → ``block_indeterminate``.
8. ``reenter`` re-arms an unfinished (crashed) or indeterminate, transient,
   interrupted or terminal record: never launched → START; otherwise
   RECONCILE_AFTER_LAUNCH with the request unsettled, so nothing is relaunched
   before the request is settled and the name proven absent.

``primary_error``/``category`` keep the first failure (§1 Checkpoints);
``last_category`` holds the latest launch or request failure, which decides
whether an authoritative absence may be retried.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from npa_infra.errors import InvariantError
from npa_infra.runs import backoff, classifier, ownership, skyoutput
from npa_infra.runs.children import ChildIdentity
from npa_infra.runs.models import (
    Category,
    Evidence,
    Existence,
    LaunchOutcome,
    LaunchState,
    Phase,
    Reconciliation,
    ReconciliationState,
    RecoveryDecision,
    RequestCheck,
    RequestState,
    TransactionRecord,
)

__all__ = [
    "Action",
    "ActionKind",
    "begin",
    "next_action",
    "on_interrupted",
    "on_launch_intent",
    "on_launched",
    "on_readiness",
    "on_reconciled",
    "on_request",
    "on_slept",
    "reenter",
    "remedy_for",
]

RECOVERY_DEADLINE = backoff.RECOVERY_DEADLINE


class ActionKind(StrEnum):
    RECONCILE = "reconcile"
    READINESS = "readiness"
    LAUNCH = "launch"
    CHECK_REQUEST = "check_request"
    SLEEP = "sleep"
    FINISH = "finish"


@dataclass(frozen=True, slots=True)
class Action:
    """What the driver must do next; ``delay`` for SLEEP, ``request_id`` for CHECK_REQUEST."""

    kind: ActionKind
    delay: float = 0.0
    request_id: str | None = None


_INITIAL_PHASES = frozenset({Phase.START, Phase.INITIAL_RECONCILE})
_RECONCILE_PHASES = _INITIAL_PHASES | {Phase.RECONCILE_AFTER_LAUNCH}
_FOUND_STATES = frozenset({LaunchState.SUBMITTED, LaunchState.ADOPTED})
_REQUEST_FAILED = frozenset({RequestState.FAILED, RequestState.CANCELLED})
_REENTRY_REMEDY = frozenset(
    {LaunchState.INDETERMINATE, LaunchState.TRANSIENT_API_FAILURE, LaunchState.INTERRUPTED}
)
_INTERRUPTED = LaunchState.INTERRUPTED
_SUBMITTED = LaunchState.SUBMITTED
_ADOPTED = LaunchState.ADOPTED
_TERMINAL = LaunchState.TERMINAL_FAILURE
# What each exit decision says about the name (runtime-reference.md §1 Algorithm).
_EXISTENCE = {
    RecoveryDecision.ADOPT_EXISTING: Existence.FOUND,
    RecoveryDecision.SUBMITTED_AND_RECONCILED: Existence.FOUND,
    RecoveryDecision.ADOPT_AFTER_UNCERTAIN_LAUNCH: Existence.FOUND,
    RecoveryDecision.BLOCK_INDETERMINATE: Existence.INDETERMINATE,
    RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS: Existence.INDETERMINATE,
    RecoveryDecision.READINESS_BLOCKED: Existence.ABSENT,
    RecoveryDecision.RECOVERY_DEADLINE_EXHAUSTED: Existence.ABSENT,
    RecoveryDecision.VERIFIED_ABSENT_NO_RETRY: Existence.ABSENT,
    RecoveryDecision.INTERRUPTED_VERIFIED_ABSENT: Existence.ABSENT,
}
_READINESS_STATES = {
    Evidence.TERMINAL: LaunchState.TERMINAL_FAILURE,
    Evidence.TRANSIENT_UNAVAILABLE: LaunchState.TRANSIENT_API_FAILURE,
    Evidence.AMBIGUOUS: LaunchState.INDETERMINATE,
}
_FIXES = {
    Category.AUTH: "refresh the cluster credentials (kubeconfig user, exec plugin)",
    Category.RBAC: "grant the missing Kubernetes permissions to this identity",
    Category.CONTEXT: "select an existing, allowed kube context",
    Category.IDENTITY: "point the command at the intended cluster and context",
    Category.CERTIFICATE: "fix the cluster CA or the client certificate",
    Category.CONFIG: "fix the kubeconfig path or install the missing executable",
    Category.CAPACITY: "free capacity or quota, or request fewer resources",
    Category.WORKLOAD: "fix the image or the setup step of the task",
    Category.SCHEMA: "fix the rendered task or pod_config the server rejected",
    # runs.skyoutput: the local SkyPilot install's own failures
    Category.SKYPILOT_VENV: f"repair SkyPilot's venv with `{skyoutput.BOOTSTRAP_REMEDY}`",
    Category.STALE_IAM_TOKEN: skyoutput.TOKEN_REMEDY,
    Category.FOREIGN_API_SERVER: skyoutput.PORT_REMEDY,
}


# -- public API -------------------------------------------------------------------------
def begin(
    *,
    logical_launch_id: str,
    job_name: str,
    context: str | None,
    now: float,
    deadline_seconds: float = RECOVERY_DEADLINE,
) -> TransactionRecord:
    """A fresh transaction in START, with the recovery deadline ``now + deadline_seconds``."""
    return TransactionRecord(
        logical_launch_id=logical_launch_id,
        job_name=job_name,
        context=context,
        started_at=now,
        deadline=now + deadline_seconds,
    )


def next_action(record: TransactionRecord) -> Action:
    """The one thing the driver must do next for ``record``."""
    phase = record.phase
    if phase is Phase.RECONCILE_AFTER_LAUNCH and record.poll_delay > 0:  # rule 4: settle first
        return Action(ActionKind.SLEEP, delay=record.poll_delay)
    if phase in _RECONCILE_PHASES:
        return Action(ActionKind.RECONCILE)
    if phase is Phase.READINESS:
        return Action(ActionKind.READINESS)
    if phase is Phase.LAUNCH:
        return Action(ActionKind.LAUNCH)
    if phase is Phase.REQUEST_CHECK:
        if record.poll_delay > 0:  # rule 5: the request was in flight; wait, then reconcile
            return Action(ActionKind.SLEEP, delay=record.poll_delay)
        return Action(ActionKind.CHECK_REQUEST, request_id=_latest_request_id(record))
    if phase is Phase.BACKOFF:
        return Action(ActionKind.SLEEP, delay=record.backoff_delay)
    return Action(ActionKind.FINISH)


def on_reconciled(
    record: TransactionRecord, obs: Reconciliation, *, now: float, jitter: float = 0.5
) -> TransactionRecord:
    """Apply an exact-name queue lookup (rules 1 and 4).

    Raises:
        InvariantError: the record is not waiting for a reconciliation.
    """
    _require(
        record.phase in _RECONCILE_PHASES
        and not (record.phase is Phase.RECONCILE_AFTER_LAUNCH and record.poll_delay > 0),
        "on_reconciled",
        record,
    )
    state = _effective_state(obs)
    seen = replace(record, reconciliations=(*record.reconciliations, obs))
    if state in (ReconciliationState.UNAVAILABLE, ReconciliationState.AMBIGUOUS):
        seen = replace(seen, reconciliation_error=obs.error or f"job queue {obs.state.value}")
    if state.not_ours:
        found = f"job {obs.job_ids[0]}" if obs.job_ids else "the job"
        error = f"{found} named {record.job_name} is not this launch's: {obs.error or state.value}"
        seen = replace(seen, reconciliation_error=error)
    if record.phase in _INITIAL_PHASES:
        return _after_initial_lookup(seen, state, obs, now)
    return _after_launch_lookup(seen, state, obs, now, jitter)


def on_readiness(
    record: TransactionRecord,
    evidence: Evidence,
    *,
    samples: tuple[dict[str, object], ...] = (),
    category: Category = Category.NONE,
    error: str = "",
    now: float,
) -> TransactionRecord:
    """Apply the readiness gate's verdict (rule 2).

    Raises:
        InvariantError: the record is not in READINESS.
    """
    _require(record.phase is Phase.READINESS, "on_readiness", record)
    gated = replace(record, readiness=(*record.readiness, *samples))
    if evidence is Evidence.READY:
        if gated.retries > 0 and now >= gated.deadline:  # §1 Algorithm 2.2
            return _deadline_exhausted(gated, now)
        return replace(gated, phase=Phase.LAUNCH)
    failed = _failure(gated, category, error or f"readiness {evidence.value}")
    # Absence was proven before readiness, and nothing is in flight.
    return _finish(failed, now, _READINESS_STATES[evidence], RecoveryDecision.READINESS_BLOCKED)


def on_launch_intent(record: TransactionRecord, *, now: float) -> TransactionRecord:
    """Commit the intent to launch: the driver journals THIS record before the POST (rule 3).

    Raises:
        InvariantError: not in LAUNCH, or an intent is already waiting for its outcome.
    """
    _require(
        record.phase is Phase.LAUNCH and not record.outcome_pending, "on_launch_intent", record
    )
    return replace(
        record,
        launch_sequence=record.launch_sequence + 1,
        state=LaunchState.LAUNCHING,
        existence=Existence.INDETERMINATE,  # a request may now be in flight
        accepted=False,
        request_settled=False,
        outcome_pending=True,
        last_category=Category.NONE,
        last_request_state=None,
        poll_delay=0.0,
        backoff_delay=0.0,
    )


def on_child_started(record: TransactionRecord, child: ChildIdentity) -> TransactionRecord:
    """The launch child is started but still gated: the driver journals THIS record,
    then releases it, so a resume knows every child that could still act.

    Raises:
        InvariantError: no launch intent is waiting for its outcome.
    """
    _require(record.phase is Phase.LAUNCH and record.outcome_pending, "on_child_started", record)
    return replace(record, launch_child=child)


def on_child_gone(record: TransactionRecord, *, now: float) -> TransactionRecord:
    """A resume observed the recorded launch child gone: it can no longer act."""
    if record.launch_child is None:
        return record
    gone = f"launch child pid {record.launch_child.pid} observed gone at {now}"
    return replace(record, launch_child=None, notes=(*record.notes, gone))


def on_launched(
    record: TransactionRecord, outcome: LaunchOutcome, *, now: float, settle_delay: float = 0.0
) -> TransactionRecord:
    """Apply what ``sky jobs launch --async`` answered (rule 3).

    ``settle_delay`` > 0: an accepted launch's lookup waits that long (rule 4), so
    the id comes from the next shared tick's read. A failed launch looks up at once.

    Raises:
        InvariantError: no launch intent is pending, or an accepted outcome has no request id.
    """
    _require(
        record.phase is Phase.LAUNCH
        and record.state is LaunchState.LAUNCHING
        and record.outcome_pending,
        "on_launched",
        record,
    )
    # the child has answered (and exited): nothing of it can act any more
    after = replace(
        record, phase=Phase.RECONCILE_AFTER_LAUNCH, outcome_pending=False, launch_child=None
    )
    if outcome.accepted:
        if not outcome.request_id:
            raise InvariantError("an accepted launch must carry its request id")
        return replace(
            after,
            accepted=True,
            request_ids=(*after.request_ids, outcome.request_id),
            poll_delay=max(settle_delay, 0.0),
        )
    # A timed-out launch is unknown unless its text classifies otherwise.
    category = outcome.category
    if category is Category.NONE:
        category = classifier.classify(outcome.error, classifier.ClassifierPhase.LAUNCH)
    fallback = "launch timed out" if outcome.timed_out else "launch failed without output"
    return replace(_failure(after, category, outcome.error or fallback), accepted=False)


def on_request(
    record: TransactionRecord, check: RequestCheck, *, now: float, jitter: float = 0.5
) -> TransactionRecord:
    """Apply a ``sky api status`` read of the launch request (rule 5).

    Raises:
        InvariantError: the record is not waiting for a request check.
    """
    _require(record.phase is Phase.REQUEST_CHECK and record.poll_delay <= 0, "on_request", record)
    checked = replace(record, last_request_state=check.state)
    if check.state.settled:
        if check.state in _REQUEST_FAILED:
            category = check.category
            if category is Category.NONE:
                category = classifier.classify(check.error, classifier.ClassifierPhase.LAUNCH)
            checked = _failure(checked, category, check.error or f"launch request {check.state}")
        return replace(checked, request_settled=True, phase=Phase.RECONCILE_AFTER_LAUNCH)
    if now + backoff.REQUEST_POLL > record.deadline:  # still in flight (or unreadable) at the end
        note = f"launch request still {check.state.value} at the deadline"
        blocked = replace(checked, notes=(*checked.notes, _with_error(note, check.error)))
        return _block(blocked, now, _block_decision(blocked))
    return replace(checked, poll_delay=backoff.REQUEST_POLL)


def on_slept(record: TransactionRecord, *, now: float) -> TransactionRecord:
    """The driver slept the SLEEP action's delay (rules 5 and 6).

    Raises:
        InvariantError: the record was not sleeping.
    """
    if record.phase is Phase.BACKOFF:
        return replace(
            record,
            phase=Phase.READINESS,
            retries=record.retries + 1,
            accepted=False,
            request_settled=False,
            backoff_delay=0.0,
        )
    if record.phase is Phase.RECONCILE_AFTER_LAUNCH and record.poll_delay > 0:
        return replace(record, poll_delay=0.0)  # settled a tick: now the lookup (rule 4)
    _require(record.phase is Phase.REQUEST_CHECK and record.poll_delay > 0, "on_slept", record)
    return replace(
        record, phase=Phase.RECONCILE_AFTER_LAUNCH, poll_delay=0.0, request_settled=False
    )


def on_interrupted(record: TransactionRecord, *, now: float) -> TransactionRecord:
    """Ctrl-C: end the transaction with what is known about the name (rule 7).

    Before any launch the decision is none; existence is ``absent`` once the
    initial lookup proved it, ``indeterminate`` if it had not run yet (a job
    from an earlier process may exist). After a launch, absence counts as
    proven in BACKOFF, and also in READINESS or LAUNCH before the next intent
    (both come only after a backoff): nothing is in flight there, so the
    decision is ``interrupted_verified_absent``; anywhere else a request may
    be live, so ``block_indeterminate``.

    Raises:
        InvariantError: the record is already done.
    """
    _require(not record.done, "on_interrupted", record)
    marked = _mark_interrupted(record)
    if record.launch_sequence == 0:  # nothing was sent; absent once the first lookup said so
        looked = record.phase not in _INITIAL_PHASES
        existence = Existence.ABSENT if looked else Existence.INDETERMINATE
        return _finish(marked, now, _INTERRUPTED, RecoveryDecision.NONE, existence)
    if _absence_proven(record):
        return _finish(marked, now, _INTERRUPTED, RecoveryDecision.INTERRUPTED_VERIFIED_ABSENT)
    return _finish(marked, now, _INTERRUPTED, RecoveryDecision.BLOCK_INDETERMINATE)


def reenter(
    record: TransactionRecord, *, now: float, deadline_seconds: float = RECOVERY_DEADLINE
) -> TransactionRecord:
    """Re-arm a record left unfinished by a crash, or a finished non-success one (rule 8).

    ``submitted``/``adopted`` records come back unchanged. Never launched →
    START. Otherwise a request may exist: RECONCILE_AFTER_LAUNCH with the
    request unsettled, so the request is checked and the name re-read before
    anything else. The deadline is re-armed; ``retries`` are kept.

    npa-infra decision: a crash (the record was still ``launching``) with no
    failure seen for the latest launch is recorded as ``last_category``
    ``interrupted``, and an interrupted latest failure allows ONE relaunch
    after authoritative absence (the next intent clears it): a crash is not
    evidence against retrying, unlike a terminal error, which is kept.
    Whether a terminal record may be re-entered at all is resume.py's call.
    """
    if record.state in _FOUND_STATES:
        return record
    armed = replace(
        record,
        deadline=now + deadline_seconds,
        finished_at=None,
        recovery_decision=RecoveryDecision.NONE,
        existence=Existence.INDETERMINATE,
        outcome_pending=False,
        request_settled=False,
        last_request_state=None,
        poll_delay=0.0,
        backoff_delay=0.0,
        notes=(*record.notes, f"reentered from {record.state.value} at {now}"),
    )
    if record.launch_sequence == 0:  # nothing was ever sent: a fresh start
        return replace(armed, phase=Phase.START, state=LaunchState.PENDING, accepted=False)
    crashed = record.state is LaunchState.LAUNCHING and record.last_category is Category.NONE
    return replace(
        armed,
        phase=Phase.RECONCILE_AFTER_LAUNCH,
        state=LaunchState.LAUNCHING,
        # accepted is reset by every intent, so it says whether the latest sequence got an id
        accepted=record.accepted and bool(record.request_ids),
        last_category=Category.INTERRUPTED if crashed else record.last_category,
    )


def settled(record: TransactionRecord) -> bool:
    """Nothing of this transaction can still create a job that its record does not name:
    never sent, or done with the id found, or done with absence proven and the request
    terminal."""
    if record.launch_sequence == 0:
        return True
    if not record.done or record.launch_child is not None:
        return False
    if record.state in _FOUND_STATES:
        return True
    return record.existence is Existence.ABSENT and record.request_settled


def remedy_for(record: TransactionRecord, resume_command: str) -> str:
    """The operator's next step for a finished record; empty when nothing is needed."""
    held = _held_by_another(record)
    if held is not None:  # a resume would find the same job again (issue 24)
        return held
    if record.state in _REENTRY_REMEDY:  # §1 Checkpoints and remedy
        return (
            f"rerun the identical command with --resume-run: {resume_command}; "
            "never pick a new run id and never cancel by name"
        )
    if record.state is LaunchState.TERMINAL_FAILURE:
        category = _latest_category(record)
        fix = _FIXES.get(category, "read primary_error and fix its cause")
        return f"{category.value} failure: {fix}, then rerun: {resume_command}"
    return ""


# -- transitions ------------------------------------------------------------------------
def _after_initial_lookup(
    record: TransactionRecord, state: ReconciliationState, obs: Reconciliation, now: float
) -> TransactionRecord:
    if state is ReconciliationState.FOUND:  # §1 Algorithm 1: adopt whatever the status
        adopted = replace(record, job_id=obs.job_id)
        return _finish(adopted, now, LaunchState.ADOPTED, RecoveryDecision.ADOPT_EXISTING)
    if state is ReconciliationState.ABSENT:  # no request of ours exists: authoritative
        return replace(record, phase=Phase.READINESS, existence=Existence.ABSENT)
    return _block(_failure(record, obs.category, "", latest=False), now, _block_decision(record))


def _after_launch_lookup(
    record: TransactionRecord,
    state: ReconciliationState,
    obs: Reconciliation,
    now: float,
    jitter: float,
) -> TransactionRecord:
    if state is ReconciliationState.FOUND:  # §1 Algorithm 3/4: the id comes from the queue
        found = replace(record, job_id=obs.job_id)
        if record.accepted:
            return _finish(found, now, _SUBMITTED, RecoveryDecision.SUBMITTED_AND_RECONCILED)
        return _finish(found, now, _ADOPTED, RecoveryDecision.ADOPT_AFTER_UNCERTAIN_LAUNCH)
    if state is not ReconciliationState.ABSENT:
        failed = _failure(record, obs.category, "", latest=False)
        return _block(failed, now, _block_decision(record))
    if not record.request_settled:  # §1 npa-infra must: absence counts only after settlement
        return replace(record, phase=Phase.REQUEST_CHECK, poll_delay=0.0)
    return _after_authoritative_absence(record, now, jitter)


def _after_authoritative_absence(
    record: TransactionRecord, now: float, jitter: float
) -> TransactionRecord:
    if record.accepted and record.last_request_state not in _REQUEST_FAILED:
        # The request succeeded (or its outcome is unknown) yet no job: a contradiction.
        note = "launch request settled without failing, but the job name is absent"
        contradicted = _failure(record, Category.UNKNOWN, note, latest=False)
        return _block(contradicted, now, RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS)
    latest = record.last_category
    if latest.transient or latest is Category.INTERRUPTED:  # §1 Algorithm 4, absent + transient
        return _schedule_retry(record, now, jitter)
    failed = _failure(record, Category.UNKNOWN, "launch failed", latest=False)
    return _finish(failed, now, _TERMINAL, RecoveryDecision.VERIFIED_ABSENT_NO_RETRY)


def _schedule_retry(record: TransactionRecord, now: float, jitter: float) -> TransactionRecord:
    wait = backoff.delay(record.retries + 1, jitter)
    if now + wait > record.deadline:
        return _deadline_exhausted(record, now)
    return replace(
        record,
        phase=Phase.BACKOFF,
        backoff_delay=wait,
        recovery_decision=RecoveryDecision.RETRY_AFTER_VERIFIED_ABSENCE,
        existence=Existence.ABSENT,
    )


# -- helpers ----------------------------------------------------------------------------
def _require(condition: bool, event: str, record: TransactionRecord) -> None:
    if not condition:
        raise InvariantError(
            f"{event} is illegal in phase {record.phase.value} (state {record.state.value}, "
            f"launch_sequence {record.launch_sequence})"
        )


def _effective_state(obs: Reconciliation) -> ReconciliationState:
    """A ``found`` without exactly one id is ambiguous (never take the largest id)."""
    if obs.state is ReconciliationState.FOUND and len(obs.job_ids) != 1:
        return ReconciliationState.AMBIGUOUS
    return obs.state


def _failure(
    record: TransactionRecord, category: Category, error: str, *, latest: bool = True
) -> TransactionRecord:
    """Record a failure: the first one stays primary; ``latest`` also updates last_category."""
    effective = Category.UNKNOWN if category is Category.NONE else category
    if record.category is Category.NONE:
        record = replace(record, category=effective, primary_error=record.primary_error or error)
    return replace(record, last_category=effective) if latest else record


def _mark_interrupted(record: TransactionRecord) -> TransactionRecord:
    marked = record
    if record.category is Category.NONE:
        marked = replace(marked, category=Category.INTERRUPTED)
    if record.last_category is Category.NONE and record.launch_sequence > 0:
        marked = replace(marked, last_category=Category.INTERRUPTED)
    return marked


def _absence_proven(record: TransactionRecord) -> bool:
    if record.phase in (Phase.BACKOFF, Phase.READINESS):
        return True
    return record.phase is Phase.LAUNCH and not record.outcome_pending


def _block_decision(record: TransactionRecord) -> RecoveryDecision:
    if record.accepted:
        return RecoveryDecision.BLOCK_AFTER_UNCERTAIN_SUCCESS
    return RecoveryDecision.BLOCK_INDETERMINATE


def _block(record: TransactionRecord, now: float, decision: RecoveryDecision) -> TransactionRecord:
    return _finish(record, now, LaunchState.INDETERMINATE, decision)


def _deadline_exhausted(record: TransactionRecord, now: float) -> TransactionRecord:
    decision = RecoveryDecision.RECOVERY_DEADLINE_EXHAUSTED
    return _finish(record, now, LaunchState.TRANSIENT_API_FAILURE, decision)


def _finish(
    record: TransactionRecord,
    now: float,
    state: LaunchState,
    decision: RecoveryDecision,
    existence: Existence | None = None,
) -> TransactionRecord:
    """End the transaction; existence follows from the decision unless given."""
    return replace(
        record,
        phase=Phase.DONE,
        state=state,
        recovery_decision=decision,
        existence=_EXISTENCE[decision] if existence is None else existence,
        finished_at=now,
        poll_delay=0.0,
        backoff_delay=0.0,
    )


def _held_by_another(record: TransactionRecord) -> str | None:
    """The remedy when the transaction stopped at a job that holds its name but is not its
    own (runs.ownership); None otherwise."""
    if record.state is not LaunchState.INDETERMINATE or not record.reconciliations:
        return None
    last = record.reconciliations[-1]
    if not last.state.not_ours:
        return None
    job_id = last.job_ids[0] if last.job_ids else None
    return ownership.remedy(record.job_name, job_id, last.error or last.state.value)


def _latest_request_id(record: TransactionRecord) -> str | None:
    return record.request_ids[-1] if record.accepted and record.request_ids else None


def _latest_category(record: TransactionRecord) -> Category:
    return record.category if record.last_category is Category.NONE else record.last_category


def _with_error(text: str, error: str) -> str:
    return f"{text}: {error}" if error else text
