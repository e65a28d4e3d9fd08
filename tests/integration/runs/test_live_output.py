"""A live submit shows SkyPilot's output as it arrives, keeps it, and names known failures.

Against the simulator and the Kubernetes double (issue 17): the simulated
``sky jobs launch`` prints its lines and then waits on a FIFO, so the test can
see a ``sky| `` line on stderr while the launch is still running, and only
then let it go on. Every wait is on an event, bounded by ``WAIT``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.runs.models import Category
from npa_infra.workflow.submission import pipeline
from tests.integration.runs.world import ROOT, World
from tests.strategies import SKY_KNOWN_LINES

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
WAIT = 120.0
MARKER = "sky-line-9f3e: provisioning the jobs controller"
CANARY_NAME = "NPA_CANARY_TOKEN"
CANARY_VALUE = "canary-live-0ut9ut"
POD_CONFIG = SKY_KNOWN_LINES[0][0]


class _Watched(io.BytesIO):
    """The CLI's stderr bytes, written through to the runner's buffer, setting ``seen`` once
    ``marker`` has been written."""

    def __init__(self, inner: io.BytesIO, marker: bytes, seen: threading.Event) -> None:
        super().__init__()
        self._inner, self._marker, self._seen = inner, marker, seen

    def write(self, data: Any) -> int:
        written = self._inner.write(data)
        if self._marker in self._inner.getvalue():
            self._seen.set()
        return written


class WatchedRunner(CliRunner):
    """A ``CliRunner`` whose stderr signals the moment a marker line reaches it."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker.encode()
        self.seen = threading.Event()

    @contextlib.contextmanager
    def isolation(self, *args: Any, **kwargs: Any) -> Iterator[tuple[io.BytesIO, ...]]:
        with super().isolation(*args, **kwargs) as streams:
            # keep the runner's own wrapper alive: collecting it would close its buffer
            self._replaced = sys.stderr
            sys.stderr = io.TextIOWrapper(
                _Watched(streams[1], self.marker, self.seen),
                encoding="utf-8",
                errors="backslashreplace",
                write_through=True,
            )
            yield streams


def _hold(world: World, *lines: str, stream: str = "stderr") -> Path:
    """The first launch prints ``lines``, then waits until the returned FIFO is written."""
    release = world.root / "release.fifo"
    os.mkfifo(release)
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "say",
            "lines": list(lines),
            "stream": stream,
        },
        {"command": "jobs.launch", "nth": 1, "action": "hang", "release_fifo": str(release)},
    )
    return release


def _release(fifo: Path) -> None:
    """Let the held launch go on, once it waits on ``fifo`` (a blocking open: the event).

    The writer runs in a daemon thread so a launch that never got there cannot hang the test.
    """

    def write() -> None:
        with open(fifo, "w", encoding="ascii") as out:
            out.write("go\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(WAIT)


def _submit_cli(world: World, runner: CliRunner, *extra: str) -> Result:
    args = [
        "workbench",
        "workflow",
        "submit",
        str(MINIMAL),
        "--infra",
        "k8s/fake-a",
        "--no-resolve-accelerators",
        "--no-preflight-images",
        "--poll-seconds",
        "5",
        *extra,
    ]
    return runner.invoke(app, args, obj=world.services(), env=world.env, catch_exceptions=False)


def _launches(world: World) -> list[list[str]]:
    return [c for c in world.sim_calls() if c[:2] == ["jobs", "launch"]]


def test_submit_text_streams_sky_lines_to_stderr_while_the_launch_runs(world: World) -> None:
    release = _hold(world, MARKER)
    runner = WatchedRunner(f"sky| {MARKER}")
    outcome: dict[str, Result] = {}
    thread = threading.Thread(
        target=lambda: outcome.setdefault("r", _submit_cli(world, runner, "--run-id", "live-1"))
    )
    thread.start()
    try:
        assert runner.seen.wait(WAIT), "the sky line never reached stderr during the launch"
        assert thread.is_alive() and "r" not in outcome  # the launch is still held
        assert world.jobs_named("live-1") == []  # and has not created its job yet
    finally:
        _release(release)
        thread.join(WAIT)
    result = outcome["r"]
    assert result.exit_code == 0, result.stderr
    assert f"sky| {MARKER}" in result.stderr
    assert f"sky| {MARKER}" not in result.stdout  # data only on stdout
    log = world.home / "logs" / "live-1" / "0-1-launch.log"
    assert f"launch log: {log}" in result.stdout
    assert MARKER in log.read_text()
    assert len(world.jobs_named("live-1")) == 1


def test_submit_json_one_document_on_stdout_with_launch_log(world: World) -> None:
    world.faults(
        {"command": "jobs.launch", "nth": 1, "action": "say", "lines": [MARKER]},
    )
    result = _submit_cli(world, CliRunner(), "--run-id", "json-1", "--json")
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)  # exactly one document: trailing text would not parse
    log = world.home / "logs" / "json-1" / "0-1-launch.log"
    assert payload["status"] == "SUBMITTED"
    assert payload["launch_log"] == str(log) and payload["launch_logs"] == [str(log)]
    assert payload["known_failure"] is None
    assert "sky| " not in result.stderr  # nothing streamed under --json
    assert MARKER in log.read_text()


