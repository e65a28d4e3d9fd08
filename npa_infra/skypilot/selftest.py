"""The self-test a freshly built SkyPilot venv must pass before it goes live (§8.3).

First the version gate, then one real round trip: in a scratch isolated
directory, ``sky jobs queue --all -o json`` must answer with JSON records or
exactly the no-controller ``ClusterNotUpError`` line. That call auto-starts a
local API server on the fixed port, which is where a broken fastapi shows up
(``TypeError``). The ports are checked before the call (a foreign server
fails closed) and afterwards the server is stopped only when the listener is
provably the one this self-test started (``sky api stop`` stops any server).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from npa_infra.errors import ConfigError, ExternalError
from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot import port, status
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.journal import Journal
from npa_infra.skypilot.models import CommandResult, QueueResult, QueueVerdict
from npa_infra.skypilot.runner import Runner
from npa_infra.skypilot.skycli import SkyCli

__all__ = ["PortChecker", "run"]

PortChecker = status.PortChecker
REMEDY = (
    "read the self-test output in the bootstrap journal; make sure no other SkyPilot API "
    "server holds 127.0.0.1:46580, then rerun `npa skypilot bootstrap`"
)
# Ambient settings that would point the self-test at someone else's state.
_DROPPED = (
    "SKYPILOT_API_SERVER_ENDPOINT",
    "SKYPILOT_USER_ID",
    "SKYPILOT_CONFIG",
    "SKYPILOT_PROJECT_CONFIG",
    "SKYPILOT_GLOBAL_CONFIG",
)


class _Journaled:
    """A runner that journals every call as one step and keeps the last result."""

    def __init__(self, runner: Runner, journal: Journal, step: str) -> None:
        self._runner = runner
        self._journal = journal
        self._step = step
        self.last: CommandResult | None = None

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
        on_wait: Callable[[float], None] | None = None,
    ) -> CommandResult:
        self._journal.begin(self._step, list(argv))
        extras: dict[str, Callable[..., None]] = {}  # only what is asked for (SkyCli._run)
        if on_started is not None:
            extras["on_started"] = on_started
        if on_line is not None:
            extras["on_line"] = on_line
        if on_wait is not None:
            extras["on_wait"] = on_wait
        result = self._runner.run(argv, env=env, cwd=cwd, stdin=stdin, timeout=timeout, **extras)
        self._journal.end(self._step, result)
        self.last = result
        return result


def _guard(check: PortChecker, api_port: int, env: Mapping[str, str]) -> None:
    for number in (api_port, port.EXTRA_PORT):
        found = check(number, env)
        if not found.safe:
            owner = f"pid {found.pid} (HOME={found.home})" if found.pid else "an unknown process"
            raise ConfigError(
                f"cannot self-test SkyPilot: 127.0.0.1:{number} is held by {owner}",
                remedy="stop that SkyPilot API server (`sky api stop` in its environment), "
                "then rerun `npa skypilot bootstrap`",
                details={"port": number, "ownership": found.ownership.value, "pid": found.pid},
            )


def _stop_own_server(
    sky: Path,
    env: Mapping[str, str],
    cwd: Path,
    runner: Runner,
    journal: Journal,
    check: PortChecker,
    api_port: int,
) -> None:
    found = check(api_port, env)
    if found.ownership is not port.Ownership.OURS:
        journal.skip("api-stop", f"listener on {api_port} is {found.ownership.value}")
        return
    _Journaled(runner, journal, "api-stop").run(
        [str(sky), "api", "stop"], env=env, cwd=str(cwd), timeout=120
    )


def _verify(answer: QueueResult, raw: CommandResult | None) -> None:
    text = "" if raw is None else raw.stdout + "\n" + raw.stderr
    crash = next(
        (ln.strip() for ln in text.splitlines() if "TypeError" in ln or "Traceback" in ln), None
    )
    if crash is not None:
        raise ExternalError(
            f"the self-test `sky jobs queue` crashed: {crash[:300]}",
            remedy=REMEDY,
            details={"returncode": None if raw is None else raw.returncode},
        )
    if answer.verdict in (QueueVerdict.VERIFIED_EMPTY, QueueVerdict.RECORDS):
        return
    raise ExternalError(
        "the self-test `sky jobs queue --all -o json` gave no readable answer "
        f"({answer.error_kind.value}): {answer.detail[:300]}",
        remedy=REMEDY,
        details={"returncode": None if raw is None else raw.returncode},
    )


def _queue_check(
    sky: Path,
    env: Mapping[str, str],
    runner: Runner,
    journal: Journal,
    check: PortChecker,
    api_port: int,
) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="npa-sky-selftest-"))
    try:
        base = {k: v for k, v in env.items() if k not in _DROPPED}
        base["KUBECONFIG"] = str(scratch / "no-kubeconfig")  # no cluster is needed or touched
        isolated = IsolatedDir(scratch)
        isolated.prepare(base, context=None, controller=ControllerSettings())
        recorder = _Journaled(runner, journal, "self-test-queue")
        cli = SkyCli(sky, isolated, base, runner=recorder, api_port=api_port, check_ports=False)
        child_env = cli.environment()
        _guard(check, api_port, child_env)
        try:
            answer = cli.queue()
        finally:
            _stop_own_server(sky, child_env, scratch, runner, journal, check, api_port)
        _verify(answer, recorder.last)
        # exit 1 with exactly the ClusterNotUpError line is the healthy answer (§3.3)
        journal.annotate("self-test-queue", state="ok", verdict=answer.verdict.value)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(
    sky: Path,
    env: Mapping[str, str],
    runner: Runner,
    journal: Journal,
    *,
    port_check: PortChecker = port.check_port,
    api_port: int = port.API_PORT,
) -> status.GateResult:
    """Gate the new venv, then prove ``sky jobs queue`` answers; returns the gate result.

    Raises:
        ExternalError: the gate or the queue round trip failed.
        ConfigError: another API server holds the fixed ports.
    """
    gate = status.gate(sky, env, _Journaled(runner, journal, "self-test-gate"), fresh=True)
    journal.record_gate(gate)
    if not gate.ok:
        raise ExternalError(
            "the new SkyPilot venv fails the version gate: " + "; ".join(gate.messages()),
            remedy="check that the package index serves the pinned versions, "
            "then rerun `npa skypilot bootstrap`",
            details={"findings": gate.messages()},
        )
    _queue_check(sky, env, runner, journal, port_check, api_port)
    return gate
