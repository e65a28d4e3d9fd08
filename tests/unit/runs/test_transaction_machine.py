"""The launch transaction driven against a simulated SkyPilot (style.md rule 19).

A hypothesis ``RuleBasedStateMachine`` plays the driver of
``npa_infra.workflow``: it asks ``next_action``, answers from a simulated
world with a random fault schedule, and feeds the answer back. The world
holds the jobs for the one name and every launch request ever sent; a
request reaches the server even when the client errored or timed out, may
stay in flight for several checks, and may create its job before it settles
(delayed appearance). Queue reads may be unavailable or ambiguous, but a
good read never lies. Interrupts end the transaction; crashes reload the
last journaled record (``begin``, every launch intent, every exit) and
``reenter`` it; finished indeterminate/transient/interrupted records are
resumed.

Invariants (runtime-reference.md §1):

- never two live launches: no LAUNCH while a request is unsettled or a job
  exists for the name;
- no retry without an authoritative ``absent`` read after a settled request,
  nor after a hard (non-transient) failure of the latest launch;
- ``launch_sequence`` grows by exactly one per LAUNCH;
- a ``job_id`` only ever comes from a ``found`` reconciliation of a real job;
- a finished record's decision agrees with its existence, and an ``absent``
  existence is true in the world;
- the deadline bounds the time spent while retrying;
- every record survives the journal (``to_json`` then ``codec.record_from_json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from npa_infra.runs import backoff, classifier, codec, transaction
from npa_infra.runs.classifier import ClassifierPhase
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
from npa_infra.runs.transaction import Action, ActionKind

D = RecoveryDecision
NAME = "npa-run-w1-a1"
MAX_REENTRIES = 3
# True in about one draw of eight; last, so shrinking prefers False.
RARELY = st.sampled_from((*[False] * 7, True))
TRANSIENT_TEXTS = (
    "connection refused",
    "status code 503",
    "Could not connect to SkyPilot API server",
    "429 Too Many Requests",
)
TEXTS = (
    *TRANSIENT_TEXTS,
    "Forbidden (403)",
    "quota exceeded",
    "Unauthorized",
    "mystery failure",
    "",
)
# Launch errors lean transient, so runs reach retries and deadline exhaustion.
LAUNCH_TEXTS = (*TRANSIENT_TEXTS, *TEXTS)
FOUND_DECISIONS = frozenset(
    {D.ADOPT_EXISTING, D.SUBMITTED_AND_RECONCILED, D.ADOPT_AFTER_UNCERTAIN_LAUNCH}
)
BLOCK_DECISIONS = frozenset({D.BLOCK_INDETERMINATE, D.BLOCK_AFTER_UNCERTAIN_SUCCESS})
ABSENT_DECISIONS = frozenset(
    {
        D.READINESS_BLOCKED,
        D.RECOVERY_DEADLINE_EXHAUSTED,
        D.VERIFIED_ABSENT_NO_RETRY,
        D.INTERRUPTED_VERIFIED_ABSENT,
    }
)
RESUMABLE = frozenset(
    {LaunchState.INDETERMINATE, LaunchState.TRANSIENT_API_FAILURE, LaunchState.INTERRUPTED}
)


@dataclass
class SimRequest:
    """One ``sky.jobs.launch`` request as the API server sees it."""

    request_id: str
    remaining: int  # ticks until it settles
    final: RequestState  # SUCCEEDED, FAILED or CANCELLED
    error: str
    appear_early: bool  # the job shows in the queue before the request settles
    state: RequestState = RequestState.PENDING
    job_id: int | None = None


class SimWorld:
    """The jobs for the one name and every launch request, as SkyPilot holds them."""

    def __init__(self) -> None:
        self.jobs: list[int] = []
        self.requests: list[SimRequest] = []
        self._next_job = 100

    def add_job(self) -> int:
        self._next_job += 1
        self.jobs.append(self._next_job)
        return self._next_job

    def live(self) -> list[SimRequest]:
        return [r for r in self.requests if not r.state.settled]

    def submit(self, request: SimRequest) -> None:
        self.requests.append(request)
        if request.remaining <= 0:
            self._settle(request)

    def tick(self) -> None:
        for request in self.live():
            request.state = RequestState.RUNNING
            request.remaining -= 1
            if (
                request.final is RequestState.SUCCEEDED
                and request.appear_early
                and request.job_id is None
            ):
                request.job_id = self.add_job()
            if request.remaining <= 0:
                self._settle(request)

    def _settle(self, request: SimRequest) -> None:
        request.state = request.final
        if request.final is RequestState.SUCCEEDED and request.job_id is None:
            request.job_id = self.add_job()

    def by_id(self, request_id: str) -> SimRequest:
        return next(r for r in self.requests if r.request_id == request_id)


class LaunchTransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = SimWorld()
        self.now = 1000.0
        self.record = transaction.begin(
            logical_launch_id="npa-launch-x", job_name=NAME, context="kind", now=self.now
        )
        self._journal()
        self.launches = 0
        self.authoritative_absent = False  # since the last LAUNCH or re-entry
        self.reentries = 0
        self.deadline_seconds = backoff.RECOVERY_DEADLINE
        self.hard_failure_fed = False  # a non-transient failure was fed for this launch

    @initialize(
        preexisting=st.sampled_from((0, 0, 0, 1, 2)),
        deadline=st.sampled_from((3.0, 15.0, 40.0, backoff.RECOVERY_DEADLINE)),
    )
    def seed_world(self, preexisting: int, deadline: float) -> None:
        for _ in range(preexisting):
            self.world.add_job()
        self.deadline_seconds = deadline  # short deadlines reach exhaustion within a run
        self.record = transaction.begin(
            logical_launch_id="npa-launch-x",
            job_name=NAME,
            context="kind",
            now=self.now,
            deadline_seconds=deadline,
        )
        self._journal()

    # -- the driver loop ---------------------------------------------------------------------
    @precondition(lambda self: not self.record.done)
    @rule(data=st.data(), iterations=st.integers(min_value=1, max_value=6))
    def step(self, data: st.DataObject, iterations: int) -> None:
        """Run up to ``iterations`` turns of the driver loop."""
        handlers = {
            ActionKind.RECONCILE: self._reconcile,
            ActionKind.READINESS: self._readiness,
            ActionKind.LAUNCH: self._launch,
            ActionKind.CHECK_REQUEST: self._check_request,
            ActionKind.SLEEP: self._sleep,
        }
        for _ in range(iterations):
            if self.record.done:
                return
            action = transaction.next_action(self.record)
            handlers[action.kind](action, data)
            self.world.tick()

    # Ctrl-C and crashes are rare, so most runs get far enough to retry.
    @precondition(lambda self: not self.record.done)
    @rule(fire=RARELY)
    def interrupt(self, fire: bool) -> None:
        if fire:
            self.record = transaction.on_interrupted(self.record, now=self.now)
            self._journal()

    @precondition(lambda self: not self.record.done and self.reentries < MAX_REENTRIES)
    @rule(fire=RARELY)
    def crash_and_reenter(self, fire: bool) -> None:
        if fire:
            self._reenter(self._reload(), crashed=True)

    @precondition(
        lambda self: (
            self.record.state in RESUMABLE and self.record.done and self.reentries < MAX_REENTRIES
        )
    )
    @rule()
    def resume_finished(self) -> None:
        self._reenter(self.record, crashed=False)

    @precondition(lambda self: self.record.done)
    @rule()
    def observe_finished(self) -> None:
        assert transaction.next_action(self.record) == Action(ActionKind.FINISH)

    # -- actions -------------------------------------------------------------------------------
    def _reconcile(self, action: Action, data: st.DataObject) -> None:
        fault = data.draw(st.sampled_from((*["good"] * 8, "unavailable", "ambiguous")))
        if fault == "unavailable":
            text = data.draw(st.sampled_from(TEXTS))
            category = classifier.classify(text, ClassifierPhase.RECONCILIATION)
            obs = Reconciliation(
                ReconciliationState.UNAVAILABLE, error=text, category=category, at=self.now
            )
        elif fault == "ambiguous":
            obs = Reconciliation(ReconciliationState.AMBIGUOUS, error="bad json", at=self.now)
        else:
            obs = self._truth(data)
        authoritative = (
            self.record.phase is Phase.RECONCILE_AFTER_LAUNCH and self.record.request_settled
        )
        jitter = data.draw(st.floats(min_value=0.0, max_value=1.0))
        self.record = transaction.on_reconciled(self.record, obs, now=self.now, jitter=jitter)
        if obs.state is ReconciliationState.ABSENT and authoritative:
            self.authoritative_absent = True
        self._checkpoint_if_done()

    def _truth(self, data: st.DataObject) -> Reconciliation:
        if not self.world.jobs:
            return Reconciliation(ReconciliationState.ABSENT, at=self.now)
        if len(self.world.jobs) > 1:
            return Reconciliation(
                ReconciliationState.AMBIGUOUS, job_ids=tuple(self.world.jobs), at=self.now
            )
        status = data.draw(st.sampled_from(("PENDING", "RUNNING", "SUCCEEDED", "FAILED")))
        return Reconciliation(
            ReconciliationState.FOUND, job_ids=(self.world.jobs[0],), status=status, at=self.now
        )

    def _readiness(self, action: Action, data: st.DataObject) -> None:
        evidence = data.draw(st.sampled_from((*[Evidence.READY] * 8, *Evidence)))
        category = {
            Evidence.READY: Category.NONE,
            Evidence.TRANSIENT_UNAVAILABLE: Category.KUBERNETES_SERVER,
            Evidence.TERMINAL: Category.AUTH,
            Evidence.AMBIGUOUS: Category.UNKNOWN,
        }[evidence]
        self.now += data.draw(st.floats(min_value=0.0, max_value=5.0))
        sample = {"evidence": evidence.value, "at": self.now}
        self.record = transaction.on_readiness(
            self.record, evidence, samples=(sample,), category=category, now=self.now
        )
        self._checkpoint_if_done()

    def _launch(self, action: Action, data: st.DataObject) -> None:
        assert not self.world.live(), "LAUNCH while a launch request is still live"
        assert not self.world.jobs, "LAUNCH while a job for the name exists"
        if self.launches > 0:
            assert self.authoritative_absent, "retry without an authoritative absent read"
            latest = self.record.last_category
            assert latest.transient or latest is Category.INTERRUPTED, "retry after a hard failure"
            assert not self.hard_failure_fed, "retry after the world reported a hard failure"
        before = self.record.launch_sequence
        self.record = transaction.on_launch_intent(self.record, now=self.now)
        assert self.record.launch_sequence == before + 1
        self._journal()  # journaled BEFORE the POST
        self.launches += 1
        self.authoritative_absent = False
        self.hard_failure_fed = False
        kind = data.draw(
            st.sampled_from((*["accepted", "error"] * 3, "timeout", "interrupt", "crash"))
        )
        request_id = f"req-{len(self.world.requests) + 1}"
        posted = kind == "accepted" or data.draw(st.booleans())  # an errored client may have POSTed
        if posted:
            self.world.submit(self._request(request_id, data))
        self._launch_outcome(kind, request_id, data)

    def _request(self, request_id: str, data: st.DataObject) -> SimRequest:
        final = data.draw(
            st.sampled_from(
                (*[RequestState.SUCCEEDED] * 2, RequestState.FAILED, RequestState.CANCELLED)
            )
        )
        return SimRequest(
            request_id=request_id,
            remaining=data.draw(st.integers(min_value=0, max_value=4)),
            final=final,
            error=data.draw(st.sampled_from(TEXTS)) if final is RequestState.FAILED else "",
            appear_early=data.draw(st.booleans()),
        )

    def _launch_outcome(self, kind: str, request_id: str, data: st.DataObject) -> None:
        if kind == "crash" and self.reentries < MAX_REENTRIES:
            self._reenter(self._reload(), crashed=True)
            return
        if kind == "interrupt":
            self.record = transaction.on_interrupted(self.record, now=self.now)
            self._journal()
            return
        if kind == "accepted":
            outcome = LaunchOutcome(accepted=True, request_id=request_id)
        elif kind == "timeout":
            text = data.draw(st.sampled_from(("", "status code 503")))
            outcome = LaunchOutcome(accepted=False, timed_out=True, error=text)
        else:
            text = data.draw(st.sampled_from(LAUNCH_TEXTS))
            category = classifier.classify(text, ClassifierPhase.LAUNCH)
            outcome = LaunchOutcome(accepted=False, error=text, category=category)
        if not outcome.accepted:
            self._feed(classifier.classify(outcome.error, ClassifierPhase.LAUNCH))
        # issue 19: a supervised launch takes its id from the next shared tick's read
        settle = data.draw(st.sampled_from((0.0, 5.0)))
        self.record = transaction.on_launched(
            self.record, outcome, now=self.now, settle_delay=settle
        )

    def _feed(self, category: Category) -> None:
        """Remember that the world reported a failure no retry may follow."""
        if not category.transient:
            self.hard_failure_fed = True

    def _check_request(self, action: Action, data: st.DataObject) -> None:
        if action.request_id is not None:
            assert self.record.accepted
            request = self.world.by_id(action.request_id)
            state, error = request.state, request.error
        else:  # no id: any pending or running sky.jobs.launch request?
            live = self.world.live()
            state, error = (live[0].state, "") if live else (RequestState.NONE_ACTIVE, "")
        if data.draw(st.sampled_from((False, False, False, False, True))):
            state, error = RequestState.UNKNOWN, "could not read the request status"
        category = Category.NONE
        if state is RequestState.FAILED:
            category = classifier.classify(error, ClassifierPhase.LAUNCH)
        if state in (RequestState.FAILED, RequestState.CANCELLED):
            self._feed(category)
        check = RequestCheck(state, error=error, category=category)
        jitter = data.draw(st.floats(min_value=0.0, max_value=1.0))
        self.record = transaction.on_request(self.record, check, now=self.now, jitter=jitter)
        self._checkpoint_if_done()

    def _sleep(self, action: Action, data: st.DataObject) -> None:
        assert 0.0 < action.delay <= backoff.CAP
        if self.record.phase is Phase.BACKOFF:
            assert self.now + action.delay <= self.record.deadline
        self.now += action.delay
        self.record = transaction.on_slept(self.record, now=self.now)

    def _reenter(self, record: TransactionRecord, *, crashed: bool) -> None:
        self.reentries += 1
        self.record = transaction.reenter(
            record, now=self.now, deadline_seconds=self.deadline_seconds
        )
        self._journal()
        self.authoritative_absent = False
        if crashed:
            # What the world said after the journaled record died with the process: the
            # crash allowance of transaction.reenter applies (a crash is not evidence).
            self.hard_failure_fed = False

    def _checkpoint_if_done(self) -> None:
        if self.record.done:
            self._journal()

    def _journal(self) -> None:
        """Checkpoint the record as the journal stores it: its JSON form."""
        self.durable = self.record.to_json()

    def _reload(self) -> TransactionRecord:
        """After a crash: the last checkpoint, read back through the journal codec."""
        return codec.record_from_json(self.durable)

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def one_live_request_at_most(self) -> None:
        assert len(self.world.live()) <= 1

    @invariant()
    def sequence_counts_launches(self) -> None:
        assert self.record.launch_sequence == self.launches

    @invariant()
    def job_id_only_from_found(self) -> None:
        if self.record.job_id is None:
            return
        last = self.record.reconciliations[-1]
        assert last.state is ReconciliationState.FOUND
        assert last.job_ids == (self.record.job_id,)
        assert self.record.job_id in self.world.jobs

    @invariant()
    def finished_decision_matches_existence(self) -> None:
        record = self.record
        if not record.done:
            assert record.finished_at is None
            return
        assert record.finished_at is not None
        decision, existence = record.recovery_decision, record.existence
        assert (decision in FOUND_DECISIONS) == (existence is Existence.FOUND)
        assert (existence is Existence.FOUND) == (
            record.state in (LaunchState.SUBMITTED, LaunchState.ADOPTED)
        )
        assert (existence is Existence.FOUND) == (record.job_id is not None)
        if decision in BLOCK_DECISIONS:
            assert existence is Existence.INDETERMINATE
            assert record.state in (LaunchState.INDETERMINATE, LaunchState.INTERRUPTED)
        if decision in ABSENT_DECISIONS:
            assert existence is Existence.ABSENT
        if decision is D.NONE:
            assert (record.state, record.launch_sequence) == (LaunchState.INTERRUPTED, 0)
            assert existence is not Existence.FOUND
        assert decision is not D.RETRY_AFTER_VERIFIED_ABSENCE

    @invariant()
    def absent_existence_true_in_world(self) -> None:
        if self.record.done and self.record.existence is Existence.ABSENT:
            assert not self.world.jobs
            assert not self.world.live()

    @invariant()
    def deadline_bounds_time(self) -> None:
        if not self.record.done:
            assert self.now <= self.record.deadline + backoff.CAP + backoff.REQUEST_POLL

    @invariant()
    def record_survives_the_journal(self) -> None:
        assert codec.record_from_json(self.record.to_json()) == self.record

    @invariant()
    def first_failure_kept(self) -> None:
        if self.record.primary_error:
            assert self.record.category is not Category.NONE


TestLaunchTransactionMachine = LaunchTransactionMachine.TestCase
