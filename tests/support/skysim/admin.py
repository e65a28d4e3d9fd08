"""``sky down``, ``sky status`` and ``sky api status|cancel`` (skypilot-0.12.md §2.4, §5)."""

from __future__ import annotations

import json
import time

from . import jobs, render, store
from .commands import controllers_up, visible_jobs
from .session import Exit, Session, usage

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["api_cancel", "api_logs", "api_status", "down", "status"]

CONTROLLER_PREFIX = "sky-jobs-controller-"
GLOB = set("*?[")
ACTIVE = ("PENDING", "RUNNING")


def _split_controllers(names: list[str]) -> tuple[list[str], list[str]]:
    """Exact controller names; globs and ``-a`` never select the controller (§5.4)."""
    controllers = [n for n in names if n.startswith(CONTROLLER_PREFIX) and not GLOB & set(n)]
    return controllers, [n for n in names if n not in controllers]


def _refusal(rows: list[dict[str, Any]]) -> Exit:
    table = render.job_table(rows, all_users=False, verbose=False)
    return Exit(
        1,
        f"sky.exceptions.NotSupportedError: {render.RED}In-progress managed jobs found. To avoid "
        f"resource leakage, cancel all jobs first: {render.BOLD}sky jobs cancel -a{render.RESET}\n"
        + "\n".join("   " + line for line in table if line),
    )


def _in_progress_rows(state: dict[str, Any], owner: str, now: float) -> list[dict[str, Any]]:
    tick = state["tick"]
    rows = []
    for job in visible_jobs(state, tick):
        if jobs.controller_of(job) != owner:  # every user's jobs on this controller count
            continue
        statuses = jobs.task_statuses(job, tick, now)
        if all(s in jobs.TERMINAL for s in statuses):
            continue
        step = jobs.step(job, tick, now)
        rows += [
            jobs.row(job, i, s, step, now, jobs.DEFAULT_FIELDS) for i, s in enumerate(statuses)
        ]
    return rows


def down(session: Session, a: argparse.Namespace) -> int:
    controllers, others = _split_controllers(a.clusters)
    if not a.clusters and not a.all:
        raise usage("sky down", "[CLUSTERS]...", "Either specify clusters or use -a/--all.")
    if controllers and (others or a.all or len(controllers) > 1):
        raise usage(
            "sky down",
            "[CLUSTERS]...",
            f"Tearing down controller(s) {', '.join(controllers)} with other cluster(s) is "
            "currently not supported. Please tear down the controller on its own.",
        )
    session.begin("down")
    if not controllers:
        if others:
            session.say(f"Cluster(s) not found: {render.BOLD}{', '.join(others)}{render.RESET}.")
        else:
            session.say("No existing clusters found.")
        return 0
    name = controllers[0]
    owner = name[len(CONTROLLER_PREFIX) :]
    with session.transaction() as state:
        exists = owner in controllers_up(state)
        rows = _in_progress_rows(state, owner, store.now(session.env)) if exists else []
    if not exists:  # as recorded from 0.12.2 (real/down_controller_absent.txt)
        session.say(
            f"Cluster(s) not found: {render.BOLD}{name}{render.RESET}.",
            "Managed jobs controller has already been torn down.",
        )
        return 0
    session.say(
        f"{render.YELLOW}WARNING: Tearing down the managed jobs controller. Please be aware of "
        f"the following:{render.RESET}",
        " * All logs and status information of the managed jobs (output of `sky jobs queue`) "
        "will be lost.",
    )
    if rows or session.rule("refuse_down"):
        raise _refusal(rows or [_placeholder_row()])
    session.say(
        " * No in-progress managed jobs found. It should be safe to terminate (see caveats above)."
    )
    if (
        not a.purge
        and session.prompt(f"To proceed, please type {render.BOLD}'delete'{render.RESET}")
        != "delete"
    ):
        raise Exit(1, "Aborted!")  # the prompt is asked even with -y (§5.4)
    with session.transaction() as state:
        state["controllers"].pop(owner, None)
        state["jobs"] = [j for j in state["jobs"] if jobs.controller_of(j) != owner]
    session.accepted()
    session.say(f"Terminating cluster {name}...done.")
    return 0


def _placeholder_row() -> dict[str, Any]:
    job = {
        "job_id": 0,
        "name": "in-progress",
        "user_hash": "-",
        "user_name": "-",
        "execution": "single",
        "submitted_at": time.time(),
        "tasks": [
            {
                "task_name": "in-progress",
                "resources": "1x[CPU:1+]",
                "accelerators": None,
                "timeline": ["RUNNING"],
            }
        ],
    }
    return jobs.row(job, 0, "RUNNING", 1, time.time(), jobs.DEFAULT_FIELDS)


