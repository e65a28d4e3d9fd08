"""``npa skypilot status|bootstrap`` through the real typer app (cli.md §2.1, §2.2).

``status`` runs against a stand-in venv of two shell scripts (``sky`` prints
the version line, ``python`` the package probe), so the real subprocess
runner and the real gate are exercised. ``bootstrap`` is tested with the SDK
function replaced: its behaviour has its own suite (tests/unit/skypilot).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.errors import ConfigError, ExternalError
from npa_infra.skypilot import bootstrap, port, status
from npa_infra.skypilot.bootstrap import BootstrapReport, BootstrapStatus, PinState

Invoke = Callable[..., Result]
GOOD = {"skypilot": "0.12.2", "kubernetes": "35.0.0", "fastapi": "0.119.1", "click": "8.1.8"}


def make_venv(root: Path, *, version: str = "0.12.2", **packages: str) -> Path:
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    found = {"python": "3.11.7", **GOOD, **packages}
    (bindir / "sky").write_text(f"#!/bin/sh\necho 'skypilot, version {version}'\n", "utf-8")
    (bindir / "python").write_text(f"#!/bin/sh\necho '{json.dumps(found)}'\n", "utf-8")
    for name in ("sky", "python"):
        (bindir / name).chmod(0o755)
    return bindir / "sky"


@pytest.fixture(autouse=True)
def _fresh_gate_cache() -> None:
    status.clear_gate_cache()


@pytest.fixture(autouse=True)
def _no_local_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The port check reads /proc: pin it so a real server on this host changes nothing."""
    monkeypatch.setattr(
        port, "check_port", lambda number, _expected: port.PortCheck(number, port.Ownership.FREE)
    )


