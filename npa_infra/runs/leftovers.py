"""What ``npa cleanup --yes`` may remove of a teardown's leftovers, and what it must keep; pure.

A teardown (cancel every run, wait until terminal, ``cleanup-controller``,
``stack destroy``) leaves local caches behind. ``decide`` judges each cache
against what was observed of the runs and SkyPilot state directories, as one
ordered chain of early returns; the first rule that holds wins:

0. a cache npa cannot prove it made is kept (issue 24: cleanup removed
   directories npa never made): the proof (``Proof``) is npa's marker in the
   directory (``localstate.marker``), a journaled run id (a rendered YAML of a
   journaled run or plan, a task YAML of a run journaled in that state
   directory, a state directory a journaled run used), or, for the caches npa
   names itself in its own home (the probe and drift-gate caches, the venv),
   that name;
1. a run with an in-flight launch record (``journal.inflight``) that the
   cache serves keeps it: that launch may still act, and its resume needs the
   state it launched from (faults.md invariant 2);
2. a run the journal holds as non-terminal keeps what it uses (issue 16:
   never delete a cache a live run still needs);
3. a run whose lock another process holds keeps what it uses: a submit or a
   cancel is working on it right now (faults.md, concurrent operators);
4. a task YAML is kept while its state directory's own queue read lists a
   live job that may be that run's (by the job-name rule of cli.md §0), or
   could not be read (issue 24: the journal may not know the run; the queue
   does; unknown is not absent);
5. a state directory keeps itself while a ``sky down`` of its controller may
   be under way, while a stack's controller resource still claims it
   (``stack-owner``), and while its queue has not proven the controller gone:
   its ``user-id`` is the controller's identity, and deleting it would leave
   that controller, and any of its jobs, unmanaged (skypilot-0.12.md §7.2;
   unknown is not absent);
6. under a selection (``-s/--stack``, ``-p/--project``), a cache every stack
   shares (the venv, the probe and drift-gate caches) is kept: only the
   selection's state directories were observed, and the venv serves the
   others' ``cleanup-controller`` too (issue 16: other stacks' caches are not
   removed);
7. the SkyPilot venv is kept while ``npa skypilot bootstrap`` holds its lock,
   and while any state directory's controller is not proven gone: the
   runbook's ``cleanup-controller`` needs it;
8. anything else may go: the whole directory when npa's marker or name proves
   it, only the YAML files npa writes (then the directory, if that empties it)
   when only the journal does (``Removal``).

Which runs a cache serves: a per-run cache (rendered or task YAML) serves the
runs of that id (task YAML only in its own state directory); a cache of a
state directory (the directory itself, its tick files) serves every run of
that directory, and every run whose directory is unknown; the venv serves
every run. ``runbook`` is the ordered teardown the guide writes.

Which caches a selection covers (``Scope``, ``covers``): a rendered YAML of
one of its runs; a task YAML in one of its state directories whose run is not
another selection's; a state directory of its own and its tick files; and
the shared caches (rule 6 keeps them). ``plan`` decides only covered caches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "CacheDecision",
    "CacheKind",
    "CacheObservation",
    "Controller",
    "KeepReason",
    "Proof",
    "Removal",
    "RunObservation",
    "Scope",
    "StateObservation",
    "Verdict",
    "covers",
    "decide",
    "job_may_be_runs",
    "plan",
    "runbook",
]


class CacheKind(StrEnum):
    RENDERED_YAML = "rendered_yaml"  # $NPA_HOME/rendered/<run>: submit's rendered task YAML
    TASK_YAML = "task_yaml"  # <state>/submissions/<run>: the YAML each launch sent
    PROBE_CACHE = "probe_cache"  # $NPA_HOME/cache/image-pull-probe.json
    GATE_CACHE = "gate_cache"  # $NPA_HOME/cache/skypilot-gate.json (the drift gate's)
    TICK_FILES = "tick_files"  # <state>/supervision: the shared per-tick reads (tickshare)
    SKYPILOT_VENV = "skypilot_venv"  # $NPA_HOME/skypilot-venv and its version directories
    STATE_DIR = "state_dir"  # $NPA_HOME/skypilot-state/<name>: an isolated SkyPilot state


_PER_RUN = frozenset({CacheKind.RENDERED_YAML, CacheKind.TASK_YAML})
_PER_STATE = frozenset({CacheKind.TICK_FILES, CacheKind.STATE_DIR})
_SHARED = frozenset({CacheKind.PROBE_CACHE, CacheKind.GATE_CACHE, CacheKind.SKYPILOT_VENV})


class Controller(StrEnum):
    """What the state directory's queue proved about its jobs controller."""

    GONE = "gone"  # the queue answered that no controller is up (authoritative)
    UP = "up"  # the queue answered with rows: the controller exists
    UNKNOWN = "unknown"  # no answer that proves either


