"""``npa skypilot verify`` through the real typer app (cli.md §2.3).

The cluster is a ``FakeCluster`` and the clock a ``FakeClock``, injected as
``Services.cluster`` and ``Services.clock`` in the root context, so the
10-second readiness window passes without sleeping; the SkyPilot venv is
a stand-in of two shell scripts, so the real version gate runs. ``sky check
kubernetes`` runs on the SkyPilot simulator (``Services.sky``) with ``socat``
and ``nc`` on its PATH, and the operator's tools are all found
(``Services.which``); tests/integration/skypilot/test_verify_sim.py covers
its other answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.kube.models import KubeErrorKind
from npa_infra.skypilot import port, status, verify
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.target.services import Clock, Services
from tests.support import skyvenv
from tests.support.fakecluster import FakeClock, FakeCluster, kube_error

CTX = "nebius-prod"
REPORT_KEYS = {
    "status",
    "kubernetes_required",
    "kubernetes_enabled",
    "context",
    "kubeconfig",
    "namespace",
    "service_account",
    "readiness",
    "checks",
    "sky_version",
    "sky_check",
    "api_server",
    "client_tools",
}
Invoke = Callable[..., Result]


def make_venv(root: Path, kubernetes: str = "35.0.0") -> Path:
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    found = {
        "python": "3.11.7",
        "skypilot": "0.12.2",
        "kubernetes": kubernetes,
        "fastapi": "0.119.1",
        "click": "8.1.8",
    }
    (bindir / "sky").write_text("#!/bin/sh\necho 'skypilot, version 0.12.2'\n", "utf-8")
    (bindir / "python").write_text(f"#!/bin/sh\necho '{json.dumps(found)}'\n", "utf-8")
    for name in ("sky", "python"):
        (bindir / name).chmod(0o755)
    return bindir / "sky"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status.clear_gate_cache()
    monkeypatch.setattr(
        port, "check_port", lambda number, _expected: port.PortCheck(number, port.Ownership.FREE)
    )
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    for name in (
        "NPA_SKYPILOT_BIN",
        "NPA_SKYPILOT_ISOLATED_CONFIG_DIR",
        *verify.STALE_TOKEN_VARS,
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "contexts": [
                    {"name": CTX, "context": {"cluster": "c", "user": "u", "namespace": "team"}}
                ]
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("KUBECONFIG", str(config))


@pytest.fixture
def given() -> list[Services]:
    """The services the next ``npa`` call runs with (the real ones unless ``cluster`` is used)."""
    return [Services()]


@pytest.fixture
def cluster(given: list[Services], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(
        CTX, namespaces={"team"}, service_accounts={("team", "skypilot-service-account")}
    )
    clock = FakeClock()
    simulator = skyvenv.simulator(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("socat", "nc"):  # what the simulated API server's own check looks for
        (tools / name).write_text("#!/bin/sh\n", "utf-8")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.setenv("SKYSIM_API_PORT", "47346")

    def sky(isolated: IsolatedDir, env: Mapping[str, str], _bin: str | None) -> SkyCli:
        return SkyCli(simulator, isolated, env, check_ports=False)

    given[0] = Services(
        cluster=lambda _path, _ctx: fake,
        clock=Clock(clock, clock.sleep, lambda: 0.5),
        sky=sky,
        which=lambda name: f"/usr/bin/{name}",
        isolated_dir=tmp_path / "sky-state",
    )
    return fake


@pytest.fixture
def sky(tmp_path: Path) -> Path:
    return make_venv(tmp_path / "venv")


@pytest.fixture
def npa(given: list[Services]) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(
            app, ["skypilot", *map(str, args)], obj=given[0], catch_exceptions=False
        )

    return invoke


def test_verify_json_ok_exit_0_shape(npa: Invoke, cluster: FakeCluster, sky: Path) -> None:
    result = npa("verify", "--cluster", CTX, "--sky-bin", sky, "--json")

    assert result.exit_code == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == REPORT_KEYS
    assert payload["status"] == "ok"
    assert payload["context"] == CTX
    assert payload["readiness"]["state"] == "ready"
    assert len(payload["readiness"]["samples"]) == 3
    assert all(set(c) == {"name", "ok", "detail", "remedy"} for c in payload["checks"])
    assert payload["sky_version"] == "0.12.2"
    assert payload["sky_check"]["verdict"] == "enabled"
    assert payload["api_server"] == {
        "endpoint": "http://127.0.0.1:47346",
        "remote": False,
        "reported": True,
    }
    assert result.stderr == ""


def test_verify_output_format_json_same_shape(npa: Invoke, cluster: FakeCluster, sky: Path) -> None:
    result = npa("verify", "--context", CTX, "--sky-bin", sky, "--output-format", "json")

    assert result.exit_code == 0
    assert set(json.loads(result.stdout)) == REPORT_KEYS


def test_verify_kubernetes_37_venv_failed_exit_1(
    npa: Invoke, cluster: FakeCluster, tmp_path: Path
) -> None:
    sky = make_venv(tmp_path / "bad-venv", kubernetes="37.0.2")

    result = npa("verify", "--cluster", CTX, "--sky-bin", sky, "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "failed"
    pin = next(c for c in payload["checks"] if c["name"] == "kubernetes_client_pin")
    assert pin["ok"] is False
    assert "npa skypilot bootstrap" in pin["remedy"]


def test_verify_stale_token_text_failed_hint_on_stderr(
    npa: Invoke, cluster: FakeCluster, sky: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "t1.canary-secret")

    result = npa("verify", "--cluster", CTX, "--sky-bin", sky)

    assert result.exit_code == 1
    assert "FAILED stale_iam_token: NEBIUS_IAM_TOKEN is set" in result.stdout
    assert "verify: failed" in result.stdout
    assert "Hint: unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN" in result.stderr
    assert "t1.canary-secret" not in result.stdout + result.stderr


def test_verify_text_ok_progress_on_stderr(npa: Invoke, cluster: FakeCluster, sky: Path) -> None:
    result = npa("verify", "--cluster", CTX, "--sky-bin", sky)

    assert result.exit_code == 0
    assert "ok     readiness: /readyz passed" in result.stdout
    assert "verify: ok" in result.stdout
    assert "/readyz" in result.stderr


def test_verify_unknown_context_exit_1_lists_contexts(
    npa: Invoke, cluster: FakeCluster, sky: Path
) -> None:
    result = npa("verify", "--cluster", "nope", "--sky-bin", sky, "--json")

    assert result.exit_code == 1
    first = json.loads(result.stdout)["checks"][0]
    assert first["name"] == "kubeconfig_context"
    assert CTX in first["detail"]
    assert cluster.calls == []


def test_verify_readyz_unauthorised_exit_1(npa: Invoke, cluster: FakeCluster, sky: Path) -> None:
    cluster.readyz_script = [kube_error(KubeErrorKind.AUTH, "401 Unauthorized", 401)]

    result = npa("verify", "--cluster", CTX, "--sky-bin", sky, "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["readiness"]["state"] == "terminal"
    assert payload["kubernetes_enabled"] is False


def test_verify_invalid_output_format_usage_exit_64(npa: Invoke, cluster: FakeCluster) -> None:
    result = npa("verify", "--cluster", CTX, "--output-format", "yaml")

    assert result.exit_code == 64
    assert result.stdout == ""
    assert "invalid --output-format" in result.stderr


def test_verify_missing_cluster_usage_exit_64(npa: Invoke) -> None:
    result = npa("verify", "--json")

    assert result.exit_code == 64
    assert not result.stdout.strip().startswith("{")
