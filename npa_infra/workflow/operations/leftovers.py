"""``npa cleanup [--yes]``: what a teardown left behind, and the removal of the local caches.

``cleanup`` observes, then lets ``runs.leftovers`` decide, then (with ``yes``)
removes what the decision allows:

- **caches** (``leftoverfiles``): each with its size; the runs it serves come
  from the journal (non-terminal per ``stack.gate.run_verdict``, the teardown
  gate's own rule), the in-flight launch records (``journal.inflight``) and
  the run locks, which are probed and, when got, held through the removal;
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
``yes`` removes only the caches the decision marks ``remove``.

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
from npa_infra.workflow.operations import leftoverfiles as files
from npa_infra.workflow.operations.cleanupreport import (
    CacheEntry,
    CleanupReport,
    ManagedJob,
    ManagedJobs,
)

if TYPE_CHECKING:
    from npa_infra.projects.models import Selection
    from npa_infra.skypilot.models import QueueRecord
    from npa_infra.workflow.target.services import Services

__all__ = ["CleanupReport", "cleanup"]


# -- observation ------------------------------------------------------------------------


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _cache(kind: plan.CacheKind, path: Path, **kw: str | None) -> plan.CacheObservation:
    return plan.CacheObservation(kind, str(path), files.size_of(path), **kw)


def _home_caches(home: Path) -> list[plan.CacheObservation]:
    found = [
        _cache(plan.CacheKind.RENDERED_YAML, p, run_id=p.name) for p in _children(home / "rendered")
    ]
    for kind, name in ((plan.CacheKind.PROBE_CACHE, "image-pull-probe.json"),
                       (plan.CacheKind.GATE_CACHE, "skypilot-gate.json")):  # fmt: skip
        path = home / "cache" / name
        if path.is_file():
            found.append(_cache(kind, path))
    link, versions, _ = files.venv_paths(home)
    if link.is_symlink() or link.exists() or versions.exists():
        size = sum(files.size_of(p) for p in files.venv_paths(home))
        found.append(plan.CacheObservation(plan.CacheKind.SKYPILOT_VENV, str(link), size))
    return found


def _state_caches(state: Path, home: Path) -> list[plan.CacheObservation]:
    where = str(state)
    found = [
        _cache(plan.CacheKind.TASK_YAML, p, run_id=p.name, state_dir=where)
        for p in _children(state / "submissions")
    ]
    if (state / "supervision").is_dir():
        found.append(_cache(plan.CacheKind.TICK_FILES, state / "supervision", state_dir=where))
    if state.parent == home / "skypilot-state":
        found.append(_cache(plan.CacheKind.STATE_DIR, state, state_dir=where))
    return found


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


def _journal_runs(
    home: Path, locks: files.Locks
) -> tuple[list[plan.RunObservation], list[str], dict[str, RunIdentity]]:
    """The journal's runs (liveness by the teardown gate's rule), the live ids, and whose
    each run is (``leftoverscope.Owner``).

    Raises:
        ConfigError: the journal exists but cannot be read (nothing is judged then).
    """
    from npa_infra.journal.store import Journal, journal_path
    from npa_infra.stack import gate
    from npa_infra.workflow.execution import adapters

    if not journal_path(home).exists():
        return [], [], {}
    journal = Journal.open(home)
    try:
        rows = {r.run_id: r for r in journal.runs()}
        verdicts = {o.run_id: gate.run_verdict(o) for o in gate.observe(journal)}
    finally:
        journal.close()
    found, live, owners = [], [], {}
    for run_id, row in rows.items():
        owners[run_id] = RunIdentity.of(row.stack, row.data)
        state = adapters.recorded_state_dir(row.data)
        active = verdicts.get(run_id) is gate.RunVerdict.ACTIVE
        paths = [home / "locks" / (row.stack or "default") / f"{run_id}.lock"]
        if state:
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
    return found, live, owners


def _controller(
    state: Path, env: Mapping[str, str], services: Services
) -> tuple[plan.Controller, ManagedJobs]:
    """One all-users queue read of ``state``; only an answer proves anything (faults.md 4)."""
    from npa_infra.skypilot import isolation, livegate
    from npa_infra.skypilot.models import QueueVerdict

    isolated = isolation.IsolatedDir(state)
    where = str(state)
    if not isolated.user_id_file.is_file() and not env.get("SKYPILOT_USER_ID"):
        # no controller identity was ever generated here, so no controller was ever named
        return plan.Controller.GONE, ManagedJobs(state_dir=where, verdict="never_used")
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
        return plan.Controller.UNKNOWN, ManagedJobs(
            state_dir=where, verdict="unknown", detail=exc.message
        )
    if answer.verdict is QueueVerdict.VERIFIED_EMPTY:
        return plan.Controller.GONE, ManagedJobs(state_dir=where, verdict="no_controller")
    if answer.verdict is not QueueVerdict.RECORDS:
        return plan.Controller.UNKNOWN, ManagedJobs(
            state_dir=where, verdict="unknown", detail=answer.detail or answer.error_kind.value
        )
    jobs = {}
    for row in answer.records:
        status = answer.status_of(row.job_id)
        if status is not None and not status.terminal:
            jobs[row.job_id] = ManagedJob(
                id=row.job_id, name=row.job_name, user=_user(row), status=status.value
            )
    listed = [jobs[k] for k in sorted(jobs)]
    return plan.Controller.UP, ManagedJobs(state_dir=where, verdict="records", jobs=listed)


def _user(row: QueueRecord) -> str:
    # ``user_name`` is what an all-users read lists (skypilot-0.12.md §3.2); the hash otherwise
    return str(getattr(row, "user_name", None) or row.user_hash or "?")


def _state_dirs(home: Path, env: Mapping[str, str], extra: set[str]) -> list[Path]:
    from npa_infra.skypilot import isolation

    known = {str(p) for p in _children(home / "skypilot-state")} | extra
    try:
        configured = isolation.resolve_isolated_dir(None, env, npa_config.load_config(env), None)
        if configured.root.is_dir():
            known.add(str(configured.root))
    except NpaError:
        pass  # an unusable configuration names no directory of its own
    return [Path(p) for p in sorted(known) if Path(p).is_dir()]


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
    try:
        runs, live, owners = _journal_runs(home, locks)
        projects = leftoverstacks.projects(env, scope)
        entry_dirs = {p.state_dir for p in projects if p.state_dir}
        dirs = {r.state_dir for r in runs if r.state_dir} | entry_dirs
        covered: plan.Scope | None = None
        if scope is not None:
            own, problems = leftoverscope.own_state_dirs(scope, env, services, project_root)
            covered = leftoverscope.cover(scope, owners, runs, own | entry_dirs)
            live = [run for run in live if run in covered.runs]
            dirs |= covered.state_dirs
        caches = _home_caches(home)
        states: list[plan.StateObservation] = []
        managed: list[ManagedJobs] = []
        for state in _state_dirs(home, env, dirs):
            runs += _lock_runs(state, locks)  # every directory: its runs' locks stay observed
            if covered is not None and str(state) not in covered.state_dirs:
                continue
            caches += _state_caches(state, home)
            controller, jobs = _controller(state, env, services)
            managed.append(jobs)
            owner = _owner(state)
            down = inflight.controller_down(state) is not None
            states.append(plan.StateObservation(str(state), controller, owner, down))
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
        targets = [Path(decision.cache.path)]
        if decision.cache.kind is plan.CacheKind.SKYPILOT_VENV:
            targets = list(files.venv_paths(Path(decision.cache.path).parent))
        try:
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
