"""Live actions in flight, recorded where every npa home using one SkyPilot state sees them.

Two records live in ``<state dir>/npa-locks/``: the launch of a run that may be
in flight, and a ``sky down`` of the jobs controller that may be under way.

An npa home's journal knows its own launches, but another home submitting the
same run into the same SkyPilot state directory starts a fresh transaction:
it would find the name absent while the first home's accepted request is still
waiting in the API server, and launch a second job. So the launch driver also
writes the launch it has in flight to
``<state dir>/npa-locks/launches/<run>.inflight.json`` (0600, replaced
atomically, under the run's launch lock): before each request is sent, again
with the child's identity and the request id, and removes it only once the
launch is settled (its id adopted, or its absence proven with the request
terminal). Any submit that takes the launch lock and finds another home's
record must settle that launch first (``runs.cancel.judge_unreconciled``).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_infra.journal import files
from npa_infra.journal.lock import STATE_LOCKS
from npa_infra.runs.children import ChildIdentity

__all__ = [
    "ControllerDown",
    "InflightLaunch",
    "begin_controller_down",
    "controller_down",
    "end_controller_down",
    "inflight_path",
    "launches_in_flight",
    "read",
    "remove",
    "write",
]


@dataclass(frozen=True, slots=True)
class InflightLaunch:
    home: str  # the npa home whose journal holds the transaction
    logical_launch_id: str
    job_name: str
    launch_sequence: int
    request_ids: tuple[str, ...] = ()
    child: ChildIdentity | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "home": self.home,
            "logical_launch_id": self.logical_launch_id,
            "job_name": self.job_name,
            "launch_sequence": self.launch_sequence,
            "request_ids": list(self.request_ids),
            "child": None if self.child is None else self.child.to_json(),
        }


def inflight_path(state_dir: Path, run_id: str) -> Path:
    return state_dir / STATE_LOCKS / "launches" / f"{run_id}.inflight.json"


def write(path: Path, launch: InflightLaunch) -> None:
    """Replace the record atomically and durably (the caller holds the launch lock)."""
    files.replace_private(path, json.dumps(launch.to_json(), sort_keys=True).encode("utf-8"))


_UNREADABLE = object()  # a record that exists but cannot be read: it may still act


def _record(path: Path) -> dict[str, Any] | object | None:
    """The record's JSON object, None when there is none, ``_UNREADABLE`` otherwise."""
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return _UNREADABLE
    return raw if isinstance(raw, dict) else _UNREADABLE


def read(path: Path) -> InflightLaunch | None:
    """The recorded launch; an unreadable record is one that may still act (never None)."""
    raw = _record(path)
    if raw is None:
        return None
    unknown = InflightLaunch(home="?", logical_launch_id="?", job_name="?", launch_sequence=1)
    if not isinstance(raw, dict):
        return unknown
    try:
        return InflightLaunch(
            home=str(raw.get("home") or "?"),
            logical_launch_id=str(raw.get("logical_launch_id") or "?"),
            job_name=str(raw.get("job_name") or "?"),
            launch_sequence=int(raw.get("launch_sequence") or 1),
            request_ids=tuple(str(r) for r in raw.get("request_ids") or ()),
            child=ChildIdentity.from_json(raw.get("child")),
        )
    except (TypeError, ValueError, AttributeError):  # a field of the wrong type: may still act
        return unknown


_SUFFIX = ".inflight.json"


def launches_in_flight(state_dir: Path) -> dict[str, InflightLaunch] | None:
    """Every launch recorded in flight in ``state_dir``, by run id; None when the records
    cannot be listed (a teardown must then assume one may be in flight)."""
    directory = inflight_path(state_dir, "x").parent
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    found: dict[str, InflightLaunch] = {}
    for name in names:
        if not name.endswith(_SUFFIX) or name.startswith("."):
            continue  # the run locks and a writer's temporaries share the directory
        launch = read(directory / name)
        if launch is not None:  # settled since the listing
            found[name.removesuffix(_SUFFIX)] = launch
    return found


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@dataclass(frozen=True, slots=True)
class ControllerDown:
    """A ``sky down`` of this state directory's jobs controller that may be under way."""

    controller: str
    stack: str
    pid: int
    at: float


def _down_path(state_dir: Path) -> Path:
    return state_dir / STATE_LOCKS / "controller-down.json"


def begin_controller_down(state_dir: Path, down: ControllerDown) -> None:
    """Durable before ``sky down`` is sent: no launch into this state starts while it stands."""
    path = _down_path(state_dir)
    old = os.umask(0o077)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old)
    body = {"controller": down.controller, "stack": down.stack, "pid": down.pid, "at": down.at}
    files.replace_private(path, json.dumps(body, sort_keys=True).encode("utf-8"))


def end_controller_down(state_dir: Path) -> None:
    """The down has a definite answer (torn down, already absent, or refused untouched)."""
    remove(_down_path(state_dir))


def controller_down(state_dir: Path) -> ControllerDown | None:
    """The recorded down, if one may be under way; an unreadable record counts as one."""
    raw = _record(_down_path(state_dir))
    if raw is None:
        return None
    unknown = ControllerDown(controller="?", stack="?", pid=0, at=0.0)
    if not isinstance(raw, dict):
        return unknown
    try:
        return ControllerDown(
            controller=str(raw.get("controller") or "?"),
            stack=str(raw.get("stack") or "?"),
            pid=int(raw.get("pid") or 0),
            at=float(raw.get("at") or 0.0),
        )
    except (TypeError, ValueError):  # a field of the wrong type: the down may be under way
        return unknown
