"""``SkyCli``: the SkyPilot protocol over the real ``sky`` command line.

Every call runs the resolved binary with the isolated directory's
environment, ANSI stripped and stderr classified by ``classify``. Job ids
are never taken from launch output; cancels name exact ids only (never a
name, never ``-a``). Secret values reach only the child's environment; argv
carries names.

Every call has a deadline (``call_timeout``, ``LAUNCH_TIMEOUT``, ...), after
which its process group is killed and the answer is a timeout. Once a progress
sink is given (``report_waits``), a call silent for a second says what is
awaited and until when, and again every ``runner.WAIT_EVERY`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from npa_infra.errors import ConfigError, InvariantError
from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot import checkoutput, classify, port
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.skypilot.models import (
    ApiStatusResult,
    CancelResult,
    CommandResult,
    DownResult,
    LaunchResult,
    QueueResult,
)
from npa_infra.skypilot.runner import Runner, SubprocessRunner

__all__ = ["SkyCli"]

LAUNCH_TIMEOUT = 1800.0
CALL_TIMEOUT = 300.0
FOLLOW_TIMEOUT = 7 * 24 * 3600.0  # `jobs logs --follow` ends with the job; a week bounds it
CHECK_TIMEOUT = 180.0


class SkyCli:
    """Runs ``sky`` for one isolated directory. Constructing it does no I/O."""

    def __init__(
        self,
        binary: Path,
        isolated: IsolatedDir,
        env: Mapping[str, str],
        *,
        runner: Runner | None = None,
        api_port: int = port.API_PORT,
        check_ports: bool = True,
        port_check: port.PortChecker = port.check_port,
        call_timeout: float = CALL_TIMEOUT,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.binary = binary
        self.call_timeout = call_timeout  # queue, cancel, api status, logs --no-follow, down
        self._progress = progress
        self.isolated = isolated
        self._base_env = dict(env)
        self._runner = runner or SubprocessRunner()
        self._api_port = api_port
        self._check_ports = check_ports
        self._port_check = port_check
        self._ports_checked = False

    # -- plumbing --------------------------------------------------------
    def report_waits(self, progress: Callable[[str], None] | None) -> None:
        """Say on ``progress`` what each call waits for, and its deadline, while it waits."""
        self._progress = progress

    def _waiting(self, args: Sequence[str], timeout: float) -> Callable[[float], None] | None:
        progress = self._progress
        if progress is None:
            return None
        what = " ".join([*args[:2], *(a for a in args[2:] if a.isdigit())])  # command, job ids
        ends = time.strftime("%H:%M:%S", time.localtime(time.time() + timeout))

        def report(elapsed: float) -> None:
            progress(
                f"waiting for `sky {what}`: {elapsed:.0f} s so far, deadline {timeout:.0f} s "
                f"(it is stopped at about {ends} if it has not answered)"
            )

        return report

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        child = self.isolated.environment(self._base_env)
        if extra:
            child.update(extra)
        return child

    def _guard_ports(self, env: Mapping[str, str]) -> None:
        """Never talk to a local API server that belongs to another state directory (§7.3)."""
        if not self._check_ports or self._ports_checked or env.get("SKYPILOT_API_SERVER_ENDPOINT"):
            return
        for number in (self._api_port, port.EXTRA_PORT):
            check = self._port_check(number, env)
            if not check.safe:
                owner = (
                    f"pid {check.pid} (HOME={check.home}, SKYPILOT_USER_ID={check.user_id})"
                    if check.pid
                    else "an unidentified process"
                )
                raise ConfigError(
                    f"127.0.0.1:{number} is held by {owner}, not by this stack's SkyPilot state",
                    remedy="stop that SkyPilot API server (`sky api stop` in its environment), "
                    "or run npa with the same isolated directory it uses",
                    details={"port": number, "ownership": check.ownership.value, "pid": check.pid},
                )
        self._ports_checked = True

    def _run(
        self,
        args: Sequence[str],
        *,
        extra_env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
        report_wait: bool = True,
    ) -> CommandResult:
        env = self.environment(extra_env)
        self._guard_ports(env)
        timeout = self.call_timeout if timeout is None else timeout
        # only what is asked for: a runner that cannot gate, stream or report is never
        # handed the callback
        gated: dict[str, Callable[..., None]] = {}
        if on_started is not None:
            gated["on_started"] = on_started
        if on_line is not None:
            gated["on_line"] = on_line
        waiting = self._waiting(args, timeout) if report_wait else None
        if waiting is not None:
            gated["on_wait"] = waiting
        return self._runner.run(
            [str(self.binary), *args],
            env=env,
            cwd=str(self.isolated.root),
            stdin=stdin,
            timeout=timeout,
            **gated,
        )

    # -- operations ----------------------------------------------------------
    def version(self) -> str | None:
        return classify.parse_version(self._run(["--version"], timeout=120))

    def launch(
        self,
        task_yaml: Path,
        *,
        name: str,
        infra: str | None = None,
        secrets: Mapping[str, str] | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> LaunchResult:
        """``sky jobs launch --async``; acceptance is not proof that a job exists (§2.4).

        ``on_started`` receives the child's identity before the child may reach the
        API server (``runner`` gates it), so the caller can make it durable first.
        ``on_line`` receives each line of its output as it arrives (ANSI as printed).
        """
        args = ["jobs", "launch", "--name", name, "--yes", "--detach-run", "--async"]
        if infra:
            args += ["--infra", infra]
        for secret in secrets or {}:
            args += ["--secret", secret]  # by name: the value travels in the child's env only
        args.append(str(task_yaml))
        return classify.parse_launch(
            self._run(
                args,
                extra_env=secrets,
                timeout=LAUNCH_TIMEOUT,
                on_started=on_started,
                on_line=on_line,
            )
        )

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        args = ["jobs", "queue", "--all"]
        if all_users:
            args.append("--all-users")
        if verbose:
            args.append("-v")
        return classify.parse_queue(self._run([*args, "--output", "json"]))

    def api_status(self, request_ids: Sequence[str] = ()) -> ApiStatusResult:
        """``sky api status``: the named requests in any state, else the active ones (§2.4)."""
        args = ["api", "status", *request_ids]
        if request_ids:
            args.append("--all-status")
        return classify.parse_api_status(self._run([*args, "--output", "json"]))

    def api_logs(self, request_id: str) -> CommandResult:
        """``sky api logs ID`` of a finished request: the text its failure is classified from."""
        return self._run(["api", "logs", request_id], timeout=60)

    def cancel(self, job_ids: Sequence[int]) -> CancelResult:
        if not job_ids:
            raise InvariantError(
                "cancel needs at least one exact job id; npa never cancels by name or -a"
            )
        return classify.parse_cancel(self._run(["jobs", "cancel", "--yes", *map(str, job_ids)]))

    def logs(
        self,
        job_id: int,
        *,
        controller: bool = False,
        follow: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """``sky jobs logs --no-follow <id>``: the log so far, by exact id (never a name).

        With ``follow`` it is ``--follow``: the command streams until the job ends (each
        line to ``on_line`` as it arrives), bounded by ``FOLLOW_TIMEOUT``, and exits with
        the job's exit code (skypilot-0.12.md, ``runs.logtargets.read_state``).
        """
        args = ["jobs", "logs", "--follow" if follow else "--no-follow"]
        if controller:
            args.append("--controller")
        timeout = FOLLOW_TIMEOUT if follow else None
        # following a running job is waiting by design: only a one-shot read reports
        return self._run(
            [*args, str(job_id)], timeout=timeout, on_line=on_line, report_wait=not follow
        )

    def down_controller(self) -> DownResult:
        """Tear down this directory's jobs controller, answering the ``delete`` prompt (§5.4)."""
        name = self.isolated.controller_name(self._base_env)
        return classify.parse_down(self._run(["down", name, "--yes"], stdin="delete\n"))

    def check(self, infra: str = "kubernetes") -> checkoutput.CheckResult:
        """``sky check INFRA``: SkyPilot's own verdict, as its API server sees the infra.

        Read-only: it updates only SkyPilot's cache of enabled clouds in this state.
        """
        return checkoutput.parse_check(self._run(["check", infra], timeout=CHECK_TIMEOUT), infra)