def test_submit_pod_config_loop_named_at_once_bootstrap_remedy_permanent(world: World) -> None:
    """The kubernetes-client pod_config failure is named as its line appears, and the
    launch ends with the bootstrap remedy and a permanent category, not a schema error."""
    world.faults({"command": "jobs.launch", "action": "fail", "stderr": POD_CONFIG})
    lines: list[str] = []
    services = dataclasses.replace(world.services(), progress=lines.append)
    result = pipeline.submit(
        MINIMAL, world.options(run_id="pod-1"), env=world.env, services=services
    )
    # sent, then read absent: recovery-required, never FAILED (the operator guide)
    assert result.exit_code == 2, result.to_json()  # type: ignore[union-attr]
    payload = result.to_json()  # type: ignore[union-attr]
    sky_line = lines.index(f"sky| {POD_CONFIG}")
    assert lines[sky_line + 1].startswith("Recognised: SkyPilot's venv has a kubernetes client")
    assert lines[sky_line + 2] == "Hint: npa skypilot bootstrap"
    assert payload["known_failure"]["cause"] == "kubernetes_client_pod_config"
    assert payload["launch_transaction"]["category"] == Category.SKYPILOT_VENV.value
    remedy = payload["error"]["remedy"]
    assert (
        remedy.startswith("rerun: npa workbench workflow submit") and "--resume-run pod-1" in remedy
    )
    assert remedy.endswith("once it stays absent, npa skypilot bootstrap and submit a new run")
    assert '"category": "schema"' not in json.dumps(payload["launch_transactions"])
    assert len(_launches(world)) == 1  # permanent: never retried
    assert world.jobs_named("pod-1") == []
    events = [e.data for e in _journal_events(world, "pod-1") if e.kind == "known_failure"]
    assert [e["cause"] for e in events] == ["kubernetes_client_pod_config"]


def test_submit_failed_request_log_pod_config_recognised_from_api_logs(world: World) -> None:
    """With --async the failure is in the failed request's log: it is shown, kept and named."""
    world.faults({"command": "jobs.launch", "action": "request_fails", "stderr": POD_CONFIG})
    lines: list[str] = []
    services = dataclasses.replace(world.services(), progress=lines.append)
    result = pipeline.submit(
        MINIMAL, world.options(run_id="pod-2"), env=world.env, services=services
    )
    payload = result.to_json()  # type: ignore[union-attr]
    assert result.exit_code == 2, payload  # type: ignore[union-attr]
    assert f"sky| {POD_CONFIG}" in lines and "Hint: npa skypilot bootstrap" in lines
    assert payload["launch_transaction"]["category"] == Category.SKYPILOT_VENV.value
    assert "npa skypilot bootstrap and submit a new run" in payload["error"]["remedy"]
    assert POD_CONFIG in Path(payload["launch_log"]).read_text()


def test_launch_log_private_and_free_of_secret_values(world: World) -> None:
    world.env[CANARY_NAME] = CANARY_VALUE
    world.faults(
        {
            "command": "jobs.launch",
            "nth": 1,
            "action": "say",
            "lines": [f"env {CANARY_NAME}={CANARY_VALUE}", f"echo {CANARY_VALUE}", MARKER],
        },
    )
    lines: list[str] = []
    services = dataclasses.replace(world.services(), progress=lines.append)
    result = pipeline.submit(
        MINIMAL,
        world.options(run_id="secret-1", secret_env=[CANARY_NAME]),
        env=world.env,
        services=services,
    )
    assert result.exit_code == 0, result.to_json()  # type: ignore[union-attr]
    log = world.home / "logs" / "secret-1" / "0-1-launch.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text = log.read_text()
    assert MARKER in text and CANARY_VALUE not in text and "***" in text
    assert not any(CANARY_VALUE in line for line in lines)  # nor on the terminal


def test_submit_nebius_refusal_with_exported_token_names_the_variables(world: World) -> None:
    refusal = SKY_KNOWN_LINES[3][0]
    world.env["NEBIUS_IAM_TOKEN"] = "t1.static-token-value-1234"
    world.faults({"command": "jobs.launch", "action": "fail", "stderr": refusal})
    lines: list[str] = []
    services = dataclasses.replace(world.services(), progress=lines.append)
    result = pipeline.submit(
        MINIMAL, world.options(run_id="tok-1"), env=world.env, services=services
    )
    payload = result.to_json()  # type: ignore[union-attr]
    assert payload["known_failure"]["cause"] == "stale_nebius_token"
    assert "Hint: unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN" in lines
    assert payload["launch_transaction"]["category"] == Category.STALE_IAM_TOKEN.value


def _journal_events(world: World, run_id: str) -> list[Any]:
    from npa_infra.journal.store import Journal

    journal = Journal.open(world.home)
    try:
        return journal.events(run_id)
    finally:
        journal.close()
