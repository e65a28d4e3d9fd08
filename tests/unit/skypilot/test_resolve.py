"""Which ``sky`` binary runs (skypilot-0.12.md §7.1): explicit, env, config; never PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.skypilot.resolve import BinarySource, resolve_binary


def _exe(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


@pytest.fixture
def bins(tmp_path: Path) -> dict[str, Path]:
    return {name: _exe(tmp_path / name / "sky") for name in ("explicit", "env", "config", "path")}


@pytest.fixture
def env(tmp_path: Path, bins: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A caller whose PATH holds a ``sky`` that must never be picked up implicitly."""
    monkeypatch.setenv("PATH", str(bins["path"].parent))
    return {"PATH": str(bins["path"].parent), "NPA_HOME": str(tmp_path / "npa-home")}


def _save_config(env: dict[str, str], sky_bin: Path) -> None:
    npa_config.save_config(env, {"skypilot": {"sky_bin": str(sky_bin)}})


@pytest.mark.parametrize(
    ("explicit", "from_env", "from_config", "winner"),
    [
        (True, True, True, BinarySource.EXPLICIT),
        (False, True, True, BinarySource.ENV),
        (False, False, True, BinarySource.CONFIG),
    ],
    ids=["explicit-wins", "env-over-config", "config-last"],
)
def test_resolve_binary_precedence_explicit_env_config(
    bins: dict[str, Path],
    env: dict[str, str],
    explicit: bool,
    from_env: bool,
    from_config: bool,
    winner: BinarySource,
) -> None:
    if from_env:
        env["NPA_SKYPILOT_BIN"] = str(bins["env"])
    if from_config:
        _save_config(env, bins["config"])
    found = resolve_binary(str(bins["explicit"]) if explicit else None, env)
    assert found.source is winner
    assert found.path == bins[winner.value]


def test_resolve_binary_passed_config_mapping_used(
    bins: dict[str, Path], env: dict[str, str]
) -> None:
    found = resolve_binary(None, env, {"skypilot": {"sky_bin": str(bins["config"])}})
    assert (found.source, found.path) == (BinarySource.CONFIG, bins["config"])


@pytest.mark.parametrize(
    "blank_env", [False, True], ids=["nothing-configured", "empty-env-variable"]
)
def test_resolve_binary_sky_on_path_never_used(env: dict[str, str], blank_env: bool) -> None:
    if blank_env:
        env["NPA_SKYPILOT_BIN"] = ""
    with pytest.raises(ConfigError) as caught:
        resolve_binary(None, env)
    assert "NPA_SKYPILOT_BIN" in caught.value.remedy
    assert "npa skypilot bootstrap" in caught.value.remedy


def test_resolve_binary_explicit_bare_name_searched_on_path(
    bins: dict[str, Path], env: dict[str, str]
) -> None:
    found = resolve_binary("sky", env)  # only because the user named it explicitly
    assert (found.source, found.path) == (BinarySource.EXPLICIT, bins["path"])


def test_resolve_binary_explicit_bare_name_missing_config_error(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="not on PATH"):
        resolve_binary("sky-missing", env)


@pytest.mark.parametrize("source", list(BinarySource), ids=[s.value for s in BinarySource])
@pytest.mark.parametrize("problem", ["not-executable", "missing", "directory"])
def test_resolve_binary_unusable_path_config_error_with_remedy(
    tmp_path: Path, env: dict[str, str], source: BinarySource, problem: str
) -> None:
    target = tmp_path / "bad" / "sky"
    if problem == "not-executable":
        _exe(target, mode=0o644)
    elif problem == "directory":
        target.mkdir(parents=True)
    explicit = None
    if source is BinarySource.EXPLICIT:
        explicit = str(target)
    elif source is BinarySource.ENV:
        env["NPA_SKYPILOT_BIN"] = str(target)
    else:
        _save_config(env, target)
    with pytest.raises(ConfigError) as caught:
        resolve_binary(explicit, env)
    error = caught.value
    assert "not an executable file" in error.message
    assert "npa skypilot bootstrap" in error.remedy and "NPA_SKYPILOT_BIN" in error.remedy
    assert error.details == {"path": str(target), "source": source.value}
