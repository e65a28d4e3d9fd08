"""Parse image references locally (registry.md §1); never raises, never sends a request.

A syntax error is decided here as ``InvalidReference``: a malformed tag sent
to distribution only gets a plain-text ``404 page not found``, which would be
misread as a missing image. Docker Hub rules: a first component without
``.`` or ``:`` (and not ``localhost``) is a repository path on
``registry-1.docker.io`` (``docker.io`` and ``index.docker.io`` are aliases),
and a single-component repository gets ``library/``.
"""

from __future__ import annotations

import re

from npa_infra.registry.models import DOCKER_HUB, ImageRef, InvalidReference

__all__ = ["parse"]

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})
_MAX_NAME = 255


def _is_registry(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def parse(text: str) -> ImageRef | InvalidReference:
    """Parse ``[registry/]repository[:tag][@sha256:<64 hex>]``; a bad one is ``InvalidReference``."""
    if not isinstance(text, str) or not text:
        return InvalidReference(str(text), "empty image reference")
    if text.startswith("tool://"):
        return InvalidReference(text, "tool:// references resolve through the catalog first")
    if any(c.isspace() for c in text):
        return InvalidReference(text, "image reference contains whitespace")
    name, at, digest = text.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        return InvalidReference(text, "digest must be sha256:<64 lowercase hex>")
    last = name.rsplit("/", 1)[-1]
    tag: str | None = None
    if ":" in last:
        name, _, tag = name.rpartition(":")
        if not _TAG.fullmatch(tag):
            return InvalidReference(text, f"tag {tag!r} is not [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")
    parts = name.split("/")
    if len(parts) > 1 and _is_registry(parts[0]):
        registry, path = parts[0], parts[1:]
        if not _HOST.fullmatch(registry):
            return InvalidReference(text, f"registry host {registry!r} is malformed")
        if registry.lower() in _HUB_ALIASES:
            registry = DOCKER_HUB
    else:
        registry, path = DOCKER_HUB, parts
    if not path or not all(_COMPONENT.fullmatch(p) for p in path):
        return InvalidReference(
            text,
            "repository components must be lowercase [a-z0-9] joined by '.', '_', '__' or '-'",
        )
    if registry == DOCKER_HUB and len(path) == 1:
        path = ["library", *path]
    repository = "/".join(path)
    if len(repository) > _MAX_NAME:
        return InvalidReference(text, f"repository name is longer than {_MAX_NAME} characters")
    if tag is None and not at:
        tag = "latest"
    return ImageRef(
        text=text,
        registry=registry,
        repository=repository,
        name=name,
        tag=tag,
        digest=digest if at else None,
    )
