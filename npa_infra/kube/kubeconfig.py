"""The kubeconfig file exactly as pinned SkyPilot sees it (skypilot-0.12.md §9.1).

Only the **first existing** file of ``KUBECONFIG`` (``:``-separated; default
``~/.kube/config``) is read: npa-infra's isolated HOME exposes only that file
to SkyPilot, so a context defined in a later file does not exist for it. A
context is used only when named exactly; there is no fallback to
``current-context``, ever (cli.md). Its namespace is the context's
``namespace``, else ``default``.

Failures are ``KubeError``s of kind ``NO_KUBECONFIG`` (no file, unreadable,
not a kubeconfig) or ``UNKNOWN_CONTEXT`` (the remedy lists the contexts that
exist). The parsed document is kept for the client's loader and never shown:
kubeconfigs hold tokens and keys.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from npa_infra.errors import KubeError
from npa_infra.kube import failures
from npa_infra.kube.models import KubeErrorKind

__all__ = [
    "DEFAULT_NAMESPACE",
    "KubeContext",
    "Kubeconfig",
    "candidate_paths",
    "first_path",
    "load",
    "resolve",
]

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class KubeContext:
    """One named context; ``namespace`` is already the effective one."""

    name: str
    cluster: str
    user: str
    namespace: str


@dataclass(frozen=True, slots=True)
class Kubeconfig:
    """One parsed kubeconfig file."""

    path: Path
    contexts: tuple[KubeContext, ...]
    current_context: str | None
    document: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def context_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.contexts)

    def context(self, name: str) -> KubeContext:
        """The context named exactly ``name``.

        Raises:
            KubeError: ``UNKNOWN_CONTEXT``; the remedy lists the contexts that exist.
        """
        for candidate in self.contexts:
            if candidate.name == name:
                return candidate
        names = self.context_names
        listing = ", ".join(names) if names else "none"
        raise failures.kube_error(
            KubeErrorKind.UNKNOWN_CONTEXT,
            f"context {name!r} is not defined in {self.path} (it defines: {listing})",
            context=name,
            contexts=names,
            kubeconfig=str(self.path),
            available_contexts=list(names),
        )

    def namespace(self, name: str) -> str:
        """The effective namespace of context ``name``: its ``namespace``, else ``default``.

        Raises:
            KubeError: ``UNKNOWN_CONTEXT``.
        """
        return self.context(name).namespace


def candidate_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """The ``KUBECONFIG`` entries in order, or ``~/.kube/config`` when it is unset or empty."""
    env = os.environ if env is None else env
    raw = env.get("KUBECONFIG", "")
    parts = [part for part in raw.split(os.pathsep) if part]
    if parts:
        return [Path(part).expanduser() for part in parts]
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return [home / ".kube" / "config"]


def first_path(env: Mapping[str, str] | None = None) -> Path:
    """The first existing kubeconfig file.

    Raises:
        KubeError: ``NO_KUBECONFIG`` when none of the candidates is a file.
    """
    candidates = candidate_paths(env)
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise failures.kube_error(
        KubeErrorKind.NO_KUBECONFIG,
        f"no kubeconfig file found (tried: {tried})",
        context="",
        tried=[str(p) for p in candidates],
    )


def load(path: Path) -> Kubeconfig:
    """Parse the kubeconfig at ``path``.

    Raises:
        KubeError: ``NO_KUBECONFIG`` when it is missing, unreadable or not a kubeconfig.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _unusable(path, f"cannot be read ({type(exc).__name__}: {exc})") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _unusable(path, f"is not valid YAML{where}") from exc
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise _unusable(path, "is not a kubeconfig (the document is not a mapping)")
    entries = document.get("contexts") or []
    if not isinstance(entries, list):
        raise _unusable(path, "is not a kubeconfig (`contexts` is not a list)")
    current = document.get("current-context")
    return Kubeconfig(
        path=path,
        contexts=_contexts(entries),
        current_context=current if isinstance(current, str) and current else None,
        document=document,
    )


def resolve(context: str, env: Mapping[str, str] | None = None) -> tuple[Kubeconfig, KubeContext]:
    """The first kubeconfig file and its context named exactly ``context``.

    Raises:
        KubeError: ``NO_KUBECONFIG`` or ``UNKNOWN_CONTEXT``.
    """
    config = load(first_path(env))
    return config, config.context(context)


def _contexts(entries: list[Any]) -> tuple[KubeContext, ...]:
    seen: set[str] = set()
    found: list[KubeContext] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name or name in seen:
            continue  # kubectl keeps the first of duplicate names
        seen.add(name)
        body = entry.get("context")
        body = body if isinstance(body, dict) else {}
        namespace = body.get("namespace")
        found.append(
            KubeContext(
                name=name,
                cluster=str(body.get("cluster") or ""),
                user=str(body.get("user") or ""),
                namespace=namespace
                if isinstance(namespace, str) and namespace
                else DEFAULT_NAMESPACE,
            )
        )
    return tuple(found)


def _unusable(path: Path, problem: str) -> KubeError:
    return failures.kube_error(
        KubeErrorKind.NO_KUBECONFIG,
        f"kubeconfig {path} {problem}",
        context="",
        kubeconfig=str(path),
    )
