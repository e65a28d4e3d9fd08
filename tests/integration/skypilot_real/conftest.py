"""The real ``skypilot==0.12.2``, bootstrapped once per session (skypilot-0.12.md §12).

The venv is built by the real ``bootstrap()`` into a cached directory,
``NPA_TEST_SKYPILOT_CACHE`` (default ``<repo>/.cache/skypilot-venv``). A cache
that already passes the gate is reused: that is bootstrap's idempotence path.
The first build downloads SkyPilot and takes minutes.

SkyPilot's local API server listens on the fixed 127.0.0.1:46580. The session
refuses to start when anything already listens there (or on 50011), with a
clear message instead of a hang or a shared server, and at the end stops the
server only when the port check proves it is the one these tests started.

``record()`` keeps the real outputs as golden files under
``tests/fixtures/skypilot/real/`` for the simulator: written when missing or
when ``NPA_RECORD_GOLDEN=1``, otherwise compared byte for byte.
"""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from npa_infra.errors import NpaError
from npa_infra.skypilot import bootstrap, port
from npa_infra.skypilot.bootstrap import BootstrapReport
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.models import CommandResult, QueueResult
from npa_infra.skypilot.runner import SubprocessRunner
from npa_infra.skypilot.skycli import SkyCli

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "fixtures" / "skypilot" / "real"
# A fixed identity keeps the recorded controller name stable across runs.
USER_ID = "npa-realtest01"
# The API port is one per host: concurrent test sessions take turns instead of colliding.
HOST_LOCK = Path(tempfile.gettempdir()) / f"npa-skypilot-{port.API_PORT}.tests.lock"
HOST_LOCK_TIMEOUT = 900.0


class Recorder:
    """The real subprocess runner, keeping every result for the golden files."""

    def __init__(self) -> None:
        self.inner = SubprocessRunner()
        self.results: list[CommandResult] = []

    @property
    def last(self) -> CommandResult:
        return self.results[-1]

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        result = self.inner.run(argv, env=env, cwd=cwd, stdin=stdin, timeout=timeout)
        self.results.append(result)
        return result


@dataclass
class RealSky:
    report: BootstrapReport
    bootstrap_seconds: float
    cache: Path
    isolated: IsolatedDir
    env: dict[str, str]  # the base environment SkyCli isolates
    npa_home: Path
    cli: SkyCli
    recorder: Recorder
    first_queue: QueueResult
    first_queue_raw: CommandResult

    @property
    def sky(self) -> Path:
        return Path(self.report.sky_bin)

    def run(self, *args: str, stdin: str | None = None) -> CommandResult:
        """Run the real ``sky`` under the isolated environment, outside ``SkyCli``."""
        return self.recorder.run(
            [str(self.sky), *args],
            env=self.cli.environment(),
            cwd=str(self.isolated.root),
            stdin=stdin,
            timeout=300,
        )


def golden_text(result: CommandResult) -> str:
    """The fixture format of tests/fixtures/skypilot: ``exit: N`` then both streams verbatim."""
    return (
        f"exit: {result.returncode}\n--- stdout ---\n{result.stdout}--- stderr ---\n{result.stderr}"
    )


def record(name: str, text: str) -> None:
    """Write the golden file when missing (or NPA_RECORD_GOLDEN=1); else require equality."""
    path = GOLDEN / name
    if os.environ.get("NPA_RECORD_GOLDEN") == "1" or not path.exists():
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.read_text(encoding="utf-8") == text, (
        f"the real SkyPilot answer differs from {path.relative_to(REPO)}; "
        "if SkyPilot changed legitimately, rerun with NPA_RECORD_GOLDEN=1"
    )


