"""Per-stack SkyPilot state directories (skypilot-0.12.md §6, §7.2)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from npa_infra.errors import ConfigError
from npa_infra.skypilot.isolation import USER_ID, ControllerSettings, IsolatedDir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _kubeconfig(path: Path, context: str = "npa-ctx") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"apiVersion: v1\nkind: Config\ncurrent-context: {context}\n")
    return path


@pytest.fixture
def caller(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "caller-home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/bin"}


def test_prepare_layout_private_modes(tmp_path: Path, caller: dict[str, str]) -> None:
    iso = IsolatedDir(tmp_path / "d")
    iso.prepare(caller, context="npa-ctx", controller=ControllerSettings())
    iso.user_id(caller)
    for folder in (iso.root, iso.home, iso.runtime, iso.root / "submissions"):
        assert folder.is_dir() and _mode(folder) == 0o700, folder
    for file in (iso.config_file, iso.user_id_file):
        assert _mode(file) == 0o600, file


@pytest.mark.parametrize(
    "layout",
    ["env-list", "default-home"],
    ids=["kubeconfig-list-first-existing", "home-kube-config"],
)
def test_prepare_kubeconfig_links_first_existing_file(
    tmp_path: Path, caller: dict[str, str], layout: str
) -> None:
    first = _kubeconfig(tmp_path / "kube" / "first")
    if layout == "env-list":
        second = _kubeconfig(tmp_path / "kube" / "second")
        caller["KUBECONFIG"] = f"{tmp_path / 'missing'}:{first}:{second}"
    else:
        first = _kubeconfig(Path(caller["HOME"]) / ".kube" / "config")
    iso = IsolatedDir(tmp_path / "d")
    iso.prepare(caller, context="npa-ctx", controller=ControllerSettings())
    link = iso.home / ".kube" / "config"
    assert link.is_symlink()
    assert link.resolve() == first.resolve()
    assert iso.environment(caller)["KUBECONFIG"] == str(link)


def test_prepare_again_relinks_changed_kubeconfig(tmp_path: Path, caller: dict[str, str]) -> None:
    iso = IsolatedDir(tmp_path / "d")
    old, new = _kubeconfig(tmp_path / "old"), _kubeconfig(tmp_path / "new")
    iso.prepare({**caller, "KUBECONFIG": str(old)}, context="c", controller=ControllerSettings())
    iso.prepare({**caller, "KUBECONFIG": str(new)}, context="c", controller=ControllerSettings())
    assert (iso.home / ".kube" / "config").resolve() == new.resolve()


def test_prepare_nebius_credentials_linked_when_present(
    tmp_path: Path, caller: dict[str, str]
) -> None:
    (Path(caller["HOME"]) / ".nebius").mkdir()
    iso = IsolatedDir(tmp_path / "d")
    iso.prepare(caller, context="c", controller=ControllerSettings())
    assert (iso.home / ".nebius").resolve() == (Path(caller["HOME"]) / ".nebius").resolve()


def test_prepare_symlinked_root_config_error(tmp_path: Path, caller: dict[str, str]) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(ConfigError):
        IsolatedDir(tmp_path / "link").prepare(caller, context="c", controller=ControllerSettings())


def test_generated_config_allows_one_context_and_controller_block(
    tmp_path: Path, caller: dict[str, str]
) -> None:
    iso = IsolatedDir(tmp_path / "d")
    iso.prepare(caller, context="npa-ctx", controller=ControllerSettings())
    config = yaml.safe_load(iso.config_file.read_text())
    assert config["kubernetes"]["allowed_contexts"] == ["npa-ctx"]
    controller = config["jobs"]["controller"]
    assert controller["resources"] == {
        "cloud": "kubernetes",
        "region": "npa-ctx",
        "cpus": 2,
        "memory": 8,
    }
    assert controller["autostop"] is False


def test_generated_config_carries_pod_config_and_identity() -> None:
    settings = ControllerSettings(
        cpus=4, memory_gb=16, pod_config={"spec": {"priorityClassName": "hi"}}, remote_identity="sa"
    )
    config = IsolatedDir.generated_config("ctx", settings)
    assert config["jobs"]["controller"]["resources"]["cpus"] == 4
    assert config["kubernetes"]["pod_config"] == {"spec": {"priorityClassName": "hi"}}
    assert config["kubernetes"]["remote_identity"] == "sa"


def test_generated_config_without_context_no_allowlist() -> None:
    config = IsolatedDir.generated_config(None, ControllerSettings())
    assert "kubernetes" not in config
    assert "region" not in config["jobs"]["controller"]["resources"]


def test_user_id_stable_across_calls_and_objects(tmp_path: Path) -> None:
    first = IsolatedDir(tmp_path / "d").user_id({})
    assert IsolatedDir(tmp_path / "d").user_id({}) == first
    assert USER_ID.match(first) and first.startswith("npa-")
    assert IsolatedDir(tmp_path / "d").controller_name({}) == f"sky-jobs-controller-{first}"


def test_user_id_different_dirs_different_ids(tmp_path: Path) -> None:
    assert IsolatedDir(tmp_path / "a").user_id({}) != IsolatedDir(tmp_path / "b").user_id({})


def test_user_id_explicit_env_wins_over_stored(tmp_path: Path) -> None:
    iso = IsolatedDir(tmp_path / "d")
    stored = iso.user_id({})
    assert iso.user_id({"SKYPILOT_USER_ID": "team-a"}) == "team-a"
    assert iso.user_id({}) == stored
    assert iso.environment({"SKYPILOT_USER_ID": "team-a"})["SKYPILOT_USER_ID"] == "team-a"


@pytest.mark.parametrize(
    "value", ["-leading-dash", "has space", "dots.no", "x/y"], ids=["dash", "space", "dot", "slash"]
)
def test_user_id_invalid_explicit_config_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        IsolatedDir(tmp_path / "d").user_id({"SKYPILOT_USER_ID": value})
    assert caught.value.remedy


def test_environment_isolates_every_location(tmp_path: Path, caller: dict[str, str]) -> None:
    iso = IsolatedDir(tmp_path / "d")
    env = iso.environment(
        {**caller, "SKYPILOT_CONFIG": "/x.yaml", "SKYPILOT_PROJECT_CONFIG": "/p.yaml", "KEEP": "1"}
    )
    assert env["HOME"] == str(iso.home)
    assert env["SKY_RUNTIME_DIR"] == str(iso.runtime)
    assert env["SKYPILOT_GLOBAL_CONFIG"] == str(iso.config_file)
    assert env["SKYPILOT_USER_ID"] == iso.user_id({})
    assert env["KEEP"] == "1"
    assert "SKYPILOT_CONFIG" not in env and "SKYPILOT_PROJECT_CONFIG" not in env


def test_user_id_file_with_invalid_id_is_config_error(tmp_path: Path) -> None:
    from npa_infra.errors import ConfigError
    from npa_infra.skypilot.isolation import IsolatedDir

    isolated = IsolatedDir(tmp_path / "d")
    isolated.root.mkdir(mode=0o700)
    isolated.user_id_file.write_text("not valid!\n")
    with pytest.raises(ConfigError, match="valid SkyPilot user id") as caught:
        isolated.user_id({})
    assert "NEW controller" in caught.value.remedy


def test_user_id_concurrent_creation_agrees(tmp_path: Path) -> None:
    import concurrent.futures

    from npa_infra.skypilot.isolation import IsolatedDir

    isolated = IsolatedDir(tmp_path / "d")
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        ids = set(pool.map(lambda _i: isolated.user_id({}), range(32)))
    assert len(ids) == 1


@pytest.mark.parametrize(
    ("explicit", "env_dir", "saved", "expected"),
    [
        ("/x/explicit", "/x/env", "/x/saved", "/x/explicit"),
        (None, "/x/env", "/x/saved", "/x/env"),
        (None, None, "/x/saved", "/x/saved"),
    ],
    ids=["explicit-wins", "env-next", "config-last"],
)
def test_resolve_isolated_dir_precedence(
    explicit: str | None, env_dir: str | None, saved: str, expected: str
) -> None:
    from npa_infra.skypilot.isolation import resolve_isolated_dir

    env = {"NPA_SKYPILOT_ISOLATED_CONFIG_DIR": env_dir} if env_dir else {}
    config = {"skypilot": {"isolated_config_dir": saved}}
    assert resolve_isolated_dir(explicit, env, config, "dev").root == Path(expected)


def test_resolve_isolated_dir_default_is_one_directory_per_stack(tmp_path: Path) -> None:
    from npa_infra.skypilot.isolation import resolve_isolated_dir

    env = {"NPA_HOME": str(tmp_path)}
    dev = resolve_isolated_dir(None, env, {}, "dev")
    prod = resolve_isolated_dir(None, env, {}, "prod")
    assert dev.root == tmp_path / "skypilot-state" / "dev"
    assert prod.root != dev.root
    assert dev.user_id({}) != prod.user_id({})  # different directories, different controllers
    assert resolve_isolated_dir(None, env, {}, "dev").user_id({}) == dev.user_id({})


def test_resolve_isolated_dir_bad_stack_name_is_config_error(tmp_path: Path) -> None:
    from npa_infra.skypilot.isolation import resolve_isolated_dir

    with pytest.raises(ConfigError, match="cannot name a state directory"):
        resolve_isolated_dir(None, {"NPA_HOME": str(tmp_path)}, {}, "../evil")


# -- a directory a stack's controller resource claimed ---------------------------------------------
STACK_SETTINGS = ControllerSettings(
    pod_config={"spec": {"imagePullSecrets": [{"name": "npa-nebius-registry"}]}},
    remote_identity="npa-runner",
)


def _owned(tmp_path: Path, caller: dict[str, str]) -> tuple[IsolatedDir, bytes]:
    iso = IsolatedDir(tmp_path / "owned")
    iso.prepare(caller, context="npa-ctx", controller=STACK_SETTINGS, stack="dev", own=True)
    return iso, iso.config_file.read_bytes()


def test_owned_config_claimed_private_and_never_rewritten_by_a_submit(
    tmp_path: Path, caller: dict[str, str]
) -> None:
    iso, written = _owned(tmp_path, caller)
    assert iso.owner() == "dev" and _mode(iso.owner_file) == 0o600
    assert yaml.safe_load(written)["kubernetes"]["remote_identity"] == "npa-runner"

    iso.prepare(caller, context="npa-ctx", controller=ControllerSettings(), stack="dev")

    assert iso.config_file.read_bytes() == written  # adopted as it is: SA and secrets kept


def test_owned_config_refused_to_another_stack_or_none(
    tmp_path: Path, caller: dict[str, str]
) -> None:
    iso, written = _owned(tmp_path, caller)
    for stack in ("prod", None):
        with pytest.raises(ConfigError, match="controller of stack dev") as err:
            iso.prepare(caller, context="npa-ctx", controller=ControllerSettings(), stack=stack)
        assert "--stack dev" in err.value.remedy
    assert iso.config_file.read_bytes() == written


def test_owned_config_refused_for_another_context(tmp_path: Path, caller: dict[str, str]) -> None:
    iso, _ = _owned(tmp_path, caller)
    with pytest.raises(ConfigError, match=r"allows \['npa-ctx'\], not other-ctx"):
        iso.prepare(caller, context="other-ctx", controller=ControllerSettings(), stack="dev")


def test_owner_rewrites_and_release_frees_the_directory(
    tmp_path: Path, caller: dict[str, str]
) -> None:
    iso, _ = _owned(tmp_path, caller)
    iso.prepare(
        caller, context="npa-ctx", controller=ControllerSettings(cpus=4), stack="dev", own=True
    )
    assert (
        yaml.safe_load(iso.config_file.read_text())["jobs"]["controller"]["resources"]["cpus"] == 4
    )

    iso.release()

    assert iso.owner() is None
    iso.prepare(caller, context="other-ctx", controller=ControllerSettings(), stack=None)
    assert yaml.safe_load(iso.config_file.read_text())["kubernetes"]["allowed_contexts"] == [
        "other-ctx"
    ]


def test_own_without_stack_name_refused(tmp_path: Path, caller: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="needs the stack's name"):
        IsolatedDir(tmp_path / "d").prepare(
            caller, context="c", controller=ControllerSettings(), own=True
        )
