"""The real ``skypilot==0.12.2`` behind ``npa skypilot verify`` (issue 17), offline.

``npa skypilot verify --cluster fake-a --json`` runs end to end as a real ``npa``
process inside this test's own ``PrivateHost`` (issue 31): the real ``KubeApi``
against the Kubernetes API double (relayed into the namespace at its own
address), and the real ``sky check kubernetes`` in the isolated state directory,
whose first call starts the namespace's own local API server. The namespace's end
ends that server and everything it leaves behind; this machine's own ports are
never used. SkyPilot's Kubernetes check runs inside that server with this
machine's PATH, so ``socat`` and ``nc`` must be installed, and ``rsync`` for
the client-tools check: missing ones fail the test with the package to
install, as the conftest fails on a missing bootstrap (never a skip).

Offline, SkyPilot would try to download its accelerator catalog; a minimal
``common/accelerators.csv`` is cached in the isolated HOME first (the
caller's own cached copy when there is one).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest

from npa_infra.skypilot import clienttools
from npa_infra.skypilot.checkoutput import CheckVerdict
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.runner import SubprocessRunner
from npa_infra.skypilot.skycli import SkyCli
from tests.integration.skypilot_real.conftest import (
    RealVenv,
    golden_text,
    private_host,
    record,
)
from tests.support.fakekube import FakeKube
from tests.support.fakekube.pytest_plugin import fake_kube
from tests.support.privatehost import PrivateHost

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


class Verified(NamedTuple):
    isolated: IsolatedDir
    env: dict[str, str]  # the environment of the `npa` and `sky` processes
    host: PrivateHost


@pytest.fixture
def state(real_venv: RealVenv, fake_kube: FakeKube, tmp_path: Path) -> Iterator[Verified]:
    """The isolated state ``npa`` will use, its kubeconfig the double's, on a private host."""
    _require_tools()
    env = {
        **real_venv.env,
        "KUBECONFIG": str(fake_kube.kubeconfig),
        "NPA_SKYPILOT_BIN": real_venv.report.sky_bin,
        "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(tmp_path / "sky-state"),
    }
    isolated = IsolatedDir(tmp_path / "sky-state")
    for directory in (isolated.root, isolated.home):  # private, as prepare makes them
        directory.mkdir(mode=0o700, exist_ok=True)
    _cache_catalog(isolated)
    host = private_host()
    try:
        for url in (fake_kube.url, fake_kube.http_url):
            port = urlsplit(url).port
            assert port is not None
            host.relay(port)
        yield Verified(isolated, env, host)
    finally:
        host.close()


def test_real_verify_json_sky_check_kubernetes_enabled(state: Verified) -> None:
    npa = [sys.executable, "-m", "npa_infra", "skypilot", "verify", "--cluster", CONTEXT, "--json"]
    result = state.host.run(npa, env=state.env)

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
    assert (payload["status"], result.returncode) == ("ok", 0), (payload["checks"], result.stderr)
    # the check ran in the isolated state: its generated config allows exactly the context
    assert state.isolated.read_config()["kubernetes"]["allowed_contexts"] == [CONTEXT]

    # the same answer again, now from the running server: the simulator's golden file
    runner = state.host.runner(SubprocessRunner())
    sky = Path(state.env["NPA_SKYPILOT_BIN"])
    cli = SkyCli(sky, state.isolated, state.env, runner=runner, port_check=state.host.port_check)
    again = cli.check()
    assert again.verdict is CheckVerdict.ENABLED
    record("check_kubernetes_enabled.txt", golden_text(again.command))
