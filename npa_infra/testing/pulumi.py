"""``ReplayPulumiCommand``: a ``PulumiCommand`` that replays engine event logs (pulumi.md §5.2).

The Pulumi engine cannot be installed where CI runs, so the Automation API
is exercised against this command instead: the real ``Stack`` code builds the
argv, starts its event-log watcher and parses every event; only the process
is replaced. The command declares CLI version 3.200.0, which selects the
file event-log transport; for an operation that passes ``--event-log FILE``
it writes the scenario's JSON lines there before returning, exactly as the
CLI does. ``calls`` records each call's argv, working directory and added
environment, so tests assert what would have run. A scenario's non-zero
code raises the SDK's own classified ``CommandError``, as the real command does.

Operations are keyed by their first words: ``preview``, ``up``, ``destroy``,
``refresh``, ``stack select``, ``stack init``, ``stack output``,
``stack history``. Unscripted ``stack select``/``init`` succeed; any other
unscripted operation fails loudly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from pulumi.automation import errors as auto_errors
from semver import VersionInfo

__all__ = ["Call", "Replay", "ReplayPulumiCommand", "load_events"]

REPLAY_VERSION = "3.200.0"  # <= 3.205: the SDK reads events from an --event-log file


@dataclass(frozen=True, slots=True)
class Replay:
    """One scripted answer: the events to write, then the exit code and streams."""

    events: Sequence[Mapping[str, Any]] = ()
    code: int = 0
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class Call:
    args: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]

    @property
    def operation(self) -> str:
        words = [a for a in self.args if not a.startswith("-")]
        return " ".join(words[:2]) if words and words[0] == "stack" else (words or [""])[0]

    def value_of(self, flag: str) -> str | None:
        for index, arg in enumerate(self.args):
            if arg == flag and index + 1 < len(self.args):
                return self.args[index + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
        return None


def load_events(path: Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines event log (one engine event per line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@dataclass
class _State:
    scripts: dict[str, list[Replay]]
    calls: list[Call] = field(default_factory=list)


class ReplayPulumiCommand(auto.PulumiCommand):
    """See the module docstring. Never runs a process; never reads ``PATH``."""

    def __init__(self, scripts: Mapping[str, Replay | Sequence[Replay]]) -> None:
        # deliberately no super().__init__(): it would run `pulumi version` (pulumi.md §5.2)
        self.command = "pulumi"
        self.version = VersionInfo.parse(REPLAY_VERSION)
        queued = {
            op: [answer] if isinstance(answer, Replay) else list(answer)
            for op, answer in scripts.items()
        }
        self._state = _State(queued)

    @property
    def calls(self) -> list[Call]:
        return list(self._state.calls)

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: auto.OnOutput | None = None,
        on_error: auto.OnOutput | None = None,
    ) -> auto.CommandResult:
        if "--non-interactive" not in args:
            args.insert(0, "--non-interactive")  # as the real command does
        call = Call(tuple(args), cwd, dict(additional_env))
        self._state.calls.append(call)
        answer = self._answer(call)
        log = call.value_of("--event-log")
        if log is not None and not log.startswith("tcp://"):
            with open(log, "a", encoding="utf-8") as handle:
                for event in answer.events:
                    handle.write(json.dumps(event) + "\n")
        for line in answer.stdout.splitlines():
            if on_output is not None:
                on_output(line)
        for line in answer.stderr.splitlines():
            if on_error is not None:
                on_error(line)
        result = auto.CommandResult(stdout=answer.stdout, stderr=answer.stderr, code=answer.code)
        if answer.code != 0:
            raise auto_errors.create_command_error(result)
        return result

    def _answer(self, call: Call) -> Replay:
        queue = self._state.scripts.get(call.operation)
        if queue:
            return queue.pop(0) if len(queue) > 1 else queue[0]
        if call.operation in ("stack select", "stack init"):
            return Replay()
        raise AssertionError(f"ReplayPulumiCommand: no answer scripted for {list(call.args)}")
