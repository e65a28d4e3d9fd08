"""The generated kubeconfig: working contexts, failing contexts, and the TLS material.

Every working context talks HTTPS, verified against the test CA: client-go
(kubectl) sends credentials only over TLS. Each has its own user and bearer
token, so the request log shows which context was used:

- ``fake-a`` (namespace ``team-a``), ``fake-b`` (``team-b``);
- ``fake-default``: no ``namespace`` key at all, so clients fall back to ``default``;
- ``ambient`` (``ambient``): the ``current-context``; code under test should
  never use it, which ``FakeKube.calls(user="ambient")`` lets a test assert.

Failing contexts (``FakeKube.bad_contexts``):

- ``bad-token``: an unknown bearer token, 401 on every request, ``/readyz`` included;
- ``forbidden``: a valid user denied every resource verb (403); public
  endpoints (``/readyz``, ``/version``) still answer;
- ``bad-ca``: HTTPS whose certificate does not chain to the configured CA
  (a certificate verification error);
- ``exec-fail``: a user whose exec credential plugin exits 1;
- ``unreachable``: a loopback port nothing listens on (connection refused).

The TLS certificates under ``tls/`` are test-only, self-signed, valid until 2126.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BAD_CONTEXTS", "CONTEXTS", "TLS_DIR", "build_kubeconfig", "tokens"]

TLS_DIR = Path(__file__).parent / "tls"

CONTEXTS: dict[str, str] = {
    "fake-a": "team-a",
    "fake-b": "team-b",
    "fake-default": "default",
}
AMBIENT = ("ambient", "ambient")
BAD_CONTEXTS: dict[str, str] = {
    "bad-token": "team-a",
    "forbidden": "team-a",
    "bad-ca": "team-a",
    "exec-fail": "team-a",
    "unreachable": "team-a",
}
FORBIDDEN_USER = "forbidden"


def tokens() -> dict[str, str]:
    """Bearer token -> user name, for every user that authenticates."""
    users = [*CONTEXTS, AMBIENT[0], FORBIDDEN_USER]
    return {f"token-{user}": user for user in users}


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def build_kubeconfig(path: Path, *, https_url: str, unreachable_url: str) -> None:
    """Write the kubeconfig file (YAML) at ``path``."""
    ca, wrong_ca = _b64(TLS_DIR / "ca.pem"), _b64(TLS_DIR / "wrong-ca.pem")
    clusters = [
        {"name": "fake", "cluster": {"server": https_url, "certificate-authority-data": ca}},
        {
            "name": "fake-wrong-ca",
            "cluster": {"server": https_url, "certificate-authority-data": wrong_ca},
        },
        {"name": "fake-unreachable", "cluster": {"server": unreachable_url}},
    ]
    users: list[dict[str, Any]] = [
        {"name": user, "user": {"token": token}} for token, user in tokens().items()
    ]
    users.append({"name": "bad-token", "user": {"token": "not-a-valid-token"}})
    users.append(
        {
            "name": "exec-fail",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": sys.executable,
                    "args": [
                        "-c",
                        "import sys; sys.exit('fakekube: exec credential plugin failed')",
                    ],
                    "interactiveMode": "Never",
                }
            },
        }
    )

    def context(name: str, cluster: str, user: str, namespace: str | None) -> dict[str, Any]:
        body = {"cluster": cluster, "user": user}
        if namespace is not None:
            body["namespace"] = namespace
        return {"name": name, "context": body}

    contexts = [
        context("fake-a", "fake", "fake-a", "team-a"),
        context("fake-b", "fake", "fake-b", "team-b"),
        context("fake-default", "fake", "fake-default", None),
        context("ambient", "fake", "ambient", "ambient"),
        context("bad-token", "fake", "bad-token", "team-a"),
        context("forbidden", "fake", FORBIDDEN_USER, "team-a"),
        context("bad-ca", "fake-wrong-ca", "fake-a", "team-a"),
        context("exec-fail", "fake", "exec-fail", "team-a"),
        context("unreachable", "fake-unreachable", "fake-a", "team-a"),
    ]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": AMBIENT[0],
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