def status(session: Session, a: argparse.Namespace) -> int:
    session.begin("status")
    with session.transaction() as state:
        up = controllers_up(state)
        owners = sorted(up) if a.all_users else [u for u in up if u == session.user]
        records = {u: state["controllers"][u] for u in owners}
    clusters = []
    for owner, record in sorted(records.items()):
        name = f"{CONTROLLER_PREFIX}{owner}"
        if a.clusters and name not in a.clusters:
            continue
        infra = record.get("infra") or "k8s"
        region = infra.partition("/")[2] or None
        clusters.append(
            {
                "name": name,
                "status": record["status"],
                "launched_at": record["launched_at"],
                "user_hash": owner,
                "user_name": record["user_name"],
                "cloud": "Kubernetes",
                "region": region,
                "infra": f"Kubernetes/{region}" if region else "Kubernetes",
                "resources_str": "1x(cpus=2, mem=8, disk=50)",
                "num_nodes": 1,
                "autostop": -1,
                "to_down": False,
                "workspace": "default",
            }
        )
    if a.output == "json":
        session.say(json.dumps(clusters))
        return 0
    if not clusters:
        session.say("No existing clusters.")
        return 0
    session.say("Clusters")
    header = ["NAME", "INFRA", "RESOURCES", "STATUS", "AUTOSTOP", "LAUNCHED"]
    body = [
        [c["name"], c["infra"], c["resources_str"], c["status"], "-", "a few secs ago"]
        for c in clusters
    ]
    session.say(*render.table(header, body))
    return 0


def _request_status(request: dict[str, Any], state: dict[str, Any]) -> str:
    if request.get("cancelled"):
        return "CANCELLED"
    if request.get("failed"):
        return "FAILED"
    job = next((j for j in state["jobs"] if j["job_id"] == request.get("job_id")), None)
    if job is not None and job["visible_from_tick"] > state["tick"]:
        return "RUNNING"  # a delayed job: the launch request is still being processed
    return "SUCCEEDED"


def _select(state: dict[str, Any], prefixes: list[str], everyone: bool, user: str) -> list[Any]:
    out = []
    for request in state["requests"]:
        if prefixes and not any(request["request_id"].startswith(p) for p in prefixes):
            continue
        if not everyone and request["user_hash"] != user:
            continue
        out.append(request)
    return out


def api_status(session: Session, a: argparse.Namespace) -> int:
    session.begin("api.status")
    with session.transaction() as state:
        chosen = [
            (r, _request_status(r, state))
            for r in _select(state, a.request_ids, True, session.user)
        ]
    if not a.request_ids and not a.all_status:
        chosen = [(r, s) for r, s in chosen if s in ACTIVE]
    records = [
        {
            "request_id": r["request_id"],
            "name": r["name"],
            "status": s,
            "created_at": r["created_at"],
            "user_name": r["user_name"],
            "user_id": r["user_hash"],
            "return_value": "null",  # the CLI never sees the launch result (§2.4)
        }
        for r, s in chosen
    ]
    if a.output == "json":
        session.say(json.dumps(records))
        return 0
    header = ["ID", "USER", "NAME", "CREATED", "STATUS"]
    body = [
        [x["request_id"], x["user_name"], x["name"], "a few secs ago", x["status"]] for x in records
    ]
    session.say(*render.table(header, body))
    return 0


def _drop_unstarted_controller(state: dict[str, Any], owner: str) -> None:
    """A controller that only a cancelled launch would have started never comes up."""
    record = state["controllers"].get(owner)
    live = [j for j in state["jobs"] if j["user_hash"] == owner and not j.get("withdrawn")]
    if record is not None and record.get("up_from_tick", 0) > state["tick"] and not live:
        del state["controllers"][owner]


def api_cancel(session: Session, a: argparse.Namespace) -> int:
    if not a.request_ids and not a.all:
        raise usage("sky api cancel", "[REQUEST_IDS]...", "Provide request IDs or use -a/--all.")
    session.begin("api.cancel")
    with session.transaction() as state:
        cancelled = []
        for request in _select(state, a.request_ids, a.all_users, session.user):
            if _request_status(request, state) not in ACTIVE:
                continue
            request["cancelled"] = True
            for job in state["jobs"]:
                if job["job_id"] == request["job_id"]:
                    job["withdrawn"] = True  # the launch never completes: no job appears
            _drop_unstarted_controller(state, request["user_hash"])
            cancelled.append(request["request_id"])
    session.accepted()
    if not cancelled:
        session.say("No requests need to be cancelled.")
    else:
        plural = "s" if len(cancelled) > 1 else ""
        session.say(f"Cancelled {len(cancelled)} request{plural}: {', '.join(cancelled)}")
    return 0


def api_logs(session: Session, a: argparse.Namespace) -> int:
    """``sky api logs ID``: a finished request's log; a failed one ends with its error."""
    session.begin("api.logs")
    with session.transaction() as state:
        found = [r for r in state["requests"] if r["request_id"].startswith(a.request_id)]
    if len(found) != 1:
        raise Exit(1, f"ValueError: Request {a.request_id!r} not found.")
    request = found[0]
    session.say(f"Request {request['request_id']} ({request['name']})")
    if request.get("failed"):
        session.say(str(request["failed"]))
        return 1
    return 0
