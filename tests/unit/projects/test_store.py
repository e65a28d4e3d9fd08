"""Project entries on disk (projects.store): modes, atomicity, and what ``load`` observes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError
from npa_infra.projects import store
from npa_infra.projects.models import DEFAULT_RELEASE_NAMESPACE
from npa_infra.projects.record import Project
from npa_infra.projects.resolve import EntryState


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"NPA_HOME": str(tmp_path / "home")}


def _entry(env: dict[str, str], alias: str) -> Path:
    return Path(env["NPA_HOME"]) / "projects" / f"{alias}.yaml"


def test_save_then_load_round_trip_private_modes(env: dict[str, str]) -> None:
    project = Project(alias="team", stack="prod", namespace="ns")

    path = store.save(project, env)

    assert path == _entry(env, "team")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loaded = store.load("team", env)
    assert loaded.state is EntryState.PRESENT
    assert loaded.project == project
    assert loaded.project.release_namespace == DEFAULT_RELEASE_NAMESPACE
    # no temp file left; the lock file stays (removing it would let a newcomer lock a new inode)
    assert sorted(p.name for p in path.parent.iterdir()) == [".team.yaml.lock", "team.yaml"]
    assert store.known_aliases(env) == ("team",)


def test_save_overwrites_atomically(env: dict[str, str]) -> None:
    store.save(Project(alias="team", stack="dev"), env)
    store.save(Project(alias="team", context="kind-a"), env)

    loaded = store.load("team", env).project
    assert loaded is not None and (loaded.stack, loaded.context) == (None, "kind-a")


def test_load_missing_file_absent(env: dict[str, str]) -> None:
    entry = store.load("team", env)

    assert entry.state is EntryState.ABSENT
    assert entry.path == str(_entry(env, "team"))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alias: team\ntoken: s3cr3t\n", "token"),
        ("- a\n- b\n", "not a mapping"),
        ("alias: [\n", ""),
        ("alias: other\n", "'other'"),
        ("alias: team\nstack: 3\n", "stack"),
    ],
    ids=["unknown_key_no_secret_field", "not_mapping", "bad_yaml", "other_alias", "wrong_type"],
)
def test_load_invalid_entry_unreadable_with_reason(
    env: dict[str, str], text: str, problem: str
) -> None:
    path = _entry(env, "team")
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")

    entry = store.load("team", env)

    assert entry.state is EntryState.UNREADABLE
    assert problem in entry.problem
    assert "s3cr3t" not in entry.problem


def test_load_fifo_unreadable_without_blocking(env: dict[str, str]) -> None:
    path = _entry(env, "team")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)

    entry = store.load("team", env)

    assert (entry.state, entry.problem) == (EntryState.UNREADABLE, "not a regular file")


def test_load_symlink_unreadable(env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.yaml"
    target.write_text("alias: team\n", encoding="utf-8")
    path = _entry(env, "team")
    path.parent.mkdir(parents=True)
    path.symlink_to(target)

    entry = store.load("team", env)

    assert (entry.state, entry.problem) == (EntryState.UNREADABLE, "a symlink")


def test_load_oversized_unreadable(env: dict[str, str]) -> None:
    path = _entry(env, "team")
    path.parent.mkdir(parents=True)
    path.write_text("alias: team\n" + "#" * (store.MAX_BYTES + 1), encoding="utf-8")

    entry = store.load("team", env)

    assert entry.state is EntryState.UNREADABLE
    assert "larger than" in entry.problem


@pytest.mark.parametrize(
    "alias", ["../up", "", "-x", "a/b"], ids=["dotdot", "empty", "dash", "slash"]
)
def test_entry_path_invalid_alias_config_error(env: dict[str, str], alias: str) -> None:
    with pytest.raises(ConfigError, match="not usable"):
        store.entry_path(alias, env)


def test_project_model_refuses_invalid_alias() -> None:
    with pytest.raises(ValueError, match="alias"):
        Project(alias="../up")
