"""Stack configuration: one typed model, every mistake located (pulumi.md §3, cli.md §0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.errors import ConfigError, StackConfigError
from npa_infra.stack import config

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, body: str, name: str = "t") -> Path:
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / f"Pulumi.{name}.yaml").write_text(body, encoding="utf-8")
    return tmp_path


def issues_of(tmp_path: Path, body: str) -> list[tuple[str, int, str]]:
    with pytest.raises(StackConfigError) as caught:
        config.load_stack_file("t", write(tmp_path, body))
    return [(i.path, i.line, i.message) for i in caught.value.issues]


def test_load_dev_example_typed() -> None:
    loaded = config.load_stack_file("dev", REPO)

    cfg = loaded.config
    assert (cfg.context, cfg.namespace, cfg.service_account) == (
        "kind-npa-dev",
        "npa-dev",
        "npa-runner",
    )
    assert (cfg.controller_cpus, cfg.controller_memory_gb) == (2, 8)
    assert cfg.controller_pod_config == {"spec": {"priorityClassName": "npa-controller"}}
    assert (cfg.bucket, cfg.source_prefix, cfg.registries) == (
        "npa-dev-artifacts",
        "npa-src/npa",
        (),
    )
    assert loaded.secrets_provider == ""
    config.require_engine_fields(cfg, label="dev", secure_keys=loaded.secure_keys)


@pytest.mark.parametrize(
    ("body", "path", "line", "fragment"),
    [
        (
            "config:\n  npa-infra:context: c\n  npa-infra:controllerCpus: zero\n",
            "npa-infra:controllerCpus",
            3,
            "must be a positive integer, got 'zero'",
        ),
        (
            "config:\n  npa-infra:namespace: Team_A\n",
            "npa-infra:namespace",
            2,
            "not a namespace name",
        ),
        (
            "config:\n  npa-infra:contxt: c\n",
            "npa-infra:contxt",
            2,
            "is not a key npa-infra knows",
        ),
        (
            "config:\n  npa-infra:registries:\n    - server: https://cr.io\n      username: u\n",
            "npa-infra:registries[0].server",
            3,
            "without a scheme",
        ),
        (
            "config:\n  npa-infra:serviceAccount: SERVICE_ACCOUNT\n",
            "npa-infra:serviceAccount",
            2,
            "skypilot-service-account",
        ),
        (
            "config:\n  npa-infra:bucket: Not_A_Bucket\n",
            "npa-infra:bucket",
            2,
            "not a valid name",
        ),
        (
            "config:\n  npa-infra:controllerPodConfig: [a]\n",
            "npa-infra:controllerPodConfig",
            2,
            "must be a mapping",
        ),
        (
            "config:\n  npa-infra:registryPassword: hunter2\n",
            "npa-infra:registryPassword",
            2,
            "written in clear",
        ),
    ],
    ids=[
        "cpus-text",
        "namespace-case",
        "unknown-key",
        "registry-scheme",
        "skypilot-identity",
        "bucket-name",
        "pod-config-list",
        "clear-password",
    ],
)
def test_load_mistake_located(
    tmp_path: Path, body: str, path: str, line: int, fragment: str
) -> None:
    ((got_path, got_line, message),) = issues_of(tmp_path, body)

    assert (got_path, got_line) == (path, line)
    assert fragment in message


def test_load_every_mistake_reported_together(tmp_path: Path) -> None:
    body = (
        "config:\n"
        "  npa-infra:controllerCpus: 0\n"
        "  npa-infra:controllerMemoryGb: -1\n"
        "  npa-infra:sourcePrefx: x\n"
    )

    found = issues_of(tmp_path, body)

    assert sorted(p for p, _, _ in found) == [
        "npa-infra:controllerCpus",
        "npa-infra:controllerMemoryGb",
        "npa-infra:sourcePrefx",
    ]


def test_unknown_key_hint_suggests_close_match(tmp_path: Path) -> None:
    with pytest.raises(StackConfigError) as caught:
        config.load_stack_file("t", write(tmp_path, "config:\n  npa-infra:contxt: c\n"))

    assert caught.value.issues[0].hint == "did you mean npa-infra:context?"
    assert caught.value.message.startswith(f"{tmp_path}/stacks/Pulumi.t.yaml:2:3: ")
    assert caught.value.details["issues"][0]["line"] == 2


def test_other_namespaces_keys_left_alone(tmp_path: Path) -> None:
    body = "config:\n  kubernetes:context: x\n  npa-infra:context: c\n"

    loaded = config.load_stack_file("t", write(tmp_path, body))

    assert loaded.config.context == "c"


def test_duplicate_secret_names_refused(tmp_path: Path) -> None:
    body = (
        "config:\n  npa-infra:registries:\n"
        "    - {server: a.io, username: u, secretName: s, passwordKey: p1}\n"
        "    - {server: b.io, username: u, secretName: s, passwordKey: p2}\n"
    )

    ((_, _, message),) = issues_of(tmp_path, body)

    assert "share the Secret name 's'" in message


def test_registry_secret_names_default_first_is_renderers(tmp_path: Path) -> None:
    body = (
        "config:\n  npa-infra:registries:\n"
        "    - {server: cr.eu-north1.nebius.cloud, username: robot}\n"
        "    - {server: ghcr.io, username: bot, passwordKey: ghcrPassword}\n"
        "  npa-infra:registryPassword: {secure: v1:abc}\n"
        "  npa-infra:ghcrPassword: {secure: v1:def}\n"
        "encryptionsalt: v1:salt\n"
    )

    loaded = config.load_stack_file("t", write(tmp_path, body))

    assert loaded.config.pull_secret_names == ("npa-nebius-registry", "npa-registry-1")
    assert loaded.secure_keys == {"registryPassword", "ghcrPassword"}
    assert loaded.encrypted is True


def test_require_engine_fields_missing_context_and_password(tmp_path: Path) -> None:
    body = "config:\n  npa-infra:registries: [{server: cr.io, username: robot}]\n"
    loaded = config.load_stack_file("t", write(tmp_path, body))

    with pytest.raises(StackConfigError) as caught:
        config.require_engine_fields(
            loaded.config, label=str(loaded.path), secure_keys=loaded.secure_keys
        )

    paths = [i.path for i in caught.value.issues]
    assert paths == ["npa-infra:context", "npa-infra:namespace", "npa-infra:registryPassword"]
    assert "pulumi config set --secret npa-infra:registryPassword" in caught.value.issues[2].hint


def test_load_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Pulumi\.nope\.yaml"):
        config.load_stack_file("nope", tmp_path)


def test_load_invalid_yaml_located(tmp_path: Path) -> None:
    found = issues_of(tmp_path, "config:\n  npa-infra:context: [\n")

    assert found[0][2].startswith("invalid YAML")


@pytest.mark.parametrize(
    "name", ["../x", "", "a b", "dev.yaml"], ids=["dotdot", "empty", "space", "dot"]
)
def test_stack_name_unusable_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="is not usable"):
        config.validate_stack_name(name)


def test_from_values_engine_strings_coerced() -> None:
    cfg = config.from_values(
        {"context": "c", "namespace": "n", "controllerCpus": "4", "adoptNamespaces": True}
    )

    assert (cfg.controller_cpus, cfg.adopt_namespaces) == (4, True)


def test_from_values_mistake_unlocated() -> None:
    with pytest.raises(StackConfigError) as caught:
        config.from_values({"controllerCpus": "0"})

    assert (caught.value.issues[0].line, caught.value.issues[0].path) == (
        0,
        "npa-infra:controllerCpus",
    )


def test_find_project_root_from_subdirectory() -> None:
    assert config.find_project_root(REPO / "npa_infra" / "stack") == REPO
