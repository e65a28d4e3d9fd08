"""``npa configure``: create or update a project, its credentials and release namespace (issue 17).

A project (``projects.record.Project``, ``$NPA_HOME/projects/<alias>.yaml``)
binds an alias to a stack, or to a context, namespace and SkyPilot state
directory. ``configure`` merges what the request gives into the entry (a
field not given keeps its value; a new binding replaces the old one), stores
the credentials, then writes the entry, so a refused request changes nothing.
The entry's lock is held from its read to its write (``store.locked``), so
concurrent runs for one alias apply one after the other and none is lost
(issue 24). A ``--state-dir`` must be an absolute path of a directory that is
absent, empty or npa's own (``projects.statedir``); it is created and marked
just before the entry is written.

Credentials are stored, by ``store``:

- ``file`` (the default without a stack): ``$NPA_HOME/credentials/projects/<alias>.env``,
  0600 in 0700, atomic (``projects.credentials``);
- ``stack`` (the default for a stack-backed project): the stack's secret config
  ``npa-credentials:NAME``, through the Pulumi engine (``stack.api.set_secret_config``:
  the value reaches the engine on its stdin, never its argv). Without a ``pulumi``
  binary this is refused (exit 3) with ``--store file`` as the alternative.

Reports name each credential and where it is stored, never its value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from npa_infra.errors import ConfigError, EngineUnavailableError, UsageError
from npa_infra.projects import credentials as project_credentials
from npa_infra.projects import statedir, store
from npa_infra.projects.models import DEFAULT_RELEASE_NAMESPACE
from npa_infra.projects.record import Project
from npa_infra.projects.resolve import EntryState
from npa_infra.workflow.target.services import Services

__all__ = [
    "ConfigureReport",
    "ConfigureRequest",
    "ConfigureStatus",
    "CredentialInput",
    "CredentialRow",
    "ProjectView",
    "ShowReport",
    "Store",
    "configure",
    "show",
]


class ConfigureStatus(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class Store(StrEnum):
    FILE = "file"
    STACK = "stack"


@dataclass(frozen=True, slots=True)
class CredentialInput:
    """One credential to store; ``origin`` says where the CLI read it (never the value)."""

    name: str
    value: SecretStr
    origin: str  # environment | file | stdin | prompt


@dataclass(frozen=True, slots=True)
class ConfigureRequest:
    alias: str
    stack: str | None = None
    context: str | None = None
    namespace: str | None = None
    state_dir: str | None = None
    release_namespace: str | None = None
    credentials: Sequence[CredentialInput] = ()
    store: Store | None = None  # None: stack for a stack-backed project, else file
    project_root: Path = field(default_factory=Path.cwd)


class CredentialRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    store: Store
    location: str  # the file, or pulumi:<stack> (its secret config npa-credentials:NAME)
    input: str | None = None  # where this invocation read it; None: stored earlier


class ProjectView(BaseModel):
    """A project's non-secret fields and its credentials' names and places."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str
    stack: str | None
    context: str | None
    namespace: str | None
    state_dir: str | None
    release_namespace: str
    entry_path: str | None  # None: no entry (the stack of that name is the project)
    credentials: list[CredentialRow]


class ConfigureReport(ProjectView):
    status: ConfigureStatus

    @property
    def exit_code(self) -> int:
        return 0


class ShowReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    status: str = "ok"
    projects: list[ProjectView]

    @property
    def exit_code(self) -> int:
        return 0


def _existing(alias: str, env: Mapping[str, str]) -> Project | None:
    entry = store.load(alias, env)
    if entry.state is EntryState.UNREADABLE:
        raise ConfigError(
            f"project {alias}'s entry {entry.path} cannot be read: {entry.problem}",
            remedy=f"fix or remove {entry.path}, then rerun npa configure",
        )
    return entry.project


def _stack_exists(name: str, root: Path) -> bool:
    from npa_infra.stack import config as stack_config

    try:
        return stack_config.stack_file_path(name, root).is_file()
    except ConfigError:
        return False


def _merged(request: ConfigureRequest, old: Project | None) -> Project:
    """The entry after the request: a new binding replaces the old one; the rest is kept."""
    if request.stack and (request.context or request.namespace or request.state_dir):
        raise UsageError(
            "--stack and --context/--namespace/--state-dir are two bindings: give one",
            remedy="a stack names its own context and namespace; pass only --stack NAME",
        )
    base = old or Project(alias=request.alias)
    binding: dict[str, str | None] = {}
    if request.stack:
        binding = {"stack": request.stack, "context": None, "namespace": None, "state_dir": None}
    elif request.context:
        binding = {"stack": None, "context": request.context}
    if request.namespace is not None:
        binding["namespace"] = request.namespace or None
    if request.state_dir is not None:
        binding["state_dir"] = statedir.check_text(request.state_dir)
    project = base.model_copy(update=binding)
    if request.release_namespace is not None:
        release = request.release_namespace.strip().rstrip("/") or DEFAULT_RELEASE_NAMESPACE
        project = project.model_copy(update={"release_namespace": release})
    if (
        project.stack is None
        and project.context is None
        and _stack_exists(request.alias, request.project_root)
    ):
        project = project.model_copy(update={"stack": request.alias})  # a stack is its own project
    if project.stack is not None and (project.namespace or project.state_dir):
        raise UsageError(
            f"project {request.alias} is bound to stack {project.stack}: --namespace and "
            "--state-dir belong to a context binding",
            remedy=f"pass --context CTX to bind {request.alias} to a context instead",
        )
    return Project.model_validate(project.model_dump())  # validated as a whole


