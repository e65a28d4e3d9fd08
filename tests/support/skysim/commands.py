"""``sky jobs launch|queue|cancel|logs`` (skypilot-0.12.md §2-§4)."""

from __future__ import annotations

import json
import os
import time

from . import faults, jobs, kubepods, render, store
from .session import Exit, Session, cluster_not_up, controller_record, sha256, usage

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["cancel", "controller_up", "controllers_up", "launch", "logs", "queue", "visible_jobs"]

# Exit codes of a synchronous launch without -d (§2.3).
RESULT_CODES = {"SUCCEEDED": 0, "CANCELLED": 103}
RED, RESET = "\x1b[31m", "\x1b[0m"  # colorama's Fore.RED and Style.RESET_ALL
FAILED_CODE = 100
NOT_FINISHED_CODE = 101


def controllers_up(state: store.State) -> set[str]:
    """Owners whose controller is up now; a controller started by an in-flight launch is not."""
    return {u for u, c in state["controllers"].items() if c.get("up_from_tick", 0) <= state["tick"]}


def controller_up(state: store.State, user: str, all_users: bool) -> bool:
    up = controllers_up(state)
    return bool(up) if all_users else user in up


def visible_jobs(state: store.State, tick: int) -> list[jobs.Job]:
    """Jobs the server has recorded: not withdrawn, and past any delayed appearance."""
    return [j for j in state["jobs"] if j["visible_from_tick"] <= tick and not j.get("withdrawn")]


