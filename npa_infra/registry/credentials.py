"""Registry credentials, each bound to exactly one registry host (registry.md §2.1).

Sources, in order: the trio ``SKYPILOT_DOCKER_SERVER``/``_USERNAME``/
``_PASSWORD``; then ``NPA_REGISTRY_SERVER`` (or the host of ``NPA_REGISTRY``)
with ``NPA_REGISTRY_USERNAME``/``NPA_REGISTRY_PASSWORD``. The caller passes
the mapping (the process environment merged with the stack's credentials
file), so this module reads nothing itself. A password without a username
uses ``iam`` (runtime-reference.md §7). Passwords are ``SecretStr``: never
in a repr, an error or JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import SecretStr

from npa_infra.registry.models import DOCKER_HUB

__all__ = ["ENV_NAMES", "Credential", "CredentialSet", "from_environment", "normalize_server"]

ENV_NAMES = (
    "SKYPILOT_DOCKER_SERVER",
    "SKYPILOT_DOCKER_USERNAME",
    "SKYPILOT_DOCKER_PASSWORD",
    "NPA_REGISTRY_SERVER",
    "NPA_REGISTRY",
    "NPA_REGISTRY_USERNAME",
    "NPA_REGISTRY_PASSWORD",
)
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})


@dataclass(frozen=True, slots=True)
class Credential:
    """A username and password for one registry host; ``source`` names the variables."""

    server: str
    username: str
    password: SecretStr
    source: str

    @property
    def key(self) -> tuple[str, str]:
        """Identifies the credential in the token cache without its secret."""
        return (self.server, self.username)


def normalize_server(text: str) -> str:
    """``https://Host:5000/v1/`` → ``host:5000``; Docker Hub aliases → ``registry-1.docker.io``."""
    value = text.strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.split("/", 1)[0].lower()
    return DOCKER_HUB if value in _HUB_ALIASES else value


def _one(env: Mapping[str, str], server: str, user: str, password: str) -> Credential | None:
    host = normalize_server(env.get(server, ""))
    secret = env.get(password, "")
    if not host or not secret:
        return None
    return Credential(host, env.get(user, "") or "iam", SecretStr(secret), f"{server}/{password}")


def from_environment(env: Mapping[str, str]) -> tuple[Credential, ...]:
    """Every complete credential in ``env``, in source order."""
    found = [
        _one(env, "SKYPILOT_DOCKER_SERVER", "SKYPILOT_DOCKER_USERNAME", "SKYPILOT_DOCKER_PASSWORD")
    ]
    server = "NPA_REGISTRY_SERVER" if env.get("NPA_REGISTRY_SERVER") else "NPA_REGISTRY"
    found.append(_one(env, server, "NPA_REGISTRY_USERNAME", "NPA_REGISTRY_PASSWORD"))
    return tuple(c for c in found if c is not None)


class CredentialSet:
    """Host-scoped lookup: a credential is offered only to the registry it names."""

    def __init__(self, credentials: Iterable[Credential] = ()) -> None:
        self._by_host: dict[str, Credential] = {}
        for credential in credentials:
            self._by_host.setdefault(credential.server, credential)

    def for_registry(self, registry: str) -> Credential | None:
        return self._by_host.get(normalize_server(registry))

    def __repr__(self) -> str:
        return f"CredentialSet(hosts={sorted(self._by_host)})"