@contextmanager
def _host_lock() -> Iterator[None]:
    """Exclusive use of the fixed API port among real-SkyPilot test sessions on this host."""
    fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o600)

    def give_up(_signum: int, _frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, give_up)
    try:
        # Block on the lock itself (no polling); the alarm bounds the wait.
        signal.setitimer(signal.ITIMER_REAL, HOST_LOCK_TIMEOUT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except TimeoutError:
            pytest.fail(
                f"another real-SkyPilot test session has held {HOST_LOCK} for "
                f"{HOST_LOCK_TIMEOUT:.0f}s; wait for it to finish and rerun",
                pytrace=False,
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)
        os.close(fd)


def _require_free_ports() -> None:
    for number in (port.API_PORT, port.EXTRA_PORT):
        found = port.check_port(number, {})
        if found.ownership is not port.Ownership.FREE:
            owner = f"pid {found.pid} (HOME={found.home})" if found.pid else "an unknown process"
            leftover = (
                " It looks left over by an interrupted real-SkyPilot test session."
                if "/sky-state" in (found.home or "")
                else ""
            )
            pytest.fail(
                f"127.0.0.1:{number} is already held by {owner}.{leftover} The real SkyPilot "
                "tests start their own local API server on that fixed port and never share or "
                "stop someone else's: stop it (`sky api stop`, e.g. "
                ".cache/skypilot-venv/bin/sky api stop) and rerun.",
                pytrace=False,
            )


def _clean_env(npa_home: Path) -> dict[str, str]:
    drop = ("SKYPILOT_", "NPA_SKYPILOT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "KUBECONFIG"}
    env["NPA_HOME"] = str(npa_home)
    return env


def _stop_own_server(cli: SkyCli) -> None:
    env = cli.environment()
    if port.check_port(port.API_PORT, env).ownership is port.Ownership.OURS:
        SubprocessRunner().run([str(cli.binary), "api", "stop"], env=env, timeout=120)


@dataclass
class RealVenv:
    report: BootstrapReport
    bootstrap_seconds: float
    cache: Path
    env: dict[str, str]
    npa_home: Path


@pytest.fixture(scope="session")
def real_venv(tmp_path_factory: pytest.TempPathFactory) -> RealVenv:
    """The real bootstrap into the cache, once per session (reused while it passes the gate)."""
    cache = Path(
        os.environ.get("NPA_TEST_SKYPILOT_CACHE") or REPO / ".cache" / "skypilot-venv"
    ).absolute()
    npa_home = tmp_path_factory.mktemp("npa-home")
    base = _clean_env(npa_home)
    started = time.monotonic()
    with _host_lock():  # the self-test starts (and stops) a server on the fixed port
        _require_free_ports()
        try:
            report = bootstrap.bootstrap(
                cache, os.environ.get("NPA_TEST_SKYPILOT_PYTHON"), env=base, save=False
            )
        except NpaError as exc:
            pytest.fail(
                f"real SkyPilot bootstrap failed: {exc.message}\nHint: {exc.remedy}",
                pytrace=False,
            )
    return RealVenv(report, time.monotonic() - started, cache, base, npa_home)


@pytest.fixture(scope="module")
def real_sky(real_venv: RealVenv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSky]:
    """An isolated directory whose first ``sky`` call starts this module's own API server.

    Module scope: the server (which also holds 127.0.0.1:50011) is stopped as
    soon as the real tests are done, before any other test runs.
    """
    with _host_lock():
        yield from _module_server(real_venv, tmp_path_factory)


def _module_server(
    real_venv: RealVenv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealSky]:
    _require_free_ports()
    root = tmp_path_factory.mktemp("sky-state")
    env = {**real_venv.env, "SKYPILOT_USER_ID": USER_ID, "KUBECONFIG": str(root / "no-kubeconfig")}
    isolated = IsolatedDir(root)
    isolated.prepare(env, context=None, controller=ControllerSettings())
    recorder = Recorder()
    cli = SkyCli(Path(real_venv.report.sky_bin), isolated, env, runner=recorder)
    try:
        first = cli.queue()  # starts this module's own local API server
        yield RealSky(
            real_venv.report,
            real_venv.bootstrap_seconds,
            real_venv.cache,
            isolated,
            env,
            real_venv.npa_home,
            cli,
            recorder,
            first,
            recorder.last,
        )
    finally:
        _stop_own_server(cli)
