"""The entries and cluster resources ``npa cleanup`` reports, by name only (issue 16).

- **stacks**: ``stacks/Pulumi.<name>.yaml`` of the project root;
- **projects**: the entries under ``$NPA_HOME/projects`` (``npa_infra.projects.store``);
- **credentials**: ``$NPA_HOME/credentials/<stack>.env``, read for the variable
  names on its ``NAME=value`` lines; the values are never kept, so they cannot
  reach the report;
- **cluster resources**: what ``npa stack up`` created for a stack (its
  namespaces, unless adopted, and its ServiceAccount in each), from the
  stack's outputs; without the Pulumi engine, from the stack file's
  declaration, and ``created_by`` says so; a stack without outputs created
  nothing that still stands. Plus every probe pod the probe ledger
  (``preflight.probe_ledger``) still records: its deletion was never verified.

With a selection (``scope``: the command's ``-s/--stack`` or ``-p/--project``)
each list holds only its part: the selected stack's file, credentials and
resources, the project entry of its alias and those bound to its stack, the
probe pods recorded on its context. Nothing here writes, and nothing reaches
the cluster.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import ConfigError, EngineUnavailableError, NpaError
from npa_infra.workflow.operations.cleanupreport import (
    ClusterResource,
    CredentialsEntry,
    ProjectEntry,
    StackEntry,
)

if TYPE_CHECKING:
    from npa_infra.projects.models import Selection
    from npa_infra.workflow.target.services import Services

__all__ = ["cluster_resources", "credentials", "projects", "stacks"]

_MAX_CREDENTIALS = 1024 * 1024


def _of(scope: Selection | None, stack: str | None, alias: str | None = None) -> bool:
    """Whether an entry of ``stack`` (or project ``alias``) is the selection's."""
    if scope is None:
        return True
    return (alias is not None and alias == scope.project) or bool(
        scope.stack and stack == scope.stack
    )


def stacks(project_root: Path | None, scope: Selection | None = None) -> list[StackEntry]:

    if project_root is None:
        return []
    found = []
    for path in sorted((project_root / "stacks").glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if _of(scope, name):
            found.append(StackEntry(name=name, path=str(path)))
    return found


def projects(env: Mapping[str, str], scope: Selection | None = None) -> list[ProjectEntry]:
    from npa_infra.projects import store

    found = []
    for alias in store.known_aliases(env):
        entry = store.load(alias, env)
        project = entry.project
        if not _of(scope, project.stack if project else None, alias):
            continue
        found.append(
            ProjectEntry(
                alias=alias,
                path=entry.path,
                stack=project.stack if project else None,
                state_dir=project.state_dir if project else None,
                problem=entry.problem or "",
            )
        )
    return found


def _names(path: Path) -> tuple[list[str], str]:
    """The variable names of a credentials file, or why it was not read."""
    try:
        info = path.lstat()
    except OSError as exc:
        return [], f"cannot read it: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return [], "not a regular file (a symlink or special file is never read)"
    if info.st_size > _MAX_CREDENTIALS:
        return [], "larger than 1 MiB, not read"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return [], f"cannot read it: {exc.strerror or exc}"
    names = set()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            names.add(stripped.removeprefix("export ").partition("=")[0].strip())
    return sorted(n for n in names if n), ""


def credentials(home: Path, scope: Selection | None = None) -> list[CredentialsEntry]:

    found = []
    for path in sorted((home / "credentials").glob("*.env")):
        if not _of(scope, path.name.removesuffix(".env")):
            continue  # never opened: another stack's file
        names, problem = _names(path)
        found.append(
            CredentialsEntry(
                stack=path.name.removesuffix(".env"), path=str(path), names=names, problem=problem
            )
        )
    return found


def _stack_resources(
    name: str, root: Path, env: Mapping[str, str], services: Services
) -> list[ClusterResource]:
    """Raises: NpaError: neither the outputs nor the stack file could be read."""
    from npa_infra.stack import api
    from npa_infra.stack import config as stack_config

    cfg = stack_config.load_stack_file(name, root).config
    namespaces, account = list(cfg.namespaces), cfg.service_account
    by = f"npa stack up -s {name}"
    try:
        outputs = api.stack_outputs(
            api.StackRequest(stack=name, project_root=root),
            env=env,
            engine_factory=services.stack_engine,
        )
        namespaces = list(outputs.namespaces or [outputs.namespace])
        account = outputs.service_account
    except EngineUnavailableError:
        by += " (declared in the stack file; the Pulumi engine is not installed)"
    except ConfigError as exc:
        if "has no outputs yet" in exc.message or "does not exist in the backend" in exc.message:
            return []  # never brought up, or destroyed: nothing of it stands
        raise
    found = []
    if not cfg.adopt_namespaces:  # adopted namespaces are the operator's, kept on destroy
        found += [ClusterResource(kind="Namespace", namespace="", name=n, created_by=by)
                  for n in namespaces]  # fmt: skip
    if account:
        found += [ClusterResource(kind="ServiceAccount", namespace=n, name=account, created_by=by)
                  for n in namespaces]  # fmt: skip
    return found


def _probe_pods(home: Path, scope: Selection | None, root: Path | None) -> list[ClusterResource]:
    from npa_infra.workflow.operations import leftoverscope
    from preflight.probe_ledger import LEDGER_DIR, ProbeLedger

    directories = sorted((home / LEDGER_DIR).glob("*"))
    if scope is not None:
        context = leftoverscope.context(scope, root)
        directories = [ProbeLedger(home, context).directory] if context else []
    found = []
    for directory in directories:
        for record in sorted(directory.glob("*.json")):
            namespace, _, pod = record.name.removesuffix(".json").partition(".")
            by = "the pull probe (preflight-images or submit); its deletion was never verified"
            found.append(ClusterResource(kind="Pod", namespace=namespace, name=pod, created_by=by))
    return found


def cluster_resources(
    stack_entries: list[StackEntry],
    home: Path,
    env: Mapping[str, str],
    project_root: Path | None,
    services: Services,
    scope: Selection | None = None,
) -> tuple[list[ClusterResource], list[str]]:
    """What the project's own commands created that may still stand, and what was unreadable."""
    found: list[ClusterResource] = []
    problems: list[str] = []
    for stack in stack_entries:
        if project_root is None:
            break
        try:
            found += _stack_resources(stack.name, project_root, env, services)
        except NpaError as exc:
            problems.append(f"stack {stack.name}: its resources could not be read: {exc.message}")
    return found + _probe_pods(home, scope, project_root), problems
