"""Which leftovers one ``-s/--stack`` or ``-p/--project`` selection covers (issue 16).

``npa cleanup`` with a selection reports, and with ``--yes`` removes, only that
selection's part of a teardown's leftovers; this module turns the
``projects.models.Selection`` into what the report filters on:

- its **runs**: the journal's runs the selection admits (``Selection.admits``,
  the rule status and cancel apply);
- its **state directories**: the project's own ``state_dir``, the stack's
  (``controllercleanup.state_dir``: the stack file's ``stateDir``, else the
  configured or per-stack directory, the one ``cleanup-controller -s`` reads),
  those its runs were launched from, and those of its project entries;
- its **context**, for the probe pods recorded on it.

Its stack, project and credentials entries are filtered by ``leftoverstacks``.

The cache decisions stay in ``runs.leftovers`` (``Scope``, ``covers``, rule 6);
every run of the journal is still observed, so a run of another selection in
a shared state directory keeps what it needs. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import NpaError
from npa_infra.projects.models import RunIdentity
from npa_infra.runs import leftovers as plan

if TYPE_CHECKING:
    from npa_infra.projects.models import Selection
    from npa_infra.workflow.target.services import Services

__all__ = ["Owner", "context", "cover", "own_state_dirs", "selector"]

Owner = RunIdentity  # whose a journal run is: its stack, context, project, state directory


def selector(scope: Selection) -> str:
    """The option that selects ``scope`` again: ``-s NAME`` or ``-p ALIAS``."""
    from npa_infra.projects.models import Origin

    if scope.origin is Origin.STACK or scope.project is None:
        return f"-s {scope.stack}"
    return f"-p {scope.project}"


def own_state_dirs(
    scope: Selection, env: Mapping[str, str], services: Services, root: Path | None
) -> tuple[set[str], list[str]]:
    """The selection's own state directories, and why one could not be named.

    Raises:
        ConfigError: the selected stack has neither a stack file nor a state directory.
    """
    from npa_infra.workflow.operations import controllercleanup

    found: set[str] = set()
    problems: list[str] = []
    if scope.state_dir:
        found.add(str(Path(scope.state_dir).expanduser()))
    if scope.stack:
        try:
            isolated, _ = controllercleanup.state_dir(scope.stack, env, services, root=root)
        except NpaError as exc:
            problems.append(
                f"stack {scope.stack}: its SkyPilot state directory is not known: {exc.message}"
            )
        else:
            # a typo of a stack is refused, never reported as a clean "nothing left"
            controllercleanup.require_known_stack(scope.stack, isolated, services, root)
            found.add(str(isolated.root))
    return found, problems


def cover(
    scope: Selection,
    owners: Mapping[str, Owner],
    runs: list[plan.RunObservation],
    state_dirs: set[str],
) -> plan.Scope:
    """The planner's ``Scope``: the admitted runs, the others, and the state directories."""
    mine = frozenset(run for run, owner in owners.items() if scope.admits(owner))
    recorded = {r.state_dir for r in runs if r.run_id in mine and r.state_dir}
    dirs = frozenset(str(Path(d)) for d in state_dirs | recorded)
    return plan.Scope(dirs, mine, frozenset(owners) - mine)


def context(scope: Selection, root: Path | None) -> str | None:
    """The selection's context (its project's, else its stack file's); None if not known."""
    from npa_infra.projects import selection

    try:
        return selection.context_of(scope, root or Path.cwd())
    except NpaError:
        return None  # no readable stack file: no context to name probe pods by
