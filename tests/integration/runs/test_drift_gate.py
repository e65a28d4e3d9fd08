"""The SkyPilot drift gate before live actions (issue 15 item 6), against the simulator.

A venv on disk (``tests/support/skyvenv``: dist-info METADATA files and the
simulator as ``bin/sky``) is what ``NPA_SKYPILOT_BIN`` names, and the live
services leave the SkyPilot adapter to ``open_adapters`` so the real binary
path is gated. ``SKYPILOT_API_SERVER_ENDPOINT`` stands for a remote server,
so a SkyPilot API server on this host never changes the outcome (the port
rule has its own tests in tests/unit/skypilot/test_livegate.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.errors import SkyPilotDriftError
from npa_infra.skypilot import port
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.operations import cancellation, runstatus
from npa_infra.workflow.submission import pipeline
from npa_infra.workflow.target.services import Services
from tests.integration.runs.world import ROOT, SIM_PORT, World
from tests.support import skyvenv
from tests.support.freeports import nothing_listens

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
RUNNING = {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]}
CANARY = "t1.CANARY-stale-iam-token-5c1d"


@dataclasses.dataclass
class Venv:
    root: Path
    sky: Path

    def env(self, world: World) -> dict[str, str]:
        return {
            **world.env,
            "NPA_SKYPILOT_BIN": str(self.sky),
            "SKYPILOT_API_SERVER_ENDPOINT": f"http://127.0.0.1:{SIM_PORT}",
        }


def _services(world: World) -> Services:
    """The world's clock and state directory, with the real SkyCli over the resolved binary."""
    return Services(clock=world.clock.clock(), isolated_dir=world.isolated.root)


def _venv(world: World, versions: dict[str, str | None]) -> Venv:
    root = world.root / "sky-venv"
    return Venv(root, skyvenv.make_venv(root, versions))


def _launches(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]


def _submit(world: World, venv: Venv, run_id: str) -> liverun.LiveResult:
    result = pipeline.submit(
        MINIMAL, world.options(run_id=run_id), env=venv.env(world), services=_services(world)
    )
    assert isinstance(result, liverun.LiveResult)
    return result


@pytest.mark.parametrize(
    "versions",
    [skyvenv.DRIFTED_KUBERNETES, skyvenv.DRIFTED_FASTAPI],
    ids=["kubernetes-37", "fastapi-0.120"],
)
def test_submit_drifted_venv_refused_before_journal_or_launch(
    world: World, versions: dict[str, str | None]
) -> None:
    venv = _venv(world, versions)
    with pytest.raises(SkyPilotDriftError) as caught:
        _submit(world, venv, "drift-1")
    assert caught.value.remedy == "npa skypilot bootstrap" and caught.value.exit_code == 1
    assert world.sim_calls() == []  # not one sky call, so no launch
    assert world.status("drift-1").status == "NOT_FOUND"  # nothing journaled


def _install(world: World, kind: str) -> Venv:
    """A SkyPilot 0.12.2 install with kubernetes 37 beside it, in layout ``kind``."""
    drifted = skyvenv.DRIFTED_KUBERNETES
    if kind == "conda":
        root = world.root / "conda"
        return Venv(root, skyvenv.make_conda(root, drifted))
    if kind == "system":
        root = world.root / "usr"
        return Venv(root, skyvenv.make_system(root, drifted))
    # --user: the user site of the HOME every sky call runs with (the isolated directory's)
    root = world.isolated.home / ".local"
    return Venv(root, skyvenv.make_user(world.root / "usr", root, drifted))


@pytest.mark.parametrize("kind", ["conda", "system", "user"])
def test_submit_drifted_install_without_pyvenv_cfg_refused_before_launch(
    world: World, kind: str
) -> None:
    """Issue 24 item 8: a conda, system or --user install has no pyvenv.cfg; its kubernetes
    37 is read through the shebang's interpreter and the submit is refused, as
    ``skypilot status`` refuses it, instead of launching a job that retries forever."""
    venv = _install(world, kind)
    with pytest.raises(SkyPilotDriftError) as caught:
        _submit(world, venv, f"drift-{kind}")
    assert caught.value.details["reason"] == "pins_broken"
    assert "kubernetes 37.0.0 is outside" in caught.value.message
    assert caught.value.remedy == "npa skypilot bootstrap"
    assert world.sim_calls() == []  # not one sky call, so no launch
    assert world.status(f"drift-{kind}").status == "NOT_FOUND"


def test_submit_local_server_seen_through_services_api_ports(world: World) -> None:
    """The gate's look at the fixed ports is ``Services.api_ports`` (issue 31): a foreign
    listener it reports refuses the submit before any ``sky`` call, naming the pid; on a
    machine where nothing listens the same submit launches once. Neither reads this
    machine's own ports, which an unrelated listener holds during the suite."""
    venv = _venv(world, skyvenv.GOOD)
    env = {k: v for k, v in venv.env(world).items() if k != "SKYPILOT_API_SERVER_ENDPOINT"}
    looked: list[tuple[int, str]] = []

    def foreign(number: int, expected: Mapping[str, str]) -> port.PortCheck:
        looked.append((number, expected["HOME"]))
        return port.PortCheck(number, port.Ownership.FOREIGN, 4242, "/elsewhere", "npa-x")

    refused = dataclasses.replace(_services(world), api_ports=foreign)
    with pytest.raises(SkyPilotDriftError) as caught:
        pipeline.submit(MINIMAL, world.options(run_id="port-1"), env=env, services=refused)
    assert caught.value.details["api_server"] == {
        "port": 46580,
        "ownership": "foreign",
        "pid": 4242,
    }
    assert looked == [(46580, str(world.isolated.home))]  # the isolated directory's HOME
    assert world.sim_calls() == []

    free = dataclasses.replace(_services(world), api_ports=nothing_listens)
    result = pipeline.submit(MINIMAL, world.options(run_id="port-2"), env=env, services=free)
    assert isinstance(result, liverun.LiveResult)
    assert (result.exit_code, len(_launches(world))) == (0, 1), result.to_json()


