"""Where a ``--secret-env NAME`` gets its value: the environment, the project, the stack file.

In order (the guide: "the explicit process environment first, then the
selected project's configured NPA credentials"):

1. the process environment;
2. the selected project's credentials (``ProjectSecrets``): its file
   ``$NPA_HOME/credentials/projects/<alias>.env`` (``projects.credentials``),
   then, for a stack-backed project, its stack's secret config
   ``npa-credentials:NAME`` (``stack.credentialkeys``; names read from the stack
   file without the engine, values decrypted by the engine only when a launch
   needs them);
3. the selected stack's credentials file, ``$NPA_HOME/credentials/<stack>.env``
   (``NAME=value`` lines, mode 0600, not a symlink).

Only names and their source are returned by ``resolve_sources``; values
(``resolve_values``) are read again at launch and never stored, printed or
journaled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import MissingSecretError
from npa_infra.projects import credentials as project_credentials

if TYPE_CHECKING:
    from npa_infra.stack.api import EngineFactory

__all__ = [
    "ProjectSecrets",
    "credentials_path",
    "for_project",
    "overlay",
    "require",
    "resolve_sources",
    "resolve_values",
]


def credentials_path(npa_home: Path, stack: str) -> Path:
    return npa_home / "credentials" / f"{stack}.env"


@dataclass(frozen=True, slots=True)
class ProjectSecrets:
    """Where the selected project's credentials are; holds no value."""

    alias: str
    file: Path
    stack: str | None = None  # the stack whose secret config holds ``stack_names``
    stack_names: frozenset[str] = frozenset()
    # the registry unqualified catalog images resolve from (None: the entry sets none)
    release_namespace: str | None = None
    # names -> their decrypted values (the engine); None: the stack's are never read
    read_stack: Callable[[Sequence[str]], Mapping[str, str]] | None = field(
        default=None, compare=False, repr=False
    )

    def stack_label(self) -> str:
        return f"pulumi:{self.stack}"


def for_project(
    alias: str | None,
    env: Mapping[str, str],
    *,
    root: Path,
    engine_factory: EngineFactory | None = None,
) -> ProjectSecrets | None:
    """The credentials of project ``alias`` (None: no project selected).

    A project entry binds its stack; with no entry, the stack of that name is the
    project when its file exists (``projects.resolve`` rule 6).

    Raises:
        ConfigError: the entry is unreadable, or the stack file is not YAML.
    """
    if alias is None:
        return None
    # imported only with a project: the store reads entries through pydantic (issue 19)
    from npa_infra.errors import ConfigError
    from npa_infra.projects import store
    from npa_infra.projects.resolve import EntryState
    from npa_infra.stack import config as stack_config
    from npa_infra.stack import credentialkeys

    entry = store.load(alias, env)
    if entry.state is EntryState.UNREADABLE:
        raise ConfigError(
            f"project {alias}'s entry {entry.path} cannot be read: {entry.problem}",
            remedy=f"fix or remove {entry.path}",
        )
    stack = entry.project.stack if entry.project is not None else None
    if entry.project is None:
        try:
            stack = alias if stack_config.stack_file_path(alias, root).is_file() else None
        except ConfigError:
            stack = None
    names = credentialkeys.names(stack, root) if stack else frozenset()

    def read(wanted: Sequence[str]) -> Mapping[str, str]:
        from npa_infra.stack import api

        assert stack is not None  # only called for names the stack holds
        keys = [credentialkeys.key(n) for n in wanted]
        found = api.secret_config(
            api.StackRequest(stack=stack, project_root=root),
            keys,
            env=env,
            engine_factory=engine_factory,
        )
        prefix = f"{credentialkeys.NAMESPACE}:"
        return {k.removeprefix(prefix): v.get_secret_value() for k, v in found.items()}

    return ProjectSecrets(
        alias=alias,
        file=project_credentials.path_for(alias, env),
        stack=stack,
        stack_names=names,
        read_stack=read if names else None,
        release_namespace=entry.project.release_namespace if entry.project else None,
    )


