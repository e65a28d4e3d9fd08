"""The local caches ``npa cleanup`` observes, each with what proves npa made it (issue 24).

Where each cache lies is listed in ``leftoverfiles``. This module looks there
without ever passing through a symlink: a symlinked root (``$NPA_HOME/rendered``,
``skypilot-state``, ``cache``, the venv's versions directory, a state directory,
its ``submissions`` or ``supervision``), or a symlinked entry inside one, is not
looked into, and is reported in ``skipped``; so is a state directory named by a
relative path (it would be resolved against the directory cleanup runs in).

Each cache carries its ``runs.leftovers.Proof``: npa's marker in the directory
(``localstate.marker``); a journaled run id (``Journaled``: a rendered YAML of
a journaled run or plan, a task YAML of a run journaled in that state
directory, a state directory a journaled run used); or, for the files npa
names itself in its own home (the probe and drift-gate caches, the venv), that
name. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from npa_infra.localstate import marker
from npa_infra.runs import leftovers as plan
from npa_infra.workflow.operations import leftoverfiles as files
from npa_infra.workflow.operations.cleanupreport import SkippedPath

__all__ = ["Journaled", "home_caches", "home_state_dirs", "state_caches", "usable_state_dir"]

_LINK = "a symlink: cleanup never looks into (or removes through) a link"


@dataclass(frozen=True, slots=True)
class Journaled:
    """What the journal proves npa made: its run and plan ids, and the runs' state dirs."""

    run_ids: frozenset[str] = frozenset()
    run_dirs: frozenset[tuple[str, str]] = frozenset()  # (run id, its recorded state dir)

    @property
    def state_dirs(self) -> frozenset[str]:
        return frozenset(d for _, d in self.run_dirs)


def _linked(path: Path, skipped: list[SkippedPath]) -> bool:
    if not path.is_symlink():
        return False
    skipped.append(SkippedPath(path=str(path), reason="symlink", detail=_LINK))
    return True


def _children(directory: Path, skipped: list[SkippedPath]) -> list[Path]:
    """The subdirectories of ``directory``; a symlinked one, or root, is skipped and said so."""
    if _linked(directory, skipped):
        return []
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return []
    return [p for p in entries if not _linked(p, skipped) and p.is_dir()]


def _cache(
    kind: plan.CacheKind, path: Path, proof: plan.Proof, **kw: str | None
) -> plan.CacheObservation:
    return plan.CacheObservation(kind, str(path), files.size_of(path), proof=proof, **kw)


def _proof(directory: Path, journaled: bool) -> plan.Proof:
    if marker.holds(directory):
        return plan.Proof.MARKER
    return plan.Proof.JOURNAL if journaled else plan.Proof.NONE


def home_caches(
    home: Path, journaled: Journaled, skipped: list[SkippedPath]
) -> list[plan.CacheObservation]:
    """The rendered YAML, the probe and drift-gate caches and the venv under ``home``."""
    found = [
        _cache(plan.CacheKind.RENDERED_YAML, p, _proof(p, p.name in journaled.run_ids),
               run_id=p.name)
        for p in _children(home / "rendered", skipped)
    ]  # fmt: skip
    cache = home / "cache"
    if not _linked(cache, skipped):
        for kind, name in ((plan.CacheKind.PROBE_CACHE, "image-pull-probe.json"),
                           (plan.CacheKind.GATE_CACHE, "skypilot-gate.json")):  # fmt: skip
            path = cache / name
            if not _linked(path, skipped) and path.is_file():
                found.append(_cache(kind, path, plan.Proof.NPA_NAME))
    link, versions, _ = files.venv_paths(home)
    if _linked(versions, skipped):
        return found  # the venv's builds lie behind a link: none of it is judged
    if link.is_symlink() or link.exists() or versions.exists():
        size = sum(files.size_of(p) for p in files.venv_paths(home))
        venv = plan.CacheObservation(
            plan.CacheKind.SKYPILOT_VENV, str(link), size, proof=plan.Proof.NPA_NAME
        )
        found.append(venv)
    return found


def state_caches(
    state: Path, home: Path, journaled: Journaled, skipped: list[SkippedPath]
) -> list[plan.CacheObservation]:
    """A state directory's task YAML and tick files, and the directory itself when it lies
    in ``$NPA_HOME/skypilot-state``; ``state`` passed ``usable_state_dir``."""
    where = str(state)
    found = [
        _cache(plan.CacheKind.TASK_YAML, p, _proof(p, (p.name, where) in journaled.run_dirs),
               run_id=p.name, state_dir=where)
        for p in _children(state / "submissions", skipped)
    ]  # fmt: skip
    ticks = state / "supervision"
    if not _linked(ticks, skipped) and ticks.is_dir():
        found.append(
            _cache(plan.CacheKind.TICK_FILES, ticks, _proof(ticks, False), state_dir=where)
        )
    if state.parent == home / "skypilot-state":
        proof = _proof(state, where in journaled.state_dirs)
        found.append(_cache(plan.CacheKind.STATE_DIR, state, proof, state_dir=where))
    return found


def home_state_dirs(home: Path, skipped: list[SkippedPath]) -> list[Path]:
    """The state directories under ``$NPA_HOME/skypilot-state`` (none behind a link)."""
    return _children(home / "skypilot-state", skipped)


def usable_state_dir(raw: str, home: Path, skipped: list[SkippedPath]) -> Path | None:
    """``raw`` as a state directory cleanup may look into, or None (skipped, said so):
    not absolute, a symlink, or under the npa home through a symlinked level."""
    path = Path(raw)
    if not path.is_absolute():
        detail = "a relative path names no one directory: npa configure -p ALIAS --state-dir /ABS"
        skipped.append(SkippedPath(path=raw, reason="relative", detail=detail))
        return None
    levels = [path]
    if path.is_relative_to(home):
        levels = [home / Path(*path.relative_to(home).parts[:n])
                  for n in range(1, len(path.relative_to(home).parts) + 1)]  # fmt: skip
    for level in levels:
        if level.is_symlink():
            skipped.append(SkippedPath(path=str(level), reason="symlink", detail=_LINK))
            return None
    return path if path.is_dir() else None