# -- launch --------------------------------------------------------------------
def _pairs(session: Session, values: list[str], flag: str, prog: str) -> dict[str, tuple[str, str]]:
    """``--env/--secret K=V|K``: a bare ``K`` is read from the local environment (§2.1)."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if sep:
            out[key] = ("argv", value)
        elif key in session.env:
            out[key] = ("env", session.env[key])
        else:
            raise usage(
                prog,
                "ENTRYPOINT...",
                f"Invalid value for '{flag}': {key} is not set in local environment and no "
                "value is provided.",
            )
    return out


def _timelines(session: Session, count: int) -> tuple[list[list[str]], dict[str, Any]]:
    rule = session.rule("timeline") or {}
    default = [s for s in session.env.get("SKYSIM_TIMELINE", "").split(",") if s]
    statuses = [str(s) for s in rule.get("statuses") or default or jobs.DEFAULT_TIMELINE]
    per_task = rule.get("tasks") or []
    out = [[str(s) for s in per_task[i]] if i < len(per_task) else statuses for i in range(count)]
    return out, rule


def _create(session: Session, state: store.State, spec: dict[str, Any]) -> jobs.Job:
    timelines, rule = _timelines(session, len(spec["tasks"]))
    delay = session.rule("delay_appearance")
    visible = state["tick"] + (int(delay.get("queue_calls", 1)) if delay else 0)
    # The first launch brings the controller up, once its request completes.
    record = controller_record(session.env, spec["infra"], up_from_tick=visible)
    state["controllers"].setdefault(session.user, record)
    # ``as_user``: another operator's job, submitted through the same API server, so it
    # runs on the caller's controller (skypilot-0.12.md §5.1: the server's id names it)
    other = session.rule("as_user") or {}
    job: jobs.Job = {
        "job_id": state["next_job_id"],
        "controller_job_id": state["next_controller_job_id"],
        "name": spec["name"],
        "user_hash": str(other.get("user_hash") or session.user),
        "user_name": str(other.get("user_name") or store.user_name(session.env)),
        "controller": session.user,
        "execution": spec["execution"],
        "tasks": [{**t, "timeline": tl} for t, tl in zip(spec["tasks"], timelines, strict=True)],
        "submitted_at": store.now(session.env),
        "start_tick": visible,
        "visible_from_tick": visible,
        "clock": rule.get("clock", "calls"),
        "interval": float(rule.get("interval", 1.0)),
        "cancel": None,
        "infra": spec["infra"],
        "entrypoint": spec["entrypoint"],
        "failure_reason": rule.get("failure_reason"),
        "secrets": {
            k: {"source": src, "sha256": sha256(v)} for k, (src, v) in spec["secrets"].items()
        },
        "env_names": sorted(spec["envs"]),
    }
    state["next_job_id"] += 1
    state["next_controller_job_id"] += 1
    state["jobs"].append(job)
    return job


def _run_to_end(job: jobs.Job, tick: int, now: float) -> str:
    """A synchronous launch without -d follows the job: jump its timeline to the end."""
    bound = sum(len(t["timeline"]) for t in job["tasks"]) + 1
    for step in range(bound):
        job["start_tick"] = tick - step
        status = jobs.job_status(job, tick, now)
        if status in jobs.TERMINAL:
            return status
    return jobs.job_status(job, tick, now)


def _create_pods(session: Session, job: jobs.Job, image: str | None) -> None:
    """One pod per task through the Kubernetes API double; recorded on the job (``kubepods``)."""
    names = [jobs.cluster_name_on_cloud(job, i) for i in range(len(job["tasks"]))]
    records = kubepods.create_pods(
        session.env, job, names, image_override=image, rule=session.rule("pod_state")
    )
    with session.transaction() as state:
        for stored in state["jobs"]:
            if stored["job_id"] == job["job_id"]:
                stored["pods"] = records


def launch(session: Session, a: argparse.Namespace) -> int:
    prog = "sky jobs launch"
    entry = " ".join(a.entrypoint)
    if not entry:
        raise usage(prog, "ENTRYPOINT...", "Missing argument 'ENTRYPOINT...'.")
    secrets = _pairs(session, a.secret, "--secret", prog)
    envs = _pairs(session, a.env, "--env", prog)
    is_yaml = os.path.isfile(entry)
    if not is_yaml and entry.endswith((".yaml", ".yml")):
        raise Exit(1, f"FileNotFoundError: [Errno 2] No such file or directory: {entry!r}")
    name, execution, tasks = jobs.read_tasks(entry, a.name)
    session.say(f"YAML to run: {entry}" if is_yaml else f"Command to run: {entry}")
    if not a.yes:
        session.confirm(f"Launching a managed job {name!r}. Proceed?")
    session.begin("jobs.launch")
    spec = {
        "name": name,
        "execution": execution,
        "tasks": tasks,
        "infra": a.infra,
        "entrypoint": entry,
        "secrets": secrets,
        "envs": envs,
    }
    import uuid

    request_id = str(uuid.uuid4())
    failing = session.rule("request_fails") if a.async_call else None
    if failing is not None:  # the server accepts the request, then it fails without a job
        with session.transaction() as state:
            state["requests"].append(
                {
                    "request_id": request_id,
                    "name": "sky.jobs.launch",
                    "job_id": None,
                    "user_hash": session.user,
                    "user_name": store.user_name(session.env),
                    "created_at": store.now(session.env),
                    "cancelled": False,
                    "failed": faults.error_text(failing, port=session.port, command="jobs.launch"),
                }
            )
        session.say(*render.async_block(request_id, session.port))
        return 0
    with session.transaction() as state:
        job = _create(session, state, spec)
        final = None
        if not a.async_call and not a.detach_run:
            final = _run_to_end(job, state["tick"], store.now(session.env))
        if a.async_call:
            state["requests"].append(
                {
                    "request_id": request_id,
                    "name": "sky.jobs.launch",
                    "job_id": job["job_id"],
                    "user_hash": session.user,
                    "user_name": store.user_name(session.env),
                    "created_at": store.now(session.env),
                    "cancelled": False,
                }
            )
    if kubepods.enabled(session.env):  # the job's pods exist once the server has it (§12)
        _create_pods(session, job, a.image_id)
    session.accepted()
    if a.async_call:
        session.say(*render.async_block(request_id, session.port))
        return 0
    session.say(
        f"Launching managed job {name!r} from jobs controller...",
        f"⚙︎ Job submitted, ID: {job['controller_job_id']}",
    )
    code = 0
    if final is not None:  # without -d the command tails the job and exits with its result
        for task in job["tasks"]:
            session.say(f"({task['task_name']}, pid={1000 + job['job_id']}) simulated output")
        session.say(f"✓ Managed job finished: {job['job_id']} (status: {final}).")
        default = FAILED_CODE if final.startswith("FAILED") else NOT_FINISHED_CODE
        code = RESULT_CODES.get(final, default)
    session.say(*render.hint_block(job["job_id"]))
    return code


# -- queue ---------------------------------------------------------------------
def queue(session: Session, a: argparse.Namespace) -> int:
    session.begin("jobs.queue")
    fields = set(jobs.DEFAULT_FIELDS)
    if a.verbose:
        fields |= jobs.VERBOSE_FIELDS
    if a.all_users:
        fields |= {"user_name", "user_hash"} if a.verbose else {"user_name"}
    now = store.now(session.env)
    with session.transaction() as state:
        tick = state["tick"]
        up = controller_up(state, session.user, a.all_users)
        state["tick"] += 1  # each queue call advances the simulated clock by one step
        hidden = _partially_hidden(session, state, a, tick, now)
        selected = [
            j
            for j in visible_jobs(state, tick)
            if (a.all_users or j["user_hash"] == session.user or hidden is not None)
            and (not a.job_ids or j["job_id"] in a.job_ids)
            and j["job_id"] not in (hidden or ())
        ]
    if not up:  # §3.3, as recorded from 0.12.2
        if a.output == "json":
            raise cluster_not_up()
        session.say(
            "Fetching managed job statuses...",
            "Managed jobs",
            "No in-progress managed jobs. (See: sky jobs -h)",
        )
        return 0
    rows: list[dict[str, Any]] = []
    kept = 0
    for job in sorted(selected, key=lambda j: -j["job_id"]):
        statuses = jobs.task_statuses(job, tick, now)
        if a.skip_finished and all(s in jobs.TERMINAL for s in statuses):
            continue
        if not a.all and kept >= a.limit:
            break
        kept += 1
        step = jobs.step(job, tick, now)
        rows += [jobs.row(job, i, s, step, now, frozenset(fields)) for i, s in enumerate(statuses)]
    if a.output == "json":
        session.say(json.dumps(rows))
        return 0
    session.say("Fetching managed job statuses...", "Managed jobs")
    if not rows:
        session.say("No in-progress managed jobs.")
        return 0
    active = [r["status"] for r in rows if r["status"] not in jobs.TERMINAL]
    counts = ", ".join(f"{active.count(s)} {s}" for s in dict.fromkeys(active))
    session.say(f"In progress tasks: {counts or 'None'}")
    session.say(*render.job_table(rows, all_users=a.all_users, verbose=a.verbose))
    return 0


def _partially_hidden(
    session: Session, state: store.State, a: argparse.Namespace, tick: int, now: float
) -> set[int] | None:
    """A ``partial`` rule: the caller's job ids this answer leaves out, or None (no rule).

    A partial answer lists every user's jobs but omits the caller's own (those
    named in ``names``, else all of them; only while in ``status`` when given),
    for at most ``times`` answers (``verbose``: only ``-v`` reads count).
    """
    rule = session.rule("partial")
    if rule is None or (rule.get("verbose") and not a.verbose):
        return None
    key = json.dumps(rule, sort_keys=True)
    served = state.setdefault("partial_answers", {})
    if "times" in rule and served.get(key, 0) >= int(rule["times"]):
        return None
    names, status = rule.get("names"), rule.get("status")
    hidden = {
        j["job_id"]
        for j in visible_jobs(state, tick)
        if j["user_hash"] == session.user
        and (names is None or j["name"] in names)
        and (status is None or jobs.job_status(j, tick, now) == status)
    }
    if not hidden:
        return None
    served[key] = served.get(key, 0) + 1
    return hidden


# -- cancel --------------------------------------------------------------------
def _selector_error(a: argparse.Namespace) -> Exit | None:
    chosen = [bool(a.job_ids), a.name is not None, a.pool is not None, a.all or a.all_users]
    if sum(chosen) == 1:
        return None
    arguments = [f"--job-ids {','.join(map(str, a.job_ids))}"] if a.job_ids else []
    arguments += [f"--name {a.name}"] if a.name is not None else []
    arguments += [f"--pool {a.pool}"] if a.pool is not None else []
    arguments += ["--all"] if a.all else []
    arguments += ["--all-users"] if a.all_users else []
    return usage(
        "sky jobs cancel",
        "[JOB_IDS]...",
        "Can only specify one of JOB_IDS, --name, --pool, or --all/--all-users. "
        f"Provided {' '.join(arguments)!r}.",
    )


def _cancel_delay(session: Session) -> tuple[int, float | None]:
    rule = session.rule("slow_cancel") or {}
    delay = int(rule.get("delay", session.env.get("SKYSIM_CANCEL_DELAY") or 1))
    seconds = rule.get("delay_seconds")
    return delay, None if seconds is None else float(seconds)


def cancel(session: Session, a: argparse.Namespace) -> int:
    error = _selector_error(a)
    if error is not None:
        raise error
    if not a.yes:
        what = (
            f"with IDs {', '.join(map(str, a.job_ids))}"
            if a.job_ids
            else f"with name {a.name!r}"
            if a.name is not None
            else "all"
        )
        session.confirm(f"Cancelling managed job(s) {what}. Proceed?")
    session.begin("jobs.cancel")
    now = store.now(session.env)
    delay, delay_seconds = _cancel_delay(session)
    with session.transaction() as state:
        if not controller_up(state, session.user, a.all_users):
            raise cluster_not_up()
        tick = state["tick"]
        every = [
            j
            for j in visible_jobs(state, tick)
            if jobs.job_status(j, tick, now) not in jobs.TERMINAL
        ]
        live = [j for j in every if a.all_users or j["user_hash"] == session.user]
        duplicates: list[int] = []
        if a.name is not None:
            # §4.2: the name is looked up among every user's live jobs; several of them
            # print their ids (newest first) and exit 0 cancelling nothing
            named = [j for j in every if j["name"] == a.name]
            duplicates = (
                sorted((j["job_id"] for j in named), reverse=True) if len(named) > 1 else []
            )
            targets = [] if duplicates else named
        elif a.pool is not None:
            targets = []
        elif a.job_ids:
            targets = [j for j in live if j["job_id"] in a.job_ids]
        else:
            targets = live
        for job in targets:
            if not job.get("cancel"):  # a second cancel does not restart CANCELLING
                job["cancel"] = {
                    "tick": tick,
                    "now": now,
                    "delay": delay,
                    "delay_seconds": delay_seconds,
                    "immediate": jobs.job_status(job, tick, now) == "PENDING",
                }
    session.accepted()
    ids = sorted(j["job_id"] for j in targets)
    if duplicates:
        session.say(
            f"{RED}Multiple running jobs found with name {a.name!r}.\n"
            f"Job IDs: [{', '.join(map(str, duplicates))}]{RESET}"
        )
    elif a.name is not None and not ids:
        session.say(f"No running job found with name {a.name!r}.")
    elif not ids:
        session.say("No job to cancel.")
    elif a.name is not None:
        session.say(f"'{a.name}' Job with ID {ids[0]} is scheduled to be cancelled.")
    elif len(ids) == 1:
        session.say(f"Job with ID {ids[0]} is scheduled to be cancelled.")
    else:
        session.say(f"Jobs with IDs {', '.join(map(str, ids))} are scheduled to be cancelled.")
    return 0


# -- logs ----------------------------------------------------------------------
def logs(session: Session, a: argparse.Namespace) -> int:
    session.begin("jobs.logs")
    now = store.now(session.env)
    with session.transaction() as state:
        if not controller_up(state, session.user, False):
            raise cluster_not_up()
        tick = state["tick"]
        mine = [j for j in visible_jobs(state, tick) if j["user_hash"] == session.user]
        if a.job_id is not None:
            mine = [j for j in mine if j["job_id"] == a.job_id]
        elif a.name is not None:
            mine = [j for j in mine if j["name"] == a.name]
        if not mine:
            wanted = a.job_id if a.job_id is not None else a.name
            raise Exit(1, f"ValueError: No managed job found: {wanted}.")
        job = max(mine, key=lambda j: j["job_id"])
        status = jobs.job_status(job, tick, now)
    if a.controller:
        session.say(
            f"Started monitoring managed job {job['job_id']} ({job['name']}).",
            f"Managed job {job['job_id']} status: {status}",
        )
        return 0
    for task in job["tasks"]:
        session.say(f"({task['task_name']}, pid={1000 + job['job_id']}) simulated output")
    if not a.follow:
        # --no-follow: the log so far; 0.12.2 exits 0 (tail_logs returns None without follow)
        if status in jobs.TERMINAL:
            session.say(f"✓ Managed job finished: {job['job_id']} (status: {status}).")
        return 0
    # --follow (the default): the stream stays open until the job ends, then the command exits
    # with the job's sky.exceptions.JobExitCode. A `hang` rule with after_accept holds it open
    # here, after the lines above were flushed, while the job is still running.
    session.accepted()
    status = _follow_to_end(session, job["job_id"])
    if status in jobs.TERMINAL:
        session.say(f"✓ Managed job finished: {job['job_id']} (status: {status}).")
    return _job_exit_code(status)


def _follow_to_end(session: Session, job_id: int) -> str:
    """Re-read the job until it is terminal, at most ``$SKYSIM_FOLLOW_SECONDS`` (default 10):
    past that the simulator stops where 0.12.2 would keep waiting (exit NOT_FINISHED)."""
    deadline = time.time() + float(session.env.get("SKYSIM_FOLLOW_SECONDS", "10"))
    while True:
        with session.transaction() as state:
            found = [j for j in state["jobs"] if j["job_id"] == job_id]
            status = (
                jobs.job_status(found[0], state["tick"], store.now(session.env))
                if found
                else "FAILED"
            )
        if status in jobs.TERMINAL or time.time() >= deadline:
            return status
        time.sleep(0.05)


def _job_exit_code(status: str) -> int:
    """0.12.2's JobExitCode: SUCCEEDED 0, FAILED* 100, not finished 101, CANCELLED 103."""
    if status == "SUCCEEDED":
        return 0
    if status == "CANCELLED":
        return 103
    return 100 if status in jobs.TERMINAL else 101