def _names_in(path: Path) -> set[str]:
    return set(_pairs_in(path))


def _pairs_in(path: Path) -> dict[str, str]:
    return project_credentials.read_pairs(path)  # one reader of the NAME=value format


def resolve_values(
    names: Sequence[str],
    env: Mapping[str, str],
    *,
    npa_home: Path,
    stack: str | None,
    project: ProjectSecrets | None = None,
) -> dict[str, str]:
    """The values to hand to the ``sky`` child's environment, same precedence as
    ``resolve_sources``. Held in memory only; callers never store or print them.

    Raises:
        ConfigError, EngineUnavailableError: a file is unsafe, or the engine cannot
            decrypt a value the project's stack holds.
    """
    stored = _pairs_in(credentials_path(npa_home, stack)) if stack else {}
    own = _pairs_in(project.file) if project else {}
    out: dict[str, str] = {}
    for name in names:
        value = env.get(name) or own.get(name)
        if value:
            out[name] = value
    if project is not None and project.read_stack is not None:
        wanted = [n for n in names if n not in out and n in project.stack_names]
        if wanted:
            out.update({k: v for k, v in project.read_stack(wanted).items() if v})
    for name in names:
        if name not in out and stored.get(name):
            out[name] = stored[name]
    return {name: out[name] for name in names if name in out}


def resolve_sources(
    names: Sequence[str],
    env: Mapping[str, str],
    *,
    npa_home: Path,
    stack: str | None,
    project: ProjectSecrets | None = None,
) -> dict[str, str | None]:
    """Map each name to ``environment``, ``project:<alias>``, ``pulumi:<stack>`` (the
    project's stack secret), ``stack:<name>`` or None when no value exists."""
    stored = _names_in(credentials_path(npa_home, stack)) if stack else set()
    own = _names_in(project.file) if project else set()
    out: dict[str, str | None] = {}
    for name in names:
        if env.get(name):
            out[name] = "environment"
        elif name in own:
            out[name] = f"project:{project.alias}" if project else None
        elif project is not None and name in project.stack_names:
            out[name] = project.stack_label()
        elif name in stored:
            out[name] = f"stack:{stack}"
        else:
            out[name] = None
    return out


def overlay(
    env: Mapping[str, str],
    names: Sequence[str],
    *,
    npa_home: Path,
    project: ProjectSecrets | None,
) -> Mapping[str, str]:
    """``env`` with the project's values of ``names`` where ``env`` has none (in memory only):
    what a factory that reads credentials from its environment (the registry's) is given."""
    if project is None:
        return env
    found = resolve_values(
        [n for n in names if not env.get(n)], {}, npa_home=npa_home, stack=None, project=project
    )
    return {**env, **found} if found else env


def require(
    sources: Mapping[str, str | None],
    *,
    npa_home: Path,
    stack: str | None,
    project: ProjectSecrets | None = None,
) -> None:
    """Fail before anything happens when a requested secret has no value anywhere."""
    missing = [n for n, src in sources.items() if src is None]
    if not missing:
        return
    checked = ["process environment"]
    if project is not None:
        checked.append(f"project {project.alias} credentials {project.file}")
        if project.stack:
            checked.append(f"stack {project.stack} secret config")
    if stack:
        checked.append(f"stack credentials {credentials_path(npa_home, stack)}")
    where = (
        f", or store it in project {project.alias}: npa configure -p {project.alias} "
        f"--credential {missing[0]}"
        if project is not None
        else (f", or add it to {credentials_path(npa_home, stack)} (mode 0600)" if stack else "")
    )
    raise MissingSecretError(
        f"secret {missing[0]} is not set"
        + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else "")
        + f"; checked: {', '.join(checked)}",
        remedy=f"export {missing[0]}=… in this shell"
        + where
        + "; the value is passed to SkyPilot by name and never written",
        details={"missing": missing, "checked": checked},
    )