class Verdict(StrEnum):
    REMOVE = "remove"
    KEEP = "keep"


class Proof(StrEnum):
    """What proves npa made a cache (rule 0)."""

    MARKER = "marker"  # npa's marker file in the directory (localstate.marker)
    JOURNAL = "journal"  # a journaled run id (in its recorded state directory)
    NPA_NAME = "npa_name"  # a name npa gives its own cache in its own home
    NONE = "none"  # nothing: never removed


class Removal(StrEnum):
    """How much of a removable cache goes (rule 8)."""

    TREE = "tree"  # the whole file or directory: npa's marker or name proves all of it
    NPA_FILES = "npa_files"  # only the YAML files npa writes, then the directory if empty


class KeepReason(StrEnum):
    NOT_NPA_MADE = "not_npa_made"
    INFLIGHT_LAUNCH = "inflight_launch"
    LIVE_RUN = "live_run"
    LOCKED = "locked"
    LIVE_JOB = "live_job"
    CONTROLLER_DOWN_PENDING = "controller_down_pending"
    STACK_CLAIMED = "stack_claimed"
    CONTROLLER_NOT_GONE = "controller_not_gone"
    BOOTSTRAP_RUNNING = "bootstrap_running"
    SHARED = "shared"


@dataclass(frozen=True, slots=True)
class CacheObservation:
    kind: CacheKind
    path: str
    bytes: int
    run_id: str | None = None  # the run of a per-run cache
    state_dir: str | None = None  # the state directory it lies in (or is)
    proof: Proof = Proof.NONE  # what proves npa made it (rule 0)


@dataclass(frozen=True, slots=True)
class RunObservation:
    """One run as the journal, the in-flight records and the locks show it."""

    run_id: str
    state_dir: str | None  # None: not known (never launched, or not recorded)
    live: bool = False  # the journal holds it as non-terminal
    inflight: bool = False  # an in-flight launch record names it
    locked: bool = False  # another process holds one of its locks


@dataclass(frozen=True, slots=True)
class StateObservation:
    path: str
    controller: Controller
    stack_owner: str | None = None  # the stack whose controller resource claims it
    controller_down: bool = False  # a ``sky down`` record stands (journal.inflight)
    live_jobs: tuple[str, ...] = ()  # names of the jobs its queue lists as not terminal


@dataclass(frozen=True, slots=True)
class Scope:
    """What one ``-s/--stack`` or ``-p/--project`` selection covers (the module docstring)."""

    state_dirs: frozenset[str]  # its state directories
    runs: frozenset[str]  # the journal's runs of the selection
    foreign_runs: frozenset[str]  # the journal's runs of any other selection


@dataclass(frozen=True, slots=True)
class CacheDecision:
    cache: CacheObservation
    verdict: Verdict
    reason: KeepReason | None = None
    needed_by: tuple[str, ...] = ()  # the run ids that keep it
    detail: str = ""  # why, in words, with the next command

    @property
    def remove(self) -> bool:
        return self.verdict is Verdict.REMOVE

    @property
    def removal(self) -> Removal:
        """How much goes when removed (rule 8)."""
        journaled_only = self.cache.proof is Proof.JOURNAL and self.cache.kind in _PER_RUN
        return Removal.NPA_FILES if journaled_only else Removal.TREE


def _job_stems(run_id: str) -> tuple[str, ...]:
    """The prefixes of the job names a run's launches get (cli.md §0): the run id
    lowercased, characters outside ``[a-z0-9-]`` (one-shot) or ``[a-z0-9_-]`` (runtime)
    replaced by ``-``."""
    lowered = "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "-" for ch in run_id.lower()
    )
    return tuple(dict.fromkeys((lowered.replace("_", "-"), lowered)))