def test_submit_repaired_venv_passes_gate_and_launches_once(world: World) -> None:
    venv = _venv(world, skyvenv.DRIFTED_KUBERNETES)
    with pytest.raises(SkyPilotDriftError):
        _submit(world, venv, "drift-2")  # the refusal's observation is now cached
    skyvenv.set_version(venv.root, "kubernetes", "35.0.0")  # `npa skypilot bootstrap`'s effect
    skyvenv.age(venv.root)
    result = _submit(world, venv, "drift-2")
    assert (result.status, result.exit_code) == ("SUBMITTED", 0), result.to_json()
    assert len(_launches(world)) == 1 and result.warnings == []


def test_submit_cache_hit_reads_no_metadata(world: World) -> None:
    venv = _venv(world, skyvenv.GOOD)
    assert _submit(world, venv, "cache-1").exit_code == 0
    # Rewrite kubernetes' METADATA in place to a drifted version of the same size and put its
    # mtime back: every recorded stamp is unchanged, so only a re-read could see the drift.
    metadata = next(venv.root.glob("lib/*/site-packages/kubernetes-*.dist-info/METADATA"))
    before = os.stat(metadata)
    metadata.write_text(metadata.read_text("utf-8").replace("35.0.0", "37.0.0"), "utf-8")
    os.utime(metadata, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(metadata).st_size == before.st_size
    assert _submit(world, venv, "cache-2").exit_code == 0  # the cached observation was used
    assert len(_launches(world)) == 2


@pytest.fixture
def running(world: World) -> int:
    """A submitted run ``live-1`` whose job stays RUNNING (submitted through the world)."""
    world.faults(RUNNING)
    result = world.submit(MINIMAL, run_id="live-1")
    assert result.job_id is not None, result.to_json()
    return result.job_id


def test_cancel_drifted_venv_refused_and_job_left_uncancelled(world: World, running: int) -> None:
    venv = _venv(world, skyvenv.DRIFTED_KUBERNETES)
    calls = len(world.sim_calls())
    with pytest.raises(SkyPilotDriftError) as caught:
        cancellation.cancel_run("live-1", env=venv.env(world), services=_services(world))
    assert caught.value.remedy == "npa skypilot bootstrap"
    assert world.sim_calls()[calls:] == []
    assert [j.get("cancel") for j in world.sim_jobs() if j["job_id"] == running] == [None]


def test_status_drifted_venv_refused_before_queue_read(world: World, running: int) -> None:
    venv = _venv(world, skyvenv.DRIFTED_FASTAPI)
    calls = len(world.sim_calls())
    with pytest.raises(SkyPilotDriftError):
        runstatus.run_status("live-1", env=venv.env(world), services=_services(world))
    assert world.sim_calls()[calls:] == []


def test_status_cli_drifted_venv_error_hint_exit_1(world: World, running: int) -> None:
    venv = _venv(world, skyvenv.DRIFTED_KUBERNETES)
    result = CliRunner().invoke(
        app,
        ["workbench", "workflow", "status", "live-1"],
        obj=_services(world),
        env=venv.env(world),
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    assert "kubernetes 37.0.0 is outside" in result.stderr
    assert "Hint: npa skypilot bootstrap" in result.stderr


def _files_text(*roots: Path) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace")
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    )


def test_submit_iam_token_warns_in_json_and_on_stderr_never_the_value(world: World) -> None:
    world.env["NEBIUS_IAM_TOKEN"] = CANARY
    lines: list[str] = []
    services = dataclasses.replace(world.services(), progress=lines.append)
    result = pipeline.submit(
        MINIMAL, world.options(run_id="tok-1"), env=world.env, services=services
    )
    assert isinstance(result, liverun.LiveResult) and result.exit_code == 0, result.to_json()
    payload = result.to_json()
    assert [w["reason"] for w in payload["warnings"]] == ["stale_iam_token"]
    assert payload["warnings"][0]["remedy"] == "unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN"
    warned = [line for line in lines if line.startswith("Warning: NEBIUS_IAM_TOKEN is set")]
    assert len(warned) == 1 and warned[0].endswith("unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN")
    assert CANARY not in json.dumps(payload) + "\n".join(lines)
    assert CANARY not in _files_text(world.home, world.isolated.root)  # journal, YAML, cache


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_status_cli_iam_token_warns_never_the_value(world: World, as_json: bool) -> None:
    world.submit(MINIMAL, run_id="tok-2")
    result = CliRunner().invoke(
        app,
        ["workbench", "workflow", "status", "tok-2", *(["--json"] if as_json else [])],
        obj=world.services(),
        env={**world.env, "NPA_NEBIUS_IAM_TOKEN": CANARY},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    if as_json:
        warnings = json.loads(result.stdout)["warnings"]
        assert [w["reason"] for w in warnings] == ["stale_iam_token"]
        assert "NPA_NEBIUS_IAM_TOKEN is set" in warnings[0]["message"]
    else:
        assert result.stderr.count("Warning: NPA_NEBIUS_IAM_TOKEN is set") == 1
        assert "Hint: unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN" in result.stderr
    assert CANARY not in result.stdout + result.stderr


def test_status_without_token_has_empty_warnings(world: World) -> None:
    world.submit(MINIMAL, run_id="tok-3")
    assert world.status("tok-3").to_json()["warnings"] == []
