"""Host-scoped registry credentials from the environment (registry.md §2.1); never printed."""

from __future__ import annotations

import pytest

from npa_infra.registry import credentials


def test_from_environment_skypilot_trio_then_npa_registry() -> None:
    env = {
        "SKYPILOT_DOCKER_SERVER": "cr.eu-north1.nebius.cloud",
        "SKYPILOT_DOCKER_USERNAME": "iam",
        "SKYPILOT_DOCKER_PASSWORD": "s3cret-one",
        "NPA_REGISTRY_SERVER": "https://Ghcr.io/v2/",
        "NPA_REGISTRY_USERNAME": "bob",
        "NPA_REGISTRY_PASSWORD": "s3cret-two",
    }

    found = credentials.from_environment(env)

    assert [(c.server, c.username) for c in found] == [
        ("cr.eu-north1.nebius.cloud", "iam"),
        ("ghcr.io", "bob"),
    ]
    assert found[1].password.get_secret_value() == "s3cret-two"


def test_from_environment_npa_registry_host_used_when_no_server() -> None:
    env = {"NPA_REGISTRY": "ghcr.io/nebius/nebius-physical-ai", "NPA_REGISTRY_PASSWORD": "pw"}

    (found,) = credentials.from_environment(env)

    assert (found.server, found.username) == ("ghcr.io", "iam")


@pytest.mark.parametrize(
    "env",
    [
        {"SKYPILOT_DOCKER_SERVER": "r.io", "SKYPILOT_DOCKER_USERNAME": "u"},
        {"SKYPILOT_DOCKER_PASSWORD": "pw"},
        {},
    ],
    ids=["no-password", "no-server", "empty"],
)
def test_from_environment_incomplete_ignored(env: dict[str, str]) -> None:
    assert credentials.from_environment(env) == ()


@pytest.mark.parametrize(
    ("text", "server"),
    [
        ("docker.io", "registry-1.docker.io"),
        ("https://index.docker.io/v1/", "registry-1.docker.io"),
        ("LOCALHOST:5000", "localhost:5000"),
        (" ghcr.io ", "ghcr.io"),
    ],
    ids=["docker", "index-v1", "case-port", "spaces"],
)
def test_normalize_server(text: str, server: str) -> None:
    assert credentials.normalize_server(text) == server


def test_credential_set_offers_credential_only_to_its_host() -> None:
    env = {"NPA_REGISTRY_SERVER": "localhost:5000", "NPA_REGISTRY_PASSWORD": "pw"}
    found = credentials.CredentialSet(credentials.from_environment(env))

    assert found.for_registry("localhost:5000") is not None
    assert found.for_registry("localhost:5001") is None
    assert found.for_registry("localhost") is None
    assert found.for_registry("ghcr.io") is None


def test_credentials_repr_never_shows_password() -> None:
    env = {"NPA_REGISTRY_SERVER": "r.io", "NPA_REGISTRY_PASSWORD": "canary-9x7"}
    (found,) = credentials.from_environment(env)

    assert "canary-9x7" not in repr(found)
    assert "canary-9x7" not in repr(credentials.CredentialSet([found]))
    assert "canary-9x7" not in str(found)
