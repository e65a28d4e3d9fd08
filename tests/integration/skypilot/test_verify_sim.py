"""``npa skypilot verify`` runs ``sky check kubernetes`` on the simulator (issue 17).

Through the typer app with injected ``Services``: the cluster is a
``FakeCluster`` on a ``FakeClock`` (the readiness window passes at once), the
SkyPilot is the simulator behind the real ``SkyCli`` in the isolated state
``Services.isolated_dir``, and the operator's tool lookup is ``Services.which``.
The version gate reads a stand-in venv (tests/unit/cli/test_verify_cli.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from npa_infra.cli.main import app
from npa_infra.skypilot import port, status
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.target.services import Clock, Services, SkyFactory, open_sky
from tests.integration.skypilot.simenv import SIM_PORT
from tests.support import skyvenv
from tests.support.fakecluster import FakeClock, FakeCluster
from tests.support.skysim import harness
from tests.unit.cli.test_verify_cli import make_venv

CTX = "npa-ctx"
ALL_TOOLS = frozenset({"socat", "nc", "rsync"})


class World:
    """One verify call's world: kubeconfig, stand-in venv, simulator, tools, cluster."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.monkeypatch = monkeypatch
        self.simulator = skyvenv.simulator(tmp)
        self.venv_sky = make_venv(tmp / "venv")
        self.state = tmp / "sky-state"
        self.faults_file = tmp / "faults.json"
        self.operator_tools = set(ALL_TOOLS)
        self.server_tools = tmp / "server-tools"  # the PATH the simulated API server sees
        self.server_tools.mkdir()
        self.give_server("socat", "nc")
        kubeconfig = tmp / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "contexts": [
                        {"name": CTX, "context": {"cluster": "c", "user": "u", "namespace": "npa"}}
                    ],
                }
            ),
            "utf-8",
        )
        for name, value in {
            "KUBECONFIG": str(kubeconfig),
            "NPA_HOME": str(tmp / "npa-home"),
            "PATH": str(self.server_tools),
            "SKYSIM_FAULTS": str(self.faults_file),
            "SKYSIM_API_PORT": SIM_PORT,
        }.items():
            monkeypatch.setenv(name, value)
        for name in ("NPA_SKYPILOT_BIN", "NPA_SKYPILOT_ISOLATED_CONFIG_DIR", "NEBIUS_IAM_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("SKYPILOT_API_SERVER_ENDPOINT", raising=False)
        self.cluster = FakeCluster(
            CTX, namespaces={"npa"}, service_accounts={("npa", "skypilot-service-account")}
        )
        self.real_sky = False  # True: Services' own SkyPilot (the configured binary)

    def give_server(self, *names: str) -> None:
        for name in names:
            (self.server_tools / name).write_text("#!/bin/sh\n", "utf-8")
            (self.server_tools / name).chmod(0o755)

    def faults(self, *rules: dict[str, object]) -> None:
        harness.write_faults(self.faults_file, list(rules))

    def services(self) -> Services:
        def sky(isolated: IsolatedDir, env: Mapping[str, str], _bin: str | None) -> SkyCli:
            return SkyCli(self.simulator, isolated, env, check_ports=False)

        clock = FakeClock()
        chosen: SkyFactory = open_sky if self.real_sky else sky
        return Services(
            cluster=lambda _path, _ctx: self.cluster,
            clock=Clock(clock, clock.sleep, lambda: 0.5),
            which=lambda name: f"/usr/bin/{name}" if name in self.operator_tools else None,
            isolated_dir=self.state,
            sky=chosen,
        )

    def verify(self, *args: str) -> Result:
        argv = ["skypilot", "verify", "--cluster", CTX, "--sky-bin", str(self.venv_sky), *args]
        return CliRunner().invoke(app, argv, obj=self.services(), catch_exceptions=False)

    def checks(self, result: Result) -> dict[str, dict[str, object]]:
        return {c["name"]: c for c in json.loads(result.stdout)["checks"]}

    def sky_calls(self) -> list[dict[str, object]]:
        state = harness.read_state(IsolatedDir(self.state).runtime / ".sky")
        return [c for c in state["calls"] if c["command"] == "check"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    status.clear_gate_cache()
    monkeypatch.setattr(
        port, "check_port", lambda number, _expected: port.PortCheck(number, port.Ownership.FREE)
    )
    return World(tmp_path, monkeypatch)


def test_verify_sky_check_enabled_json_ok_in_isolated_state(world: World) -> None:
    result = world.verify("--json")

    assert result.exit_code == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert payload["status"] == "ok"
    assert payload["kubernetes_enabled"] is True
    assert payload["sky_check"]["verdict"] == "enabled"
    assert payload["sky_check"]["contexts"] == {CTX: "enabled."}
    assert payload["api_server"] == {
        "endpoint": f"http://127.0.0.1:{SIM_PORT}",
        "remote": False,
        "reported": True,
    }
    assert payload["client_tools"]["ok"] is True
    checks = world.checks(result)
    assert checks["sky_check_kubernetes"]["ok"] is True
    assert checks["api_server"]["ok"] is True
    # the same isolated state a submit uses: its config allows exactly this context
    (call,) = world.sky_calls()
    assert call["argv"] == ["check", "kubernetes"]
    assert call["cwd"] == str(world.state)
    config = yaml.safe_load((world.state / "config.yaml").read_text("utf-8"))
    assert config["kubernetes"]["allowed_contexts"] == [CTX]
    assert result.stderr == ""


def test_verify_sky_check_disabled_reason_text_failed_exit_1(world: World) -> None:
    reason = "Failed to communicate with the cluster: (401) Unauthorized"
    world.faults({"command": "check", "action": "check_disabled", "reason": reason})

    result = world.verify()

    assert result.exit_code == 1
    assert "FAILED sky_check_kubernetes: SkyPilot disabled Kubernetes:" in result.stdout
    assert f"└── {CTX}: disabled. Reason: {reason}" in result.stdout
    assert f"api server: http://127.0.0.1:{SIM_PORT} (local)" in result.stdout
    assert "verify: failed" in result.stdout
    assert f"Hint: fix SkyPilot's reason, then `npa skypilot verify --cluster {CTX}`" in (
        result.stderr
    )


def test_verify_sky_check_disabled_json_kubernetes_not_enabled(world: World) -> None:
    world.faults({"command": "check", "action": "check_disabled", "reason": "(403) Forbidden"})

    result = world.verify("--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "failed"
    assert payload["kubernetes_enabled"] is False
    assert payload["sky_check"]["verdict"] == "disabled"
    assert "(403) Forbidden" in payload["sky_check"]["reason"]


def test_verify_no_socat_anywhere_both_checks_name_packages(world: World) -> None:
    for tool in ("socat", "nc"):
        (world.server_tools / tool).unlink()
    world.operator_tools -= {"socat", "nc"}

    result = world.verify("--json")

    assert result.exit_code == 1
    checks = world.checks(result)
    sky_check = checks["sky_check_kubernetes"]
    assert sky_check["ok"] is False
    assert "`socat` is required to setup Kubernetes cloud" in str(sky_check["detail"])
    tools = checks["client_tools"]
    assert tools["ok"] is False
    assert "`socat` is not on PATH: SkyPilot disables Kubernetes without it" in str(tools["detail"])
    assert "sudo apt install socat netcat-openbsd" in str(tools["remedy"])
    assert json.loads(result.stdout)["client_tools"]["missing"] == ["socat", "nc"]


def test_verify_no_rsync_failed_refuses_to_provision(world: World) -> None:
    world.operator_tools.discard("rsync")

    result = world.verify("--json")

    assert result.exit_code == 1
    tools = world.checks(result)["client_tools"]
    assert tools["detail"] == "`rsync` is not on PATH: SkyPilot refuses to provision without it"
    assert "brew install rsync" in str(tools["remedy"])
    assert world.checks(result)["sky_check_kubernetes"]["ok"] is True


def test_verify_api_server_unreachable_named_no_traceback(world: World) -> None:
    world.faults({"command": "check", "action": "fail", "kind": "warmup"})

    result = world.verify("--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["sky_check"]["verdict"] == "unknown"
    assert payload["sky_check"]["error_kind"] == "api_warmup"
    assert payload["api_server"]["reported"] is False
    server = world.checks(result)["api_server"]
    assert server["ok"] is False
    assert f"http://127.0.0.1:{port.API_PORT} did not answer" in str(server["detail"])
    assert "npa skypilot status" in str(server["remedy"])
    assert "Traceback" not in result.stdout + result.stderr


def test_verify_remote_api_server_endpoint_reported(world: World) -> None:
    world.monkeypatch.setenv("SKYPILOT_API_SERVER_ENDPOINT", "https://sky.example.com")

    result = world.verify("--json")

    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["api_server"] == {
        "endpoint": "https://sky.example.com",
        "remote": True,
        "reported": True,
    }
    assert "remote API server https://sky.example.com" in str(
        world.checks(result)["api_server"]["detail"]
    )


def test_verify_skypilot_not_installed_said_in_check_not_crash(world: World) -> None:
    world.real_sky = True  # Services' own SkyPilot: no binary is configured anywhere

    result = CliRunner().invoke(
        app,
        ["skypilot", "verify", "--cluster", CTX, "--json"],
        obj=world.services(),
        catch_exceptions=False,
    )

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    sky_check = world.checks(result)["sky_check_kubernetes"]
    assert str(sky_check["detail"]).startswith("SkyPilot could not run `sky check kubernetes`:")
    assert "npa skypilot bootstrap" in str(sky_check["remedy"])
    assert payload["sky_check"]["verdict"] == "not_run"
    assert "api_server" not in world.checks(result)
