"""The real test registry (registry.md §5) and the Kubernetes API double (kubernetes.md §10)
for the preflight tests; fixtures from tests/support."""

from __future__ import annotations

from tests.support.fakekube.pytest_plugin import fake_kube
from tests.support.registry.plugin import (
    fault_proxy,
    registry_foreign_realm,
    registry_foreign_realm_server,
    registry_hostile_realm,
    registry_hostile_realm_server,
    registry_htpasswd,
    registry_htpasswd_server,
    registry_pki,
    registry_plain,
    registry_plain_server,
    registry_token,
    registry_token_kid,
    registry_token_kid_server,
    registry_token_server,
)

__all__ = [
    "fake_kube",
    "fault_proxy",
    "registry_foreign_realm",
    "registry_foreign_realm_server",
    "registry_hostile_realm",
    "registry_hostile_realm_server",
    "registry_htpasswd",
    "registry_htpasswd_server",
    "registry_pki",
    "registry_plain",
    "registry_plain_server",
    "registry_token",
    "registry_token_kid",
    "registry_token_kid_server",
    "registry_token_server",
]
