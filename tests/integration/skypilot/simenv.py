"""A simulated SkyPilot installation for the contract suite: wrapper, faults, isolated dirs."""

from __future__ import annotations

import math
import os
import select
import signal
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.models import CommandResult
from npa_infra.skypilot.runner import Runner, SubprocessRunner
from npa_infra.skypilot.skycli import SkyCli
from tests.support import skyvenv
from tests.support.skysim import harness

# Not 46580: tests never touch the real local API server's port (§7.3).
SIM_PORT = "47345"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: npa-ctx, context: {cluster: c, user: u, namespace: npa}}]
current-context: npa-ctx
"""


class ShortTimeout:
    """A runner whose every call times out after ``seconds`` (the hang fault's client)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.inner = SubprocessRunner()

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
    ) -> CommandResult:
        limit = min(timeout or math.inf, self.seconds)
        return self.inner.run(
            argv, env=env, cwd=cwd, stdin=stdin, timeout=limit, on_started=on_started
        )


@dataclass
class Sim:
    """One simulated SkyPilot installation in a test's tmp_path."""

    root: Path
    binary: Path
    faults_file: Path
    env: dict[str, str]

    def faults(self, *rules: dict[str, Any]) -> None:
        harness.write_faults(self.faults_file, list(rules))

    def isolated(self, name: str = "state") -> IsolatedDir:
        iso = IsolatedDir(self.root / name)
        iso.prepare(self.env, context="npa-ctx", controller=ControllerSettings())
        return iso

    def cli(
        self,
        name: str = "state",
        *,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SkyCli:
        merged = {**self.env, **(env or {})}
        return SkyCli(self.binary, self.isolated(name), merged, runner=runner, check_ports=False)

    def task(self, text: str = "name: train\nrun: echo hi\n", name: str = "task.yaml") -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def state(self, name: str = "state") -> dict[str, Any]:
        return harness.read_state(self.state_dir(name))

    def state_dir(self, name: str = "state") -> Path:
        shared = self.env.get("SKYSIM_STATE_DIR")
        return Path(shared) if shared else self.root / name / "sky-runtime" / ".sky"

    def kill_during(self, command: str, action: Callable[[], object]) -> None:
        """Run ``action`` in a forked child and SIGKILL it while its first ``command`` call
        (``"down"``, ``"jobs.launch"``) hangs, as a process lost mid-call; then clear the faults.

        The simulator signals the hang on a FIFO, so the kill waits on that event, not a
        sleep; a child that ends before its call hangs (a refused drift gate, a port held by
        another API server) fails the test at once instead of leaving it waiting for ever.
        """
        hanging, release = self.root / f"{command}.hang.fifo", self.root / f"{command}.release.fifo"
        os.mkfifo(hanging)
        os.mkfifo(release)
        self.faults(
            {
                "command": command,
                "nth": 1,
                "action": "hang",
                "signal_fifo": str(hanging),
                "release_fifo": str(release),
            }
        )
        ended = self.root / f"{command}.ended.txt"
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child is killed
            try:
                action()
                ended.write_text("the action returned", encoding="utf-8")
            except BaseException:
                ended.write_text(traceback.format_exc(), encoding="utf-8")
            finally:
                os._exit(3)
        reader = os.open(hanging, os.O_RDONLY | os.O_NONBLOCK)
        keeper = os.open(hanging, os.O_WRONLY)  # ours: no end-of-file before the hang's line
        child = os.pidfd_open(pid)
        try:
            poller = select.poll()
            poller.register(reader, select.POLLIN)
            poller.register(child, select.POLLIN)
            ready = {fd for fd, _ in poller.poll()}  # the call is hanging now, or the child ended
        finally:
            os.close(keeper)
            os.close(child)
            os.close(reader)
        if reader not in ready:
            _, status = os.waitpid(pid, 0)
            self.faults()
            why = ended.read_text(encoding="utf-8") if ended.exists() else "no word from it"
            raise AssertionError(
                f"the action ended (wait status {status}) before its first {command} call "
                f"hung: {why}"
            )
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status)
        self.faults()


def make_sim(tmp_path: Path) -> Sim:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG, encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "USER": "tester",
        "KUBECONFIG": str(kubeconfig),
        "SKYSIM_FAULTS": str(tmp_path / "faults.json"),
        "SKYSIM_API_PORT": SIM_PORT,
    }
    return Sim(tmp_path, skyvenv.simulator(tmp_path), tmp_path / "faults.json", env)