@pytest.fixture
def npa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    for name in ("NPA_SKYPILOT_BIN", "NPA_SKYPILOT_VENV_PATH", "NPA_SKYPILOT_ISOLATED_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(app, ["skypilot", *map(str, args)], catch_exceptions=False)

    return invoke


# -- status --------------------------------------------------------------------------------
def test_status_bin_path_prints_only_the_path(npa: Invoke, tmp_path: Path) -> None:
    sky = make_venv(tmp_path / "venv")

    result = npa("status", "--bin-path", "--sky-bin", sky)

    assert result.exit_code == 0
    assert result.stdout == f"{sky}\n"
    assert result.stderr == ""


def test_status_bin_path_from_env(
    npa: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sky = make_venv(tmp_path / "venv")
    monkeypatch.setenv("NPA_SKYPILOT_BIN", str(sky))

    result = npa("status", "--bin-path")

    assert (result.exit_code, result.stdout) == (0, f"{sky}\n")


def test_status_bin_path_unresolved_exit_1_message_on_stderr(npa: Invoke) -> None:
    result = npa("status", "--bin-path")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: no SkyPilot binary is configured")
    assert "Hint: run `npa skypilot bootstrap`" in result.stderr


def test_status_json_healthy_exit_0(npa: Invoke, tmp_path: Path) -> None:
    sky = make_venv(tmp_path / "venv")

    result = npa("status", "--sky-bin", sky, "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["status"] == "ok"
    assert set(payload) == {
        "status",
        "ok",
        "bin_path",
        "source",
        "skypilot_version",
        "python",
        "kubernetes_client_version",
        "fastapi_version",
        "click_version",
        "api_server",
        "warnings",
        "remedies",
    }
    assert payload["ok"] is True
    assert payload["source"] == "explicit"
    assert payload["skypilot_version"] == "0.12.2"
    assert payload["kubernetes_client_version"] == "35.0.0"
    assert payload["api_server"] == {"listening": False, "owner_matches": None}


def test_status_json_kubernetes_37_exit_1_with_remedy(npa: Invoke, tmp_path: Path) -> None:
    sky = make_venv(tmp_path / "venv", kubernetes="37.0.2")

    result = npa("status", "--sky-bin", sky, "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert (payload["ok"], payload["status"]) == (False, "failed")
    assert any("pod_config" in w for w in payload["warnings"])
    assert status.BOOTSTRAP_REMEDY in payload["remedies"]


def test_status_json_not_installed_exit_1(npa: Invoke) -> None:
    result = npa("status", "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["bin_path"] is None
    assert payload["status"] == "not_installed"


def test_status_text_wrong_version_gate_failed_hint_on_stderr(npa: Invoke, tmp_path: Path) -> None:
    sky = make_venv(tmp_path / "venv", version="0.12.3")

    result = npa("status", "--sky-bin", sky)

    assert result.exit_code == 1
    assert "skypilot: 0.12.3" in result.stdout
    assert "gate: FAILED" in result.stdout
    assert "requires SkyPilot 0.12.2" in result.stderr
    assert result.stderr.rstrip().endswith(f"Hint: {status.BOOTSTRAP_REMEDY}")


def test_status_text_healthy(npa: Invoke, tmp_path: Path) -> None:
    sky = make_venv(tmp_path / "venv")

    result = npa("status", "--sky-bin", sky)

    assert result.exit_code == 0
    assert f"sky binary: {sky} (from explicit)" in result.stdout
    assert "gate: ok" in result.stdout


# -- bootstrap -------------------------------------------------------------------------------
def _report(**overrides: Any) -> BootstrapReport:
    fields: dict[str, Any] = {
        "status": BootstrapStatus.CREATED,
        "venv": "/v",
        "sky_bin": "/v/bin/sky",
        "sky_version": "0.12.2",
        "python": "3.11.7",
        "pins": {
            "kubernetes": PinState(constraint="kubernetes>=20,!=32.0.0,<36", installed="35.0.0")
        },
        "journal": "/.v.bootstrap-journal.json",
    }
    fields.update(overrides)
    return BootstrapReport(**fields)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def fake(path: str | None, python: str | None, **kw: Any) -> BootstrapReport:
        seen.append({"path": path, "python": python, **kw})
        return _report()

    monkeypatch.setattr(bootstrap, "bootstrap", fake)
    return seen


def test_bootstrap_json_shape_exit_0(npa: Invoke, calls: list[dict[str, Any]]) -> None:
    result = npa("bootstrap", "--json")

    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "venv", "sky_bin", "sky_version", "python", "pins", "journal"}
    assert payload["status"] == "created"
    assert payload["pins"]["kubernetes"] == {
        "constraint": "kubernetes>=20,!=32.0.0,<36",
        "installed": "35.0.0",
    }
    assert calls[0]["save"] is True and calls[0]["progress"] is None


def test_bootstrap_passes_path_python_no_save(npa: Invoke, calls: list[dict[str, Any]]) -> None:
    result = npa("bootstrap", "--path", "/tmp/x", "--python", "python3.12", "--no-save")

    assert result.exit_code == 0
    assert (calls[0]["path"], calls[0]["python"], calls[0]["save"]) == (
        "/tmp/x",
        "python3.12",
        False,
    )
    assert result.stdout.startswith("created: SkyPilot 0.12.2 at /v\n")


def test_bootstrap_failure_json_error_exit_1(npa: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_a: Any, **_kw: Any) -> BootstrapReport:
        raise ExternalError(
            "SkyPilot bootstrap step 'pip-install' exited 1: ERROR: No matching distribution",
            remedy="check network access to the package index",
            details={"step": "pip-install"},
        )

    monkeypatch.setattr(bootstrap, "bootstrap", broken)

    result = npa("bootstrap", "--json")

    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "error"
    assert payload["error"]["category"] == "external"
    assert payload["error"]["details"] == {"step": "pip-install"}


def test_bootstrap_failure_text_error_and_hint_no_traceback(
    npa: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_a: Any, **_kw: Any) -> BootstrapReport:
        raise ConfigError("--python python3.13 is Python 3.13.0", remedy="pass --python")

    monkeypatch.setattr(bootstrap, "bootstrap", refused)

    result = npa("bootstrap", "--python", "python3.13")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "Error: --python python3.13 is Python 3.13.0\nHint: pass --python\n"
