"""The real ``skypilot==0.12.2`` behind ``npa skypilot verify`` (issue 17), offline.

``npa skypilot verify --cluster fake-a --json`` runs end to end: the real
``KubeApi`` against the Kubernetes API double, and the real ``sky check
kubernetes`` in the isolated state directory, whose first call starts this
test's own local API server on the fixed port (the conftest's host lock and
port check first; the server is stopped afterwards only when it is provably
ours). SkyPilot's Kubernetes check runs inside that server with this
machine's PATH, so ``socat`` and ``nc`` must be installed, and ``rsync`` for
the client-tools check: missing ones fail the test with the package to
install, as the conftest fails on a missing bootstrap (never a skip).

Offline, SkyPilot would try to download its accelerator catalog; a minimal
``common/accelerators.csv`` is cached in the isolated HOME first (the
caller's own cached copy when there is one).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.skypilot import clienttools, status
from npa_infra.skypilot.checkoutput import CheckVerdict
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.skypilot_real.conftest import (
    RealVenv,
    _host_lock,
    _require_free_ports,
    _stop_own_server,
    golden_text,
    record,
)
from tests.support.fakekube import FakeKube
from tests.support.fakekube.pytest_plugin import fake_kube

__all__ = ["fake_kube"]

pytestmark = pytest.mark.slow

CONTEXT = "fake-a"
CATALOG = Path(".sky") / "catalogs" / "v8" / "common" / "accelerators.csv"
MINIMAL_CATALOG = "AcceleratorName,Clouds\nH100,\"['Kubernetes']\"\nT4,\"['Kubernetes']\"\n"


def _require_tools() -> None:
    report = clienttools.check(shutil.which)
    if not report.ok:
        pytest.fail(
            f"{report.detail}. The real SkyPilot check needs them on this machine: {report.remedy}",
            pytrace=False,
        )


def _cache_catalog(isolated: IsolatedDir) -> None:
    target = isolated.home / CATALOG
    target.parent.mkdir(parents=True, exist_ok=True)
    cached = Path.home() / CATALOG
    if cached.is_file() and cached.stat().st_size:
        shutil.copyfile(cached, target)
    else:
        target.write_text(MINIMAL_CATALOG, encoding="utf-8")


@pytest.fixture
def state(
    real_venv: RealVenv, fake_kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[IsolatedDir]:
    """The isolated state ``npa`` will use, its kubeconfig the double's; the server stopped after."""
    _require_tools()
    for name in list(os.environ):
        if name.startswith(("SKYPILOT_", "NPA_SKYPILOT_")) or name == "KUBECONFIG":
            monkeypatch.delenv(name)
    env = {
        **real_venv.env,
        "KUBECONFIG": str(fake_kube.kubeconfig),
        "NPA_SKYPILOT_BIN": real_venv.report.sky_bin,
        "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(tmp_path / "sky-state"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    isolated = IsolatedDir(tmp_path / "sky-state")
    with _host_lock():
        _require_free_ports()
        for directory in (isolated.root, isolated.home):  # private, as prepare makes them
            directory.mkdir(mode=0o700, exist_ok=True)
        _cache_catalog(isolated)
        status.clear_gate_cache()
        try:
            yield isolated
        finally:
            _stop_own_server(SkyCli(Path(real_venv.report.sky_bin), isolated, env))


def test_real_verify_json_sky_check_kubernetes_enabled(
    state: IsolatedDir, real_venv: RealVenv
) -> None:
    result = CliRunner().invoke(
        app, ["skypilot", "verify", "--cluster", CONTEXT, "--json"], catch_exceptions=False
    )

    payload = json.loads(result.stdout)
    checks = {c["name"]: c for c in payload["checks"]}
    assert payload["sky_check"]["verdict"] == "enabled", payload["sky_check"]
    assert checks["sky_check_kubernetes"]["ok"] is True, checks["sky_check_kubernetes"]
    assert payload["sky_check"]["contexts"].get(CONTEXT, "").startswith("enabled")
    assert payload["api_server"] == {
        "endpoint": "http://127.0.0.1:46580",
        "remote": False,
        "reported": True,
    }
    assert checks["api_server"]["ok"] is True
    assert payload["client_tools"]["ok"] is True
    assert payload["sky_version"] == "0.12.2"
    assert payload["kubernetes_enabled"] is True
    assert (payload["status"], result.exit_code) == ("ok", 0), payload["checks"]
    # the check ran in the isolated state: its generated config allows exactly the context
    assert state.read_config()["kubernetes"]["allowed_contexts"] == [CONTEXT]

    # the same answer again, now from the running server: the simulator's golden file
    again = SkyCli(Path(real_venv.report.sky_bin), state, dict(os.environ)).check()
    assert again.verdict is CheckVerdict.ENABLED
    record("check_kubernetes_enabled.txt", golden_text(again.command))
