"""A live-submit world for tests: the ``sky`` simulator, the Kubernetes double, an npa home.

``World`` wires the real ``submit``/``status``/``cancel`` SDK functions to the
simulator (through the real ``SkyCli``) and to FakeKube (through the real
``KubeApi``), with a virtual clock: ``sleep`` advances time instead of
waiting, so readiness windows and backoffs cost nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.runner import Runner
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.operations import cancellation, runstatus
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.target.services import Clock, Services
from tests.support import skyvenv
from tests.support.fakekube import FakeKube
from tests.support.skysim import harness
from tests.support.skysim.kubepods import kube_env

ROOT = Path(__file__).resolve().parents[3]
SIM_PORT = "47346"
CONTEXT = "fake-a"


@dataclass
class VirtualClock:
    """Time that moves only when someone sleeps (or ``tick`` is called)."""

    t: float = 1_800_000_000.0
    slept: list[float] = field(default_factory=list)
    # where the simulator reads the time (``$SKYSIM_CLOCK_FILE``): its ``seconds``
    # timelines then move with this clock, as a real controller's jobs move in real time
    publish: Path | None = None

    def now(self) -> float:
        self.t += 0.001  # strictly increasing, like a real clock
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += max(seconds, 0.0)
        if self.publish is not None:
            tmp = self.publish.with_name(self.publish.name + ".tmp")
            tmp.write_text(repr(self.t), encoding="utf-8")
            tmp.replace(self.publish)  # a reader sees the old time or the new, never half

    def clock(self) -> Clock:
        return Clock(self.now, self.sleep, lambda: 0.5)


@dataclass
class World:
    root: Path
    fake: FakeKube
    sky_bin: Path
    env: dict[str, str]
    clock: VirtualClock = field(default_factory=VirtualClock)
    pods: bool = False
    runner: Runner | None = None  # None: the wrapper, one process per call

    @property
    def home(self) -> Path:
        return Path(self.env["NPA_HOME"])

    @property
    def isolated(self) -> IsolatedDir:
        return IsolatedDir(self.root / "state")

    @property
    def state_dir(self) -> Path:
        return Path(self.env["SKYSIM_STATE_DIR"])

    def faults(self, *rules: dict[str, Any]) -> None:
        harness.write_faults(Path(self.env["SKYSIM_FAULTS"]), list(rules))

    def services(self) -> Services:
        def sky(isolated: IsolatedDir, env: Mapping[str, str], _sky_bin: str | None) -> SkyCli:
            return SkyCli(self.sky_bin, isolated, env, runner=self.runner, check_ports=False)

        return Services(sky=sky, clock=self.clock.clock(), isolated_dir=self.isolated.root)

    def options(self, **overrides: Any) -> submitflags.SubmitOptions:
        values: dict[str, Any] = {
            "infra": f"k8s/{CONTEXT}",
            "project_root": ROOT,
            "resolve_accelerators": False,
            "poll_seconds": 5.0,
            "preflight_images": False,  # registry checks have their own tests (tests/integration/preflight)
        }
        values.update(overrides)
        return submitflags.SubmitOptions(**values)

    def submit(self, spec: Path | str, **overrides: Any) -> liverun.LiveResult:
        result = pipeline.submit(
            Path(spec), self.options(**overrides), env=self.env, services=self.services()
        )
        assert isinstance(result, liverun.LiveResult)
        return result

    def status(self, run_id: str, *, cached: bool = False) -> runstatus.StatusReport:
        return runstatus.run_status(run_id, env=self.env, cached=cached, services=self.services())

    def cancel(self, run_id: str) -> cancellation.CancelReport:
        return cancellation.cancel_run(run_id, env=self.env, services=self.services())

    def sim_jobs(self) -> list[dict[str, Any]]:
        state = harness.read_state(self.state_dir)
        return list(state.get("jobs", []))

    def sim_calls(self) -> list[list[str]]:
        """The argv of every simulated ``sky`` call that reached the server, in order."""
        state = harness.read_state(self.state_dir)
        return [list(c["argv"]) for c in state.get("calls", [])]

    def jobs_named(self, name: str) -> list[dict[str, Any]]:
        return [j for j in self.sim_jobs() if j.get("name") == name]


def make_world(
    tmp_path: Path,
    fake: FakeKube,
    *,
    pods: bool = False,
    runner: Runner | None = None,
    sky_time: bool = False,
) -> World:
    """``sky_time``: the simulator's clock is the world's virtual clock, so jobs scripted
    on ``seconds`` (``{"clock": "seconds", "interval": ...}``) run while npa sleeps."""
    state_dir = tmp_path / "sky-server"
    state_dir.mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "USER": "tester",
        "HOME": str(tmp_path / "home"),
        "KUBECONFIG": str(fake.kubeconfig),
        "NPA_HOME": str(tmp_path / "npa-home"),
        "SKYSIM_FAULTS": str(tmp_path / "faults.json"),
        "SKYSIM_API_PORT": SIM_PORT,
        "SKYSIM_STATE_DIR": str(state_dir),
    }
    if pods:
        env.update(kube_env(fake, CONTEXT))
    (tmp_path / "home").mkdir()
    clock = VirtualClock()
    if sky_time:
        clock.publish = tmp_path / "sky-clock"
        clock.sleep(0.0)  # the simulator's time starts where the world's does
        env["SKYSIM_CLOCK_FILE"] = str(clock.publish)
    wrapper = skyvenv.simulator(tmp_path)
    return World(tmp_path, fake, wrapper, env, clock=clock, pods=pods, runner=runner)