def _check_target(project: Project, root: Path) -> None:
    from npa_infra.projects import selection

    if project.stack is None and project.context is None:
        raise UsageError(
            f"project {project.alias} binds nothing",
            remedy=f"npa configure -p {project.alias} --stack NAME, or --context CTX "
            "[--namespace NS] [--state-dir DIR]",
        )
    if project.stack is not None and not _stack_exists(project.stack, root):
        known = ", ".join(selection.known_stacks(root)) or "none"
        raise ConfigError(
            f"stack {project.stack} has no file stacks/Pulumi.{project.stack}.yaml under {root} "
            f"(stacks: {known})",
            remedy="run npa configure from the project root, or pass an existing --stack",
        )


def _store_credentials(
    project: Project,
    request: ConfigureRequest,
    env: Mapping[str, str],
    services: Services,
) -> Store:
    from npa_infra.stack import api, credentialkeys

    chosen = request.store or (Store.STACK if project.stack else Store.FILE)
    if chosen is Store.STACK and project.stack is None:
        raise UsageError(
            f"--store stack needs a stack-backed project; {project.alias} binds context "
            f"{project.context}",
            remedy="drop --store (the file store is used), or bind the project with --stack",
        )
    values = {c.name: c.value for c in request.credentials}
    for name, value in values.items():
        if not project_credentials.valid_name(name):
            raise UsageError(
                f"{name!r} is not a credential name",
                remedy="use the environment variable name submit passes: letters, digits, '_'",
            )
        project_credentials.check_value(name, value)
    if not values:
        return chosen
    if chosen is Store.FILE:
        project_credentials.write(project.alias, env, values)
        return chosen
    assert project.stack is not None  # checked above
    keyed = {credentialkeys.key(name): value for name, value in values.items()}
    stack_request = api.StackRequest(stack=project.stack, project_root=request.project_root)
    try:
        api.set_secret_config(stack_request, keyed, env=env, engine_factory=services.stack_engine)
    except EngineUnavailableError as exc:
        raise EngineUnavailableError(
            f"{exc.message}: project {project.alias}'s credentials go to stack "
            f"{project.stack}'s secret config through the Pulumi engine",
            remedy=f"{exc.remedy}; or store them in a 0600 file instead: add --store file",
            details=exc.details,
        ) from exc
    return chosen


def _rows(
    project: Project, env: Mapping[str, str], root: Path, given: Mapping[str, str]
) -> list[CredentialRow]:
    from npa_infra.stack import credentialkeys

    path = project_credentials.path_for(project.alias, env)
    rows = {
        name: CredentialRow(name=name, store=Store.FILE, location=str(path))
        for name in project_credentials.read_pairs(path)
    }
    if project.stack:
        for name in credentialkeys.names(project.stack, root):
            rows[name] = CredentialRow(
                name=name, store=Store.STACK, location=f"pulumi:{project.stack}"
            )
    return [row.model_copy(update={"input": given.get(name)}) for name, row in sorted(rows.items())]


def _view(project: Project, entry: Path | None, rows: list[CredentialRow]) -> dict[str, object]:
    return {
        **project.model_dump(),
        "entry_path": str(entry) if entry else None,
        "credentials": rows,
    }


def configure(
    request: ConfigureRequest, env: Mapping[str, str], services: Services | None = None
) -> ConfigureReport:
    """Create or update ``request.alias``'s project and store its credentials.

    Raises:
        UsageError: two bindings at once, no binding, a bad credential name, or
            ``--store stack`` without a stack.
        ConfigError: an unreadable entry, an unknown stack, a value the store cannot hold.
        EngineUnavailableError: the stack store without a ``pulumi`` binary (exit 3).
    """
    given = services or Services()
    with store.locked(request.alias, env):
        old = _existing(request.alias, env)
        project = _merged(request, old)
        _check_target(project, request.project_root)
        new_dir = project.state_dir if old is None or project.state_dir != old.state_dir else None
        if new_dir is not None:
            statedir.check_dir(Path(new_dir))
        _store_credentials(project, request, env, given)
        changed = old != project
        if new_dir is not None:
            statedir.claim(Path(new_dir))
        path = (
            store.write(project, env)
            if changed or old is None
            else store.entry_path(project.alias, env)
        )
    if old is None:
        status = ConfigureStatus.CREATED
    elif changed or request.credentials:
        status = ConfigureStatus.UPDATED
    else:
        status = ConfigureStatus.UNCHANGED
    origins = {c.name: c.origin for c in request.credentials}
    rows = _rows(project, env, request.project_root, origins)
    return ConfigureReport.model_validate({"status": status, **_view(project, path, rows)})


def show(alias: str | None, env: Mapping[str, str], root: Path) -> ShowReport:
    """The projects (one, or every entry), their non-secret fields and credential names.

    Raises:
        ProjectError: ``alias`` names neither an entry nor a stack.
        ConfigError: an unreadable entry or an unsafe credentials file.
    """
    from npa_infra.projects import selection

    if alias is not None:
        aliases: tuple[str, ...] = (alias,)
        selection.select(stack=None, project=alias, env=env, root=root)  # unknown: refused
    else:
        aliases = store.known_aliases(env)
    views: list[ProjectView] = []
    for name in aliases:
        project = _existing(name, env)
        entry = store.entry_path(name, env) if project is not None else None
        project = project or Project(alias=name, stack=name)  # the stack of that name
        rows = _rows(project, env, root, {})
        views.append(ProjectView.model_validate(_view(project, entry, rows)))
    return ShowReport(projects=views)
