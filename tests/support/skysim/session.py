"""One simulated invocation: output, prompts, exits, and the fault rules that apply to it."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping

from . import faults, store

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Exit", "Session", "cluster_not_up", "sha256", "usage"]


class Exit(Exception):
    """End the invocation with ``code``, printing ``stderr`` (one line per error, §1)."""

    def __init__(self, code: int, stderr: str = "") -> None:
        super().__init__(code, stderr)
        self.code = code
        self.stderr = stderr


def usage(prog: str, arguments: str, message: str) -> Exit:
    """A click-style usage error: exit 2 (§1)."""
    return Exit(
        2, f"Usage: {prog} [OPTIONS] {arguments}\nTry '{prog} -h' for help.\n\nError: {message}"
    )


def cluster_not_up() -> Exit:
    return Exit(1, faults.CLUSTER_NOT_UP)


def sha256(value: str) -> str:
    """What the state records instead of a secret value."""
    import hashlib

    return hashlib.sha256(value.encode()).hexdigest()


class Session:
    def __init__(self, env: Mapping[str, str], argv: list[str]) -> None:
        self.env = dict(env)
        self.argv = list(argv)
        self.dir = store.state_dir(env)
        self.port = env.get("SKYSIM_API_PORT") or "46580"
        self.user = ""
        self.command = ""
        self.rules: list[faults.Rule] = []
        self._trailing: list[str] = []

    # -- output ----------------------------------------------------------
    def say(self, *lines: str) -> None:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.flush()

    def confirm(self, prompt: str) -> None:
        """click.confirm(default=True, abort=True): EOF or 'n' prints ``Aborted!``, exit 1."""
        while True:
            sys.stdout.write(f"{prompt} [Y/n]: ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                raise Exit(1, "Aborted!")
            answer = line.strip().lower()
            if answer in ("", "y", "yes"):
                self.say()
                return
            if answer in ("n", "no"):
                raise Exit(1, "Aborted!")
            self.say("Error: invalid input")

    def prompt(self, prompt: str) -> str:
        sys.stdout.write(f"{prompt}: ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            raise Exit(1, "Aborted!")
        self.say()
        return line.rstrip("\n")

    def finish(self) -> None:
        if self._trailing:
            self.say(*self._trailing)

    # -- state -------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[store.State]:
        with store.transaction(self.dir) as state:
            yield state

    def rule(self, action: str) -> faults.Rule | None:
        return next((r for r in self.rules if r.get("action") == action), None)

    def _error(self, rule: faults.Rule) -> Exit:
        return Exit(
            int(rule.get("exit", 1)), faults.error_text(rule, port=self.port, command=self.command)
        )

    def begin(self, command: str) -> None:
        """The request reaches the server: count it, record it, apply pre-acceptance faults."""
        self.command = command
        self.user = store.user_hash(self.env)
        rules = faults.load_rules(self.env, self.dir)
        with self.transaction() as state:
            n = state["counters"].get(command, 0) + 1
            state["counters"][command] = n
            state["calls"].append(
                {
                    "command": command,
                    "n": n,
                    "argv": self.argv,
                    "env_names": sorted(self.env),  # names only, never values
                    "cwd": os.getcwd(),
                    "user_hash": self.user,
                }
            )
            self.rules = faults.matching(rules, command, n)
            starting = not state["server_started"] and self.env.get("SKYSIM_BANNER", "1") != "0"
            state["server_started"] = True
            controller = self.rule("controller")
            if controller is not None:
                self._set_controller(state, bool(controller.get("up", True)))
        if starting or self.rule("preamble"):
            self.say(*faults.banner(self.port))
        trailing = self.rule("trailing")
        if trailing is not None:
            self._trailing.append(str(trailing.get("text", "Tip: run `sky jobs queue -v`.")))
        say = self.rule("say")
        if say is not None:
            stream = sys.stderr if say.get("stream") == "stderr" else sys.stdout
            for line in say.get("lines", []):
                stream.write(f"{line}\n")
                stream.flush()
        flood = self.rule("flood")
        if flood is not None:
            _flood(flood)
        hang = self.rule("hang")
        if hang is not None and not hang.get("after_accept"):
            _hang(hang)
        fail = self.rule("fail")
        if fail is not None:
            if "stdout" in fail:
                self.say(str(fail["stdout"]))
            raise self._error(fail)
        garbage = self.rule("garbage")
        if garbage is not None:
            sys.stdout.write(str(garbage.get("stdout", "\x00\x1b[2K{{not json] <html>oops")))
            sys.stdout.flush()
            raise Exit(int(garbage.get("exit", 0)), str(garbage.get("stderr", "")))

    def accepted(self) -> None:
        """The server has acted: apply the after-acceptance faults."""
        hang = self.rule("hang")
        if hang is not None and hang.get("after_accept"):
            _hang(hang)
        rule = self.rule("accept_then_fail")
        if rule is not None:
            raise self._error({"exit": 1, **rule})

    def _set_controller(self, state: store.State, up: bool) -> None:
        if up:
            state["controllers"].setdefault(self.user, controller_record(self.env, None))
        else:
            state["controllers"].pop(self.user, None)
            state["jobs"] = [j for j in state["jobs"] if j["user_hash"] != self.user]


def _flood(rule: faults.Rule) -> None:
    """Print ``bytes`` of filler in lines of ``width`` characters on ``stream`` (stdout)."""
    stream = sys.stderr if rule.get("stream") == "stderr" else sys.stdout
    total, width = int(rule.get("bytes", 1 << 20)), max(int(rule.get("width", 4096)), 2)
    line = ("x" * (width - 1) + "\n").encode("ascii")
    out = stream.buffer
    block = line * max(1, (1 << 20) // width)  # about a MiB per write
    written = 0
    while written + len(block) <= total:
        out.write(block)
        written += len(block)
    out.write(line * ((total - written) // width))
    out.flush()


def _hang(rule: faults.Rule) -> None:
    """Hang as the rule says: a fixed time, or until a test releases the call.

    ``signal_fifo``: write this process's pid into the FIFO when the hang begins
    (the test's blocking read is the event "the call is hanging now").
    ``release_fifo``: then block until the test writes a line into that FIFO.
    """
    signal_fifo, release_fifo = rule.get("signal_fifo"), rule.get("release_fifo")
    if signal_fifo is None and release_fifo is None:
        time.sleep(float(rule.get("seconds", 30)))
        return
    if signal_fifo is not None:
        with open(str(signal_fifo), "w", encoding="ascii") as out:
            out.write(f"{os.getpid()}\n")
    if release_fifo is not None:
        with open(str(release_fifo), encoding="ascii") as gate:
            gate.readline()


def controller_record(
    env: Mapping[str, str], infra: str | None, *, up_from_tick: int = 0
) -> dict[str, Any]:
    return {
        "status": "UP",
        "up_from_tick": up_from_tick,
        "launched_at": time.time(),
        "user_name": store.user_name(env),
        "infra": infra,
    }
