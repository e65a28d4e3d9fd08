"""The first kubeconfig file, its exact contexts and namespaces (skypilot-0.12.md §9.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from npa_infra.errors import KubeError
from npa_infra.kube import failures, kubeconfig
from npa_infra.kube.models import KubeErrorKind


def write_config(path: Path, contexts: dict[str, dict[str, str]], current: str = "") -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "s3cr3t-token"}}],
        "contexts": [{"name": name, "context": body} for name, body in contexts.items()],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


# -- candidate_paths / first_path ----------------------------------------------
def test_candidate_paths_kubeconfig_unset_home_default(tmp_path: Path) -> None:
    assert kubeconfig.candidate_paths({"HOME": str(tmp_path)}) == [tmp_path / ".kube" / "config"]


def test_candidate_paths_kubeconfig_empty_home_default(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": ""}

    assert kubeconfig.candidate_paths(env) == [tmp_path / ".kube" / "config"]


def test_candidate_paths_colon_separated_kept_in_order_empty_parts_dropped(tmp_path: Path) -> None:
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")])}

    assert kubeconfig.candidate_paths(env) == [tmp_path / "a", tmp_path / "b"]


def test_candidate_paths_tilde_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))

    assert kubeconfig.candidate_paths({"KUBECONFIG": "~/kc"}) == [tmp_path / "kc"]


def test_first_path_first_entry_missing_second_chosen(tmp_path: Path) -> None:
    second = write_config(tmp_path / "second", {"b": {"cluster": "c", "user": "u"}})
    third = write_config(tmp_path / "third", {"c": {"cluster": "c", "user": "u"}})
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(second), str(third)])}

    assert kubeconfig.first_path(env) == second


def test_first_path_directory_entry_skipped(tmp_path: Path) -> None:
    real = write_config(tmp_path / "real", {"a": {"cluster": "c", "user": "u"}})
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path), str(real)])}

    assert kubeconfig.first_path(env) == real


def test_first_path_nothing_exists_no_kubeconfig_error(tmp_path: Path) -> None:
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "x"), str(tmp_path / "y")])}

    with pytest.raises(KubeError) as caught:
        kubeconfig.first_path(env)

    assert failures.kind_of(caught.value) is KubeErrorKind.NO_KUBECONFIG
    assert str(tmp_path / "x") in caught.value.message
    assert str(tmp_path / "y") in caught.value.message
    assert "KUBECONFIG" in caught.value.remedy


def test_first_path_home_default_used_when_unset(tmp_path: Path) -> None:
    default = write_config(tmp_path / ".kube" / "config", {"a": {"cluster": "c", "user": "u"}})

    assert kubeconfig.first_path({"HOME": str(tmp_path)}) == default


# -- load / contexts / namespaces ------------------------------------------------
def test_load_contexts_listed_in_file_order(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "kc",
        {"zeta": {"cluster": "c", "user": "u"}, "alpha": {"cluster": "c", "user": "u"}},
        current="alpha",
    )

    config = kubeconfig.load(path)

    assert config.context_names == ("zeta", "alpha")
    assert config.current_context == "alpha"


def test_load_context_namespace_set_returned(tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", {"a": {"cluster": "c", "user": "u", "namespace": "team"}})

    assert kubeconfig.load(path).namespace("a") == "team"


@pytest.mark.parametrize(
    "body",
    [{"cluster": "c", "user": "u"}, {"cluster": "c", "user": "u", "namespace": ""}],
    ids=["absent", "empty"],
)
def test_load_context_namespace_missing_default(tmp_path: Path, body: dict[str, str]) -> None:
    path = write_config(tmp_path / "kc", {"a": body})

    assert kubeconfig.load(path).namespace("a") == "default"


def test_context_unknown_name_error_lists_existing_contexts(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "kc",
        {"prod": {"cluster": "c", "user": "u"}, "dev": {"cluster": "c", "user": "u"}},
        current="prod",
    )

    with pytest.raises(KubeError) as caught:
        kubeconfig.load(path).context("staging")

    error = caught.value
    assert failures.kind_of(error) is KubeErrorKind.UNKNOWN_CONTEXT
    assert "'staging'" in error.message
    assert "prod, dev" in error.message
    assert "dev, prod" in error.remedy
    assert error.details["available_contexts"] == ["prod", "dev"]
    assert error.exit_code == 1


def test_context_current_context_never_used_as_fallback(tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", {"prod": {"cluster": "c", "user": "u"}}, current="prod")

    with pytest.raises(KubeError):
        kubeconfig.load(path).context("")


def test_context_name_case_differs_unknown(tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", {"Prod": {"cluster": "c", "user": "u"}})

    with pytest.raises(KubeError):
        kubeconfig.load(path).context("prod")


def test_context_duplicate_names_first_wins(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(
        yaml.safe_dump(
            {
                "contexts": [
                    {"name": "a", "context": {"cluster": "c", "namespace": "first"}},
                    {"name": "a", "context": {"cluster": "c", "namespace": "second"}},
                ]
            }
        ),
        encoding="utf-8",
    )

    assert kubeconfig.load(path).namespace("a") == "first"


def test_load_malformed_entries_skipped(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(
        yaml.safe_dump(
            {
                "contexts": [
                    "not-a-mapping",
                    {"context": {"cluster": "c"}},
                    {"name": 7},
                    {"name": "ok", "context": "not-a-mapping"},
                ]
            }
        ),
        encoding="utf-8",
    )

    config = kubeconfig.load(path)

    assert config.context_names == ("ok",)
    assert config.namespace("ok") == "default"


def test_load_empty_file_no_contexts(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("", encoding="utf-8")

    config = kubeconfig.load(path)

    assert config.context_names == ()
    with pytest.raises(KubeError) as caught:
        config.context("a")
    assert "none" in caught.value.message


@pytest.mark.parametrize(
    "text",
    ["contexts: [unclosed", "- just\n- a list\n", "contexts: {a: b}\n"],
    ids=["bad-yaml", "not-a-mapping", "contexts-not-a-list"],
)
def test_load_invalid_document_no_kubeconfig_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kc"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(KubeError) as caught:
        kubeconfig.load(path)

    assert failures.kind_of(caught.value) is KubeErrorKind.NO_KUBECONFIG
    assert str(path) in caught.value.message


def test_load_missing_file_no_kubeconfig_error(tmp_path: Path) -> None:
    with pytest.raises(KubeError) as caught:
        kubeconfig.load(tmp_path / "absent")

    assert failures.kind_of(caught.value) is KubeErrorKind.NO_KUBECONFIG


def test_kubeconfig_repr_never_shows_credentials(tmp_path: Path) -> None:
    config = kubeconfig.load(write_config(tmp_path / "kc", {"a": {"cluster": "c", "user": "u"}}))

    assert "s3cr3t-token" not in repr(config)


# -- resolve ---------------------------------------------------------------------
def test_resolve_context_only_in_second_file_unknown(tmp_path: Path) -> None:
    first = write_config(tmp_path / "first", {"a": {"cluster": "c", "user": "u"}})
    second = write_config(tmp_path / "second", {"b": {"cluster": "c", "user": "u"}})
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(second)])}

    with pytest.raises(KubeError) as caught:
        kubeconfig.resolve("b", env)

    assert failures.kind_of(caught.value) is KubeErrorKind.UNKNOWN_CONTEXT
    assert caught.value.details["available_contexts"] == ["a"]


def test_resolve_exact_context_config_and_context_returned(tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", {"a": {"cluster": "c", "user": "u", "namespace": "ns"}})

    config, context = kubeconfig.resolve("a", {"KUBECONFIG": str(path)})

    assert config.path == path
    assert context == kubeconfig.KubeContext(name="a", cluster="c", user="u", namespace="ns")