def job_may_be_runs(job_name: str, run_id: str) -> bool:
    """Whether ``job_name`` may be a job of ``run_id`` (``plan.waves.job_name``): it starts
    with the run's stem (or ``npa-`` and the stem, for a stem that does not start with a
    letter), whole or followed by ``-``; or, where the naming rule cuts the stem or strips
    its trailing dashes before a hash, with the stem's first 40 characters so stripped.
    Generous on purpose: a false match only keeps a file."""
    for stem in _job_stems(run_id):
        for shown in (stem, f"npa-{stem}"):
            if job_name.startswith(shown) and job_name[len(shown) : len(shown) + 1] in ("", "-"):
                return True
            kept = shown[:40].rstrip("-_")
            if kept != shown and kept and job_name.startswith(kept):
                return True
    return False


def _serves(cache: CacheObservation, run: RunObservation) -> bool:
    if cache.kind in _PER_RUN:
        if cache.run_id != run.run_id:
            return False
        return cache.kind is not CacheKind.TASK_YAML or run.state_dir in (None, cache.state_dir)
    if cache.kind in _PER_STATE:
        return run.state_dir is None or run.state_dir == cache.state_dir
    return cache.kind is CacheKind.SKYPILOT_VENV


def covers(scope: Scope, cache: CacheObservation) -> bool:
    """Whether ``cache`` is the selection's to list and judge (the module docstring)."""
    if cache.kind is CacheKind.RENDERED_YAML:
        return cache.run_id in scope.runs
    if cache.kind is CacheKind.TASK_YAML:
        return cache.state_dir in scope.state_dirs and cache.run_id not in scope.foreign_runs
    if cache.kind in _PER_STATE:
        return cache.state_dir in scope.state_dirs
    return cache.kind in _SHARED


def _ids(runs: Sequence[RunObservation]) -> tuple[str, ...]:
    return tuple(sorted({r.run_id for r in runs}))


def _keep(
    cache: CacheObservation, reason: KeepReason, detail: str, runs: Sequence[RunObservation] = ()
) -> CacheDecision:
    return CacheDecision(cache, Verdict.KEEP, reason, _ids(runs), detail)


_PROOF_DETAIL = (
    "npa cannot prove it made this (no npa marker in it, and no journaled run names it), "
    "so cleanup never removes it; remove it yourself if it is yours to remove"
)


def _job_rule(cache: CacheObservation, state: StateObservation | None) -> CacheDecision | None:
    """Rule 4: a task YAML a live job of its own queue read may need."""
    where = cache.state_dir or "?"
    if state is None or state.controller is Controller.UNKNOWN:
        return _keep(
            cache,
            KeepReason.LIVE_JOB,
            f"the queue of {where} could not be read, so a live job may still need it "
            "(rerun when the queue answers)",
        )
    jobs = [j for j in state.live_jobs if cache.run_id and job_may_be_runs(j, cache.run_id)]
    if jobs:
        return _keep(
            cache,
            KeepReason.LIVE_JOB,
            f"the queue of {where} lists live job(s) {', '.join(sorted(jobs))} of this run: "
            "cancel the run and wait until they are terminal",
        )
    return None


def _state_rule(cache: CacheObservation, state: StateObservation | None) -> CacheDecision | None:
    where = cache.path
    if state is not None and state.controller_down:
        return _keep(
            cache,
            KeepReason.CONTROLLER_DOWN_PENDING,
            f"a teardown of {where}'s controller may be under way; rerun the command that "
            "started it to finish it",
        )
    if state is not None and state.stack_owner:
        return _keep(
            cache,
            KeepReason.STACK_CLAIMED,
            f"stack {state.stack_owner}'s controller resource still claims it: "
            f"npa stack destroy -s {state.stack_owner} --yes",
        )
    if state is None or state.controller is Controller.UNKNOWN:
        return _keep(
            cache,
            KeepReason.CONTROLLER_NOT_GONE,
            f"the queue of {where} could not prove its jobs controller gone; deleting its "
            "user-id would leave that controller unmanaged (rerun when the queue answers)",
        )
    if state.controller is Controller.UP:
        return _keep(
            cache,
            KeepReason.CONTROLLER_NOT_GONE,
            "its jobs controller is still up: npa skypilot cleanup-controller --yes on "
            "this state directory first",
        )
    return None


