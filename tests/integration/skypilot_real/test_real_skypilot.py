"""The real ``skypilot==0.12.2``: bootstrap, the gate and the no-controller answers (§8, §12).

Each answer is classified by the same parsers the runtime uses, then kept as
a golden file for the simulator (``tests/fixtures/skypilot/real/``).
"""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.skypilot import bootstrap, classify, pins, status
from npa_infra.skypilot.bootstrap import BootstrapStatus
from npa_infra.skypilot.models import DownOutcome, ErrorKind, QueueVerdict
from npa_infra.skypilot.runner import SubprocessRunner
from npa_infra.workflow.target.services import Services
from tests.integration.skypilot_real.conftest import (
    USER_ID,
    RealSky,
    golden_text,
    is_sky,
    record,
)

pytestmark = pytest.mark.slow

BANNER_START = "Failed to connect to SkyPilot API server at http://127.0.0.1:46580."


def test_real_bootstrap_cache_is_live_and_passes_gate(real_sky: RealSky) -> None:
    report = real_sky.report

    assert report.sky_version == pins.SKYPILOT_VERSION
    assert real_sky.cache.is_symlink()
    assert (real_sky.cache.resolve() / ".npa-bootstrap-ok").is_file()
    for pin in pins.PINS:
        installed = report.pins[pin.name].installed
        assert installed is not None and pins.satisfies(installed, pin.specifier), pin.name
    assert status.gate(real_sky.sky, real_sky.env, fresh=True).ok


def test_real_bootstrap_rerun_unchanged(real_sky: RealSky) -> None:
    again = bootstrap.bootstrap(
        real_sky.cache,
        None,
        env=real_sky.env,
        save=False,
        runner=real_sky.host.runner(SubprocessRunner(), only=is_sky),
        port_check=real_sky.host.port_check,
    )

    assert again.status is BootstrapStatus.UNCHANGED
    assert again.model_dump() == {**real_sky.report.model_dump(), "status": "unchanged"}


def test_real_sky_version_reports_0_12_2(real_sky: RealSky) -> None:
    result = SubprocessRunner().run([str(real_sky.sky), "--version"], env=real_sky.env, timeout=120)

    assert result.returncode == 0
    assert classify.parse_version(result) == "0.12.2"
    assert result.stdout == "skypilot, version 0.12.2\n"
    record("version.txt", result.stdout)


def test_real_queue_first_call_banner_then_verified_empty(real_sky: RealSky) -> None:
    raw = real_sky.first_queue_raw

    assert real_sky.first_queue.verdict is QueueVerdict.VERIFIED_EMPTY
    assert raw.returncode == 1
    assert BANNER_START in classify.strip_ansi(raw.stdout)
    assert raw.stderr == classify.CLUSTER_NOT_UP_LINE + "\n"
    record("queue_no_controller_server_start.txt", golden_text(raw))


def test_real_queue_no_controller_verified_empty(real_sky: RealSky) -> None:
    answer = real_sky.cli.queue()
    raw = real_sky.recorder.last

    assert answer.verdict is QueueVerdict.VERIFIED_EMPTY
    assert (raw.returncode, raw.stdout) == (1, "")
    record("queue_no_controller.txt", golden_text(raw))


def test_real_queue_verbose_no_controller_verified_empty(real_sky: RealSky) -> None:
    answer = real_sky.cli.queue(verbose=True)

    assert answer.verdict is QueueVerdict.VERIFIED_EMPTY
    record("queue_verbose_no_controller.txt", golden_text(real_sky.recorder.last))


def test_real_queue_table_no_controller_exit_0(real_sky: RealSky) -> None:
    raw = real_sky.run("jobs", "queue", "--all")

    assert raw.returncode == 0
    assert "No in-progress managed jobs. (See: sky jobs -h)" in raw.stdout
    record("queue_table_no_controller.txt", golden_text(raw))


def test_real_cancel_no_controller_cluster_not_up(real_sky: RealSky) -> None:
    answer = real_sky.cli.cancel([1])

    assert answer.error_kind is ErrorKind.CLUSTER_NOT_UP
    assert answer.scheduled == () and not answer.nothing_to_cancel
    assert answer.command.returncode == 1
    assert answer.command.stderr == classify.CLUSTER_NOT_UP_LINE + "\n"
    record("cancel_no_controller.txt", golden_text(answer.command))


def test_real_down_absent_controller_already_absent(real_sky: RealSky) -> None:
    answer = real_sky.cli.down_controller()

    assert answer.outcome is DownOutcome.ALREADY_ABSENT
    assert answer.command.argv[1:] == ("down", f"sky-jobs-controller-{USER_ID}", "--yes")
    assert answer.command.returncode == 0
    record("down_controller_absent.txt", golden_text(answer.command))


def test_real_npa_skypilot_status_json_ok(real_sky: RealSky) -> None:
    env = {
        "NPA_HOME": str(real_sky.npa_home),
        "NPA_SKYPILOT_BIN": str(real_sky.sky),
        "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(real_sky.isolated.root),
        "SKYPILOT_USER_ID": USER_ID,
    }
    status.clear_gate_cache()

    result = CliRunner().invoke(
        app,
        ["skypilot", "status", "--json"],
        env=env,
        obj=Services(api_ports=real_sky.host.port_check),  # the module's server, in its host
        catch_exceptions=False,
    )

    assert result.exit_code == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert payload["ok"] is True
    assert payload["skypilot_version"] == "0.12.2"
    assert payload["source"] == "env"
    # this session's own server is up and provably ours (§7.3)
    assert payload["api_server"] == {"listening": True, "owner_matches": True}
    assert payload["warnings"] == [] and payload["remedies"] == []
    assert os.environ.get("NPA_SKYPILOT_BIN") != str(real_sky.sky)  # CliRunner restored env
