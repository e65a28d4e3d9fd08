"""``livegate.enforce``: the observations it gathers and the refusal it raises."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from npa_infra.errors import ConfigError, SkyPilotDriftError
from npa_infra.skypilot import drift, livegate, port
from tests.support import skyvenv
from tests.support.skysim import harness

CANARY = "t1.CANARY-iam-token-value-9f3e"


class Ports:
    """A port checker answering one ownership per port, recording what it was asked."""

    def __init__(self, **owners: port.Ownership) -> None:
        self.owners = {int(k.removeprefix("p")): v for k, v in owners.items()}
        self.asked: list[tuple[int, str | None]] = []

    def __call__(self, number: int, expected: Mapping[str, str]) -> port.PortCheck:
        self.asked.append((number, expected.get("HOME")))
        ownership = self.owners.get(number, port.Ownership.FREE)
        if ownership is port.Ownership.FREE:
            return port.PortCheck(number, ownership)
        return port.PortCheck(number, ownership, 4242, "/home/someone-else", "npa-other")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"NPA_HOME": str(tmp_path / "npa-home"), "HOME": str(tmp_path / "home")}


SKY_ENV = {"HOME": "/iso/home", "SKYPILOT_USER_ID": "npa-0123456789"}


@pytest.mark.parametrize(
    ("versions", "named"),
    [
        (skyvenv.DRIFTED_KUBERNETES, "kubernetes 37.0.0"),
        (skyvenv.DRIFTED_FASTAPI, "fastapi 0.120.0"),
    ],
    ids=["kubernetes-37", "fastapi-0.120"],
)
def test_enforce_drifted_venv_raises_drift_error_with_bootstrap_remedy(
    tmp_path: Path, env: dict[str, str], versions: Mapping[str, str], named: str
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv", versions)
    with pytest.raises(SkyPilotDriftError) as caught:
        livegate.enforce(sky, env, sky_env=SKY_ENV, probes=livegate.Probes(port_check=Ports()))
    error = caught.value
    assert isinstance(error, ConfigError) and error.exit_code == 1
    assert error.remedy == "npa skypilot bootstrap"
    assert named in error.message and "npa ran nothing" in error.message
    assert error.details["reason"] == "pins_broken" and error.details["sky_bin"] == str(sky)
    json.dumps(error.details)  # JSON-safe evidence


def test_enforce_good_venv_free_ports_ok_and_checks_both_ports_as_the_state_dir(
    tmp_path: Path, env: dict[str, str]
) -> None:
    ports = Ports()
    verdict = livegate.enforce(
        skyvenv.make_venv(tmp_path / "v"),
        env,
        sky_env=SKY_ENV,
        probes=livegate.Probes(port_check=ports),
    )
    assert (verdict.action, verdict.reason) == (drift.Action.OK, drift.Reason.PINS_HOLD)
    assert ports.asked == [(port.API_PORT, "/iso/home"), (port.EXTRA_PORT, "/iso/home")]


@pytest.mark.parametrize(
    ("owners", "held"),
    [
        ({f"p{port.API_PORT}": port.Ownership.FOREIGN}, port.API_PORT),
        ({f"p{port.EXTRA_PORT}": port.Ownership.UNKNOWN}, port.EXTRA_PORT),
    ],
    ids=["api-port-foreign", "extra-port-unattributed"],
)
def test_enforce_foreign_api_server_refused_before_anything_runs(
    tmp_path: Path, env: dict[str, str], owners: dict[str, port.Ownership], held: int
) -> None:
    with pytest.raises(SkyPilotDriftError) as caught:
        livegate.enforce(
            skyvenv.make_venv(tmp_path / "v"),
            env,
            sky_env=SKY_ENV,
            probes=livegate.Probes(port_check=Ports(**owners)),
        )
    assert caught.value.details["reason"] == "foreign_api_server"
    assert caught.value.details["api_server"]["port"] == held  # type: ignore[index]  # JSON dict
    assert caught.value.remedy == drift.PORT_REMEDY


def test_enforce_remote_api_server_endpoint_skips_port_check(
    tmp_path: Path, env: dict[str, str]
) -> None:
    ports = Ports(**{f"p{port.API_PORT}": port.Ownership.FOREIGN})
    remote = {**SKY_ENV, "SKYPILOT_API_SERVER_ENDPOINT": "https://sky.example"}
    livegate.enforce(
        skyvenv.make_venv(tmp_path / "v"),
        env,
        sky_env=remote,
        probes=livegate.Probes(port_check=ports),
    )
    assert ports.asked == []


def test_enforce_injected_adapter_reads_no_venv_checks_no_port(env: dict[str, str]) -> None:
    ports = Ports(**{f"p{port.API_PORT}": port.Ownership.FOREIGN})
    verdict = livegate.enforce(None, env, sky_env=None, probes=livegate.Probes(port_check=ports))
    assert (verdict.action, verdict.reason) == (drift.Action.OK, drift.Reason.UNVERIFIED)
    assert ports.asked == []


def test_enforce_simulator_run_by_a_python_without_skypilot_refused(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # issue 24: what the binary would import is unknown, so the gate refuses it
    wrapper = harness.write_wrapper(tmp_path)  # the project's venv: no skypilot installed
    with pytest.raises(SkyPilotDriftError) as caught:
        livegate.enforce(wrapper, env, sky_env=SKY_ENV, probes=livegate.Probes(port_check=Ports()))
    assert caught.value.details["reason"] == "venv_unknown"
    assert caught.value.remedy == "npa skypilot bootstrap"
    assert "imports no skypilot" in caught.value.message


def test_enforce_simulator_in_healthy_venv_pins_hold(tmp_path: Path, env: dict[str, str]) -> None:
    verdict = livegate.enforce(
        skyvenv.simulator(tmp_path),
        env,
        sky_env=SKY_ENV,
        probes=livegate.Probes(port_check=Ports()),
    )
    assert (verdict.action, verdict.reason) == (drift.Action.OK, drift.Reason.PINS_HOLD)


def _install(kind: str, root: Path, versions: Mapping[str, str]) -> tuple[Path, dict[str, str]]:
    """A ``sky`` of one install layout, and the environment of its calls (``sky_env``)."""
    if kind == "venv":
        return skyvenv.make_venv(root / "venv", versions), SKY_ENV
    if kind == "conda":
        return skyvenv.make_conda(root / "conda", versions), SKY_ENV
    if kind == "system":
        return skyvenv.make_system(root / "usr", versions), SKY_ENV
    home = root / "iso-home"  # --user: the user site of the HOME the sky calls run with
    sky = skyvenv.make_user(root / "usr", home / ".local", versions)
    return sky, {**SKY_ENV, "HOME": str(home)}


@pytest.mark.parametrize("kind", ["venv", "conda", "system", "user"])
def test_enforce_each_install_layout_kubernetes_37_refused(
    tmp_path: Path, env: dict[str, str], kind: str
) -> None:
    sky, sky_env = _install(kind, tmp_path, skyvenv.DRIFTED_KUBERNETES)
    with pytest.raises(SkyPilotDriftError) as caught:
        livegate.enforce(sky, env, sky_env=sky_env, probes=livegate.Probes(port_check=Ports()))
    assert caught.value.details["reason"] == "pins_broken"
    assert "kubernetes 37.0.0" in caught.value.message
    assert caught.value.remedy == "npa skypilot bootstrap"


@pytest.mark.parametrize("kind", ["venv", "conda", "system", "user"])
def test_enforce_each_install_layout_good_pins_ok(
    tmp_path: Path, env: dict[str, str], kind: str
) -> None:
    sky, sky_env = _install(kind, tmp_path, skyvenv.GOOD)
    verdict = livegate.enforce(
        sky, env, sky_env=sky_env, probes=livegate.Probes(port_check=Ports())
    )
    assert (verdict.action, verdict.reason) == (drift.Action.OK, drift.Reason.PINS_HOLD)


@pytest.mark.parametrize("name", drift.STALE_TOKEN_VARS)
def test_enforce_iam_token_warns_names_variable_never_value(
    tmp_path: Path, env: dict[str, str], name: str
) -> None:
    env[name] = CANARY
    verdict = livegate.enforce(
        skyvenv.make_venv(tmp_path / "v"),
        env,
        sky_env=SKY_ENV,
        probes=livegate.Probes(port_check=Ports()),
    )
    (advisory,) = verdict.advisories
    assert verdict.action is drift.Action.WARN
    assert name in advisory.message and advisory.remedy == drift.TOKEN_REMEDY
    assert CANARY not in repr(verdict) + json.dumps(advisory.to_json()) + advisory.text()


def test_enforce_empty_token_variable_no_warning(tmp_path: Path, env: dict[str, str]) -> None:
    env["NEBIUS_IAM_TOKEN"] = ""
    assert livegate.token_vars(env) == ()


def test_enforce_drift_error_with_token_set_never_shows_value(
    tmp_path: Path, env: dict[str, str]
) -> None:
    env["NEBIUS_IAM_TOKEN"] = CANARY
    sky = skyvenv.make_venv(tmp_path / "v", skyvenv.DRIFTED_KUBERNETES)
    with pytest.raises(SkyPilotDriftError) as caught:
        livegate.enforce(sky, env, sky_env=SKY_ENV, probes=livegate.Probes(port_check=Ports()))
    assert CANARY not in str(caught.value) + json.dumps(caught.value.details)