def decide(
    cache: CacheObservation,
    runs: Sequence[RunObservation],
    states: Sequence[StateObservation],
    *,
    bootstrap_locked: bool = False,
    scoped: bool = False,
) -> CacheDecision:
    """Remove or keep one cache, and why (the module docstring's rules, in order).

    ``scoped``: only one selection's state directories were observed (rule 6).
    """
    if cache.proof is Proof.NONE:  # rule 0: issue 24, only what npa can prove it made
        return _keep(cache, KeepReason.NOT_NPA_MADE, _PROOF_DETAIL)
    served = [r for r in runs if _serves(cache, r)]
    inflight = [r for r in served if r.inflight]
    if inflight:  # rule 1: faults.md invariant 2, the launch may still act
        return _keep(
            cache,
            KeepReason.INFLIGHT_LAUNCH,
            "a launch of the run may be in flight; resume the run to settle it",
            inflight,
        )
    live = [r for r in served if r.live]
    if live:  # rule 2: issue 16, a live run still needs it
        return _keep(
            cache,
            KeepReason.LIVE_RUN,
            "the run is not terminal in the journal; cancel it and wait until it is",
            live,
        )
    locked = [r for r in served if r.locked]
    if locked:  # rule 3: faults.md, another npa process works on the run now
        return _keep(cache, KeepReason.LOCKED, "another npa process holds the run's lock", locked)
    by_path = {s.path: s for s in states}
    if cache.kind is CacheKind.TASK_YAML:  # rule 4: issue 24, the queue knows the live jobs
        kept = _job_rule(cache, by_path.get(cache.state_dir or ""))
        if kept is not None:
            return kept
    if cache.kind is CacheKind.STATE_DIR:  # rule 5: skypilot-0.12.md §7.2
        kept = _state_rule(cache, by_path.get(cache.path))
        if kept is not None:
            return kept
    if scoped and cache.kind in _SHARED:  # rule 6: issue 16, other stacks' caches stay
        return _keep(
            cache,
            KeepReason.SHARED,
            "every stack shares it and only the selection was observed: npa cleanup --yes "
            "without -s/-p judges it against every state directory",
        )
    if cache.kind is CacheKind.SKYPILOT_VENV:  # rule 7: cleanup-controller needs sky
        if bootstrap_locked:
            return _keep(
                cache, KeepReason.BOOTSTRAP_RUNNING, "npa skypilot bootstrap holds its lock"
            )
        standing = sorted(s.path for s in states if s.controller is not Controller.GONE)
        if standing:
            return _keep(
                cache,
                KeepReason.CONTROLLER_NOT_GONE,
                "the jobs controller of " + ", ".join(standing) + " is not proven gone, and "
                "cleanup-controller needs this SkyPilot",
            )
    return CacheDecision(cache, Verdict.REMOVE)  # rule 8


def plan(
    caches: Sequence[CacheObservation],
    runs: Sequence[RunObservation],
    states: Sequence[StateObservation],
    *,
    bootstrap_locked: bool = False,
    scope: Scope | None = None,
) -> tuple[CacheDecision, ...]:
    """One decision per cache ``scope`` covers (every cache when None), in their order."""
    chosen = [c for c in caches if scope is None or covers(scope, c)]
    scoped = scope is not None
    return tuple(
        decide(c, runs, states, bootstrap_locked=bootstrap_locked, scoped=scoped) for c in chosen
    )


def runbook(live_runs: Sequence[str], stacks: Sequence[str], selector: str = "") -> list[str]:
    """The guide's teardown order: cancel each run, wait until terminal, then per stack
    cleanup-controller and destroy, then ``npa cleanup --yes``.

    ``selector`` (``-s NAME`` or ``-p ALIAS``, '' for none) is the command's selection,
    repeated on the run commands and the final cleanup.
    """
    given = f" {selector}" if selector else ""
    steps = [f"npa workbench workflow cancel {run}{given} --json" for run in live_runs]
    steps += [f"npa workbench workflow status {run}{given} --watch --json" for run in live_runs]
    steps += [f"npa skypilot cleanup-controller -s {stack} --yes" for stack in stacks]
    steps += [f"npa stack destroy -s {stack} --yes" for stack in stacks]
    steps.append(f"npa cleanup{given} --yes")
    return steps
