"""``npa cleanup [--yes]``: what a teardown left behind, and the removal of the local caches.

``cleanup`` observes, then lets ``runs.leftovers`` decide, then (with ``yes``)
removes what the decision allows:

- **caches** (``leftoverfiles``, observed by ``leftovercaches``): each with its
  size and what proves npa made it; the runs it serves come from the journal
  (non-terminal per ``stack.gate.run_verdict``, the teardown gate's own rule),
  the in-flight launch records (``journal.inflight``) and the run locks, which
  are probed and, when got, held through the removal; a symlinked root or a
  relative state directory is not looked into (``skipped``);
- **stacks** (``stacks/Pulumi.<name>.yaml``), **projects** (``$NPA_HOME/projects``)
  and **credentials** files (``$NPA_HOME/credentials/<stack>.env``), by name:
  a credentials file is read for its variable names only, never its values;
- **managed jobs** per known SkyPilot state directory (those under the npa
  home, those the journal's runs and the projects record, the configured
  one): one ``sky jobs queue --all --all-users`` read behind the drift gate.
  Only an answer proves anything: an unreadable queue is ``unknown``, never empty;
- **cluster resources** the project's own commands created: per stack its
  namespaces (unless adopted) and ServiceAccounts, from the stack's outputs
  (or the stack file when the engine is not there, said so in
  ``created_by``), and the probe pods the probe ledger still records;
- the **runbook** in the guide's order.

Nothing but the queue reads goes to SkyPilot, nothing to the cluster, and
``yes`` removes only the caches the decision marks ``remove``: the whole tree
when npa's marker or name proves it, only the YAML files npa writes when only
the journal does (``runs.leftovers.Removal``). An unreadable journal stops
the command before anything is judged (ConfigError).

With a ``scope`` (the command's ``-s/--stack`` or ``-p/--project``,
``leftoverscope``) every run is still observed, but only the selection's caches,
state directories (and their queues), entries, resources and live runs are
reported, and the runbook names only its stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra import config as npa_config
from npa_infra.errors import NpaError
from npa_infra.journal import inflight
from npa_infra.journal.lock import STATE_LOCKS
from npa_infra.projects.models import RunIdentity
from npa_infra.runs import leftovers as plan
from npa_infra.workflow.operations import leftovercaches as observed
from npa_infra.workflow.operations import leftoverfiles as files
from npa_infra.workflow.operations.cleanupreport import (
    CacheEntry,
    CleanupReport,
    ManagedJob,
    ManagedJobs,
    SkippedPath,
)

if TYPE_CHECKING:
    from npa_infra.projects.models import Selection
    from npa_infra.skypilot.models import QueueRecord
    from npa_infra.workflow.target.services import Services

__all__ = ["CleanupReport", "cleanup"]


# -- observation ------------------------------------------------------------------------


def _lock_runs(state: Path, locks: files.Locks) -> list[plan.RunObservation]:
    """Runs known only from the state directory: its lock files and in-flight records."""
    found: list[plan.RunObservation] = []
    launches = state / STATE_LOCKS / "launches"
    try:
        records = sorted(launches.glob("*.inflight.json"))
    except OSError:
        records = []
    for record in records:
        found.append(plan.RunObservation(record.name.removesuffix(".inflight.json"), str(state),
                                         inflight=True))  # fmt: skip
    for kind in ("runs", "launches"):
        for lock in sorted((state / STATE_LOCKS / kind).glob("*.lock")):
            run_id = lock.name.removesuffix(".lock")
            found.append(plan.RunObservation(run_id, str(state), locked=locks.probe(lock)))
    return found


JournalRuns = tuple[
    list[plan.RunObservation],
    list[str],
    dict[str, RunIdentity],
    observed.Journaled,
]


def _journal_runs(home: Path, locks: files.Locks) -> JournalRuns:
    """The journal's runs (liveness by the teardown gate's rule), the live ids, whose each
    run is (``leftoverscope.Owner``), and what the journal proves npa made.

    Raises:
        ConfigError: the journal exists but cannot be read (nothing is judged then).
    """
    from npa_infra.journal.store import Journal, present
    from npa_infra.stack import gate
    from npa_infra.workflow.execution import adapters

    if not present(home):
        return [], [], {}, observed.Journaled()
    journal = Journal.open(home)  # refuses an empty, foreign or unknown file (issue 24)
    try:
        rows = {r.run_id: r for r in journal.runs()}
        plans = {p.run_id for p in journal.plans()}
        verdicts = {o.run_id: gate.run_verdict(o) for o in gate.observe(journal)}
    finally:
        journal.close()
    found, live, owners, dirs = [], [], {}, set()
    for run_id, row in rows.items():
        owners[run_id] = RunIdentity.of(row.stack, row.data)
        state = adapters.recorded_state_dir(row.data)
        active = verdicts.get(run_id) is gate.RunVerdict.ACTIVE
        paths = [home / "locks" / (row.stack or "default") / f"{run_id}.lock"]
        if state:
            dirs.add((run_id, state))
            paths += [
                Path(state) / STATE_LOCKS / k / f"{run_id}.lock" for k in ("runs", "launches")
            ]
            with_record = inflight.inflight_path(Path(state), run_id).exists()
        else:
            with_record = False
        found.append(plan.RunObservation(run_id, state, live=active, inflight=with_record,
                                         locked=locks.any_busy(paths)))  # fmt: skip
        if active:
            live.append(run_id)
    journaled = observed.Journaled(frozenset(rows) | plans, frozenset(dirs))
    return found, live, owners, journaled


Controlled = tuple[plan.Controller, ManagedJobs, tuple[str, ...]]


def _controller(state: Path, env: Mapping[str, str], services: Services) -> Controlled:
    """One all-users queue read of ``state``; only an answer proves anything (faults.md 4).
    Also the names of the jobs it lists as not terminal (a job whose status it does not
    know counts as live)."""
    from npa_infra.skypilot import isolation, livegate
    from npa_infra.skypilot.models import QueueVerdict

    isolated = isolation.IsolatedDir(state)
    where = str(state)
    if not isolated.user_id_file.is_file() and not env.get("SKYPILOT_USER_ID"):
        # no controller identity was ever generated here, so no controller was ever named
        return plan.Controller.GONE, ManagedJobs(state_dir=where, verdict="never_used"), ()
    try:
        sky = services.sky(isolated, env, None)
        binary = getattr(sky, "binary", None) if services.real_sky() else None
        livegate.enforce(
            binary,
            env,
            sky_env=isolated.environment(env) if binary else None,
            probes=livegate.Probes(port_check=services.api_ports),
        )
        answer = sky.queue(all_users=True)
    except NpaError as exc:
        unknown = ManagedJobs(state_dir=where, verdict="unknown", detail=exc.message)
        return plan.Controller.UNKNOWN, unknown, ()
    if answer.verdict is QueueVerdict.VERIFIED_EMPTY:
        return plan.Controller.GONE, ManagedJobs(state_dir=where, verdict="no_controller"), ()
    if answer.verdict is not QueueVerdict.RECORDS:
        detail = answer.detail or answer.error_kind.value
        return plan.Controller.UNKNOWN, ManagedJobs(state_dir=where, verdict="unknown",
                                                    detail=detail), ()  # fmt: skip
    jobs, names = {}, []
    for row in answer.records:
        status = answer.status_of(row.job_id)
        if status is None or not status.terminal:
            names.append(row.job_name)
        if status is not None and not status.terminal:
            jobs[row.job_id] = ManagedJob(
                id=row.job_id, name=row.job_name, user=_user(row), status=status.value
            )
    listed = [jobs[k] for k in sorted(jobs)]
    managed = ManagedJobs(state_dir=where, verdict="records", jobs=listed)
    return plan.Controller.UP, managed, tuple(sorted(set(names)))


def _user(row: QueueRecord) -> str:
    # ``user_name`` is what an all-users read lists (skypilot-0.12.md §3.2); the hash otherwise
    return str(getattr(row, "user_name", None) or row.user_hash or "?")


def _state_dirs(
    home: Path, env: Mapping[str, str], extra: set[str], skipped: list[SkippedPath]
) -> list[Path]:
    from npa_infra.skypilot import isolation

    known = {str(p) for p in observed.home_state_dirs(home, skipped)} | extra
    try:
        configured = isolation.resolve_isolated_dir(None, env, npa_config.load_config(env), None)
        known.add(str(configured.root))
    except NpaError:
        pass  # an unusable configuration names no directory of its own
    usable = (observed.usable_state_dir(p, home, skipped) for p in sorted(known))
    return sorted({p for p in usable if p is not None})


# -- the command ------------------------------------------------------------------------


def cleanup(
    *,
    env: Mapping[str, str],
    yes: bool,
    project_root: Path | None = None,
    services: Services | None = None,
    remove: Callable[[Path], None] = files.remove_path,
    scope: Selection | None = None,
) -> CleanupReport:
    """Report the leftovers; with ``yes`` remove the local caches the plan allows.

    ``scope``: only that selection's part (the module docstring); None: everything.
    ``remove`` replaces the file removal in tests (a failure injection point).

    Raises:
        ConfigError: the journal exists but cannot be read.
    """
    from npa_infra.workflow.operations import leftoverscope, leftoverstacks
    from npa_infra.workflow.target.services import Services as RealServices

    services = services or RealServices()
    home = npa_config.npa_home(env)
    locks = files.Locks()
    problems: list[str] = []
    skipped: list[SkippedPath] = []
    try:
        runs, live, owners, journaled = _journal_runs(home, locks)
        projects = leftoverstacks.projects(env, scope)
        entry_dirs = {p.state_dir for p in projects if p.state_dir}
        dirs = {r.state_dir for r in runs if r.state_dir} | entry_dirs
        covered: plan.Scope | None = None
        if scope is not None:
            own, problems = leftoverscope.own_state_dirs(scope, env, services, project_root)
            covered = leftoverscope.cover(scope, owners, runs, own | entry_dirs)
            live = [run for run in live if run in covered.runs]
            dirs |= covered.state_dirs
        caches = observed.home_caches(home, journaled, skipped)
        states: list[plan.StateObservation] = []
        managed: list[ManagedJobs] = []
        for state in _state_dirs(home, env, dirs, skipped):
            runs += _lock_runs(state, locks)  # every directory: its runs' locks stay observed
            if covered is not None and str(state) not in covered.state_dirs:
                continue
            caches += observed.state_caches(state, home, journaled, skipped)
            controller, jobs, live_jobs = _controller(state, env, services)
            managed.append(jobs)
            down = inflight.controller_down(state) is not None
            states.append(
                plan.StateObservation(str(state), controller, _owner(state), down, live_jobs)
            )
        bootstrap = locks.probe(home / files.BOOTSTRAP_LOCK)
        decisions = plan.plan(caches, runs, states, bootstrap_locked=bootstrap, scope=covered)
        entries, errors = _apply(decisions, yes, remove)
    finally:
        locks.release()
    stacks = leftoverstacks.stacks(project_root, scope)
    resources, unread = leftoverstacks.cluster_resources(
        stacks, home, env, project_root, services, scope
    )
    selector = leftoverscope.selector(scope) if scope is not None else ""
    return CleanupReport(
        status="cleaned" if yes else "report",
        caches=entries,
        skipped=list({(s.path, s.reason): s for s in skipped}.values()),
        stacks=stacks,
        projects=projects,
        credentials=leftoverstacks.credentials(home, scope),
        managed_jobs=managed,
        cluster_resources=resources,
        runbook=plan.runbook(live, [s.name for s in stacks], selector),
        errors=problems + errors + unread,
    )


def _owner(state: Path) -> str | None:
    from npa_infra.skypilot import isolation

    try:
        return isolation.IsolatedDir(state).owner()
    except OSError:
        return "?"  # unreadable: treated as claimed, never as free


def _apply(
    decisions: tuple[plan.CacheDecision, ...], yes: bool, remove: Callable[[Path], None]
) -> tuple[list[CacheEntry], list[str]]:
    errors: list[str] = []
    removed: set[str] = set()
    # nested caches first, so a state directory's own entry is removed last
    for decision in sorted(decisions, key=lambda d: d.cache.kind is plan.CacheKind.STATE_DIR):
        if not (yes and decision.remove):
            continue
        path = Path(decision.cache.path)
        try:
            if decision.removal is plan.Removal.NPA_FILES:
                left = files.remove_npa_files(path, remove)
                if left:
                    errors.append(
                        f"kept {path}: it holds files npa did not write ({', '.join(left)}); "
                        "npa removed its own YAML files only"
                    )
                    continue
            else:
                targets = [path]
                if decision.cache.kind is plan.CacheKind.SKYPILOT_VENV:
                    targets = list(files.venv_paths(path.parent))
                for target in targets:
                    remove(target)
            removed.add(decision.cache.path)
        except OSError as exc:
            errors.append(f"could not remove {decision.cache.path}: {exc.strerror or exc}")
    entries = [
        CacheEntry(
            kind=d.cache.kind.value,
            path=d.cache.path,
            bytes=d.cache.bytes,
            needed_by=list(d.needed_by),
            removed=d.cache.path in removed,
            reason=d.reason.value if d.reason else None,
            detail=d.detail,
        )
        for d in decisions
    ]
    return entries, errors
