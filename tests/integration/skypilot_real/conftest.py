"""The real ``skypilot==0.12.2``, bootstrapped once per session (skypilot-0.12.md §12).

The venv is built by the real ``bootstrap()`` into a cached directory,
``NPA_TEST_SKYPILOT_CACHE`` (default ``<repo>/.cache/skypilot-venv``). A cache
that already passes the gate is reused: that is bootstrap's idempotence path.
The first build downloads SkyPilot and takes minutes.

SkyPilot's local API server listens on the fixed 127.0.0.1:46580 and 50011 and
leaves its request-queue manager behind when it stops (team-mode.md §6.1), so
no real server runs on this machine's own network (issue 31): every ``sky`` call
that may start one runs inside a ``PrivateHost`` (its own network and PID
namespace, ``tests/support/privatehost.py``), one for the bootstrap's self-test
and one per module, and the namespace's end ends every process of it. The
machine's own ports are never read or needed. After each test, a ``sky``
process left on this machine with HOME under the session's temporary directory
fails that test, naming the PIDs.

``record()`` keeps the real outputs as golden files under
``tests/fixtures/skypilot/real/`` for the simulator: written when missing or
when ``NPA_RECORD_GOLDEN=1``, otherwise compared byte for byte.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from npa_infra.errors import NpaError
from npa_infra.skypilot import bootstrap
from npa_infra.skypilot.bootstrap import BootstrapReport
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.models import CommandResult, QueueResult
from npa_infra.skypilot.runner import SubprocessRunner
from npa_infra.skypilot.skycli import SkyCli
from tests.support.privatehost import PrivateHost, PrivateHostError, leftover_sky_processes

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "fixtures" / "skypilot" / "real"
# A fixed identity keeps the recorded controller name stable across runs.
USER_ID = "npa-realtest01"


class Recorder:
    """The real subprocess runner inside ``host``, keeping every result for the golden files."""

    def __init__(self, host: PrivateHost) -> None:
        self.inner = host.runner(SubprocessRunner())
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
    host: PrivateHost
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


def private_host() -> PrivateHost:
    """A new ``PrivateHost``; where namespaces cannot be made, a failure under CI, else a skip."""
    try:
        return PrivateHost.start()
    except PrivateHostError as exc:
        message = f"the real SkyPilot tests run their server in a private namespace: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def is_sky(argv: Sequence[str]) -> bool:
    """A ``sky`` call (the one kind of command that may start an API server)."""
    return Path(argv[0]).name == "sky"


@pytest.fixture(autouse=True)
def no_sky_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the test after which a ``sky`` process of this session still runs on this machine."""
    yield
    root = tmp_path_factory.getbasetemp()
    left = leftover_sky_processes(root)
    for process in left:
        with suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    assert not left, "SkyPilot processes outlived this test (killed now): " + "; ".join(
        p.describe() for p in left
    )


def _clean_env(npa_home: Path) -> dict[str, str]:
    drop = ("SKYPILOT_", "NPA_SKYPILOT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "KUBECONFIG"}
    env["NPA_HOME"] = str(npa_home)
    return env


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
    host = private_host()  # the self-test's `sky jobs queue` starts a server: inside, then gone
    try:
        report = bootstrap.bootstrap(
            cache,
            os.environ.get("NPA_TEST_SKYPILOT_PYTHON"),
            env=base,
            save=False,
            runner=host.runner(SubprocessRunner(), only=is_sky),  # pip keeps this network
            port_check=host.port_check,
        )
    except NpaError as exc:
        pytest.fail(
            f"real SkyPilot bootstrap failed: {exc.message}\nHint: {exc.remedy}", pytrace=False
        )
    finally:
        host.close()
    return RealVenv(report, time.monotonic() - started, cache, base, npa_home)


@pytest.fixture(scope="module")
def real_sky(real_venv: RealVenv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSky]:
    """An isolated directory whose first ``sky`` call starts this module's own API server.

    Module scope, in this module's own ``PrivateHost``: the server and every process
    it leaves end with the namespace when the module's tests are done.
    """
    host = private_host()
    root = tmp_path_factory.mktemp("sky-state")
    env = {**real_venv.env, "SKYPILOT_USER_ID": USER_ID, "KUBECONFIG": str(root / "no-kubeconfig")}
    isolated = IsolatedDir(root)
    isolated.prepare(env, context=None, controller=ControllerSettings())
    recorder = Recorder(host)
    cli = SkyCli(
        Path(real_venv.report.sky_bin), isolated, env, runner=recorder, port_check=host.port_check
    )
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
            host,
            first,
            recorder.last,
        )
    finally:
        host.close()
