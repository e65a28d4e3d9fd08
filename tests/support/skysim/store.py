"""The simulator's state file, its lock, and the caller's identity (skypilot-0.12.md §5.1, §6)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator, Mapping

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

    State = dict[str, Any]

__all__ = [
    "STATE_NAME",
    "empty_state",
    "load",
    "now",
    "state_dir",
    "transaction",
    "user_hash",
    "user_name",
]

STATE_NAME = "skysim.json"
LOCK_NAME = "skysim.lock"
USER_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]*$")


def state_dir(env: Mapping[str, str]) -> str:
    """Where the simulated API server keeps its databases."""
    explicit = env.get("SKYSIM_STATE_DIR")
    if explicit:
        return explicit
    base = env.get("SKY_RUNTIME_DIR") or env.get("HOME") or os.path.expanduser("~")
    return os.path.join(os.path.expanduser(base), ".sky")


def now(env: Mapping[str, str]) -> float:
    """The simulated server's time: the test's virtual clock when ``$SKYSIM_CLOCK_FILE``
    names one (a file holding seconds since the epoch), else the wall clock.

    Jobs whose timeline runs on ``seconds`` then move as the caller's clock moves, as
    a real controller's jobs move in real time, while the caller sleeps for free.
    """
    path = env.get("SKYSIM_CLOCK_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return float(handle.read())
        except (OSError, ValueError):
            pass  # not written yet: the wall clock
    import time

    return time.time()


def empty_state() -> State:
    return {
        "version": 1,
        "server_started": False,
        "tick": 0,  # completed `jobs queue` calls: the simulated clock
        "next_job_id": 1,
        # the controller cluster's own job counter: never equal to the managed id (§2.2)
        "next_controller_job_id": 2,
        "controllers": {},  # user hash -> controller record
        "jobs": [],
        "requests": [],
        "calls": [],
        "counters": {},  # command -> number of invocations so far
    }


def load(directory: str | os.PathLike[str]) -> State:
    try:
        with open(os.path.join(directory, STATE_NAME), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return empty_state()
    state = empty_state()
    state.update(data)
    return state


def _save(directory: str, state: State) -> None:
    tmp = os.path.join(directory, f".{STATE_NAME}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(state, sort_keys=True))  # one-shot dumps: the C encoder
    os.replace(tmp, os.path.join(directory, STATE_NAME))


@contextlib.contextmanager
def transaction(directory: str) -> Iterator[State]:
    """Load, let the caller mutate, and save the state under an exclusive lock.

    The state is saved only when the block ends normally; an exception inside
    the block leaves the file untouched.
    """
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, LOCK_NAME), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = load(directory)
            yield state
            _save(directory, state)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def user_hash(env: Mapping[str, str]) -> str:
    """``$SKYPILOT_USER_ID`` when valid, else ``~/.sky/user_hash``, else a new saved hash (§5.1)."""
    explicit = env.get("SKYPILOT_USER_ID", "")
    if explicit and USER_ID.match(explicit):
        return explicit
    folder = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".sky")
    path = os.path.join(folder, "user_hash")
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as handle:
        stored = handle.read().strip()
        if stored:
            return stored
    import hashlib  # only a caller without SKYPILOT_USER_ID needs these
    import socket

    host = hashlib.md5(socket.gethostname().encode()).hexdigest()[-4:]
    generated = hashlib.md5(f"{user_name(env)}-{host}".encode()).hexdigest()[:8]
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(generated + "\n")
    return generated


def user_name(env: Mapping[str, str]) -> str:
    return env.get("USER") or env.get("LOGNAME") or "skysim"
