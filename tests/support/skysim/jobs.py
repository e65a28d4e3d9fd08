"""Managed jobs: tasks read from YAML, scripted status timelines, queue rows (§2.5, §3.2, §4).

A job record in the state file::

    {"job_id", "controller_job_id", "name", "user_hash", "user_name",
     "controller",  # the user hash whose controller runs it (the submitter's, or ``as_user``)
     "execution": "single" | "serial" | "parallel",
     "tasks": [{"task_name", "resources", "accelerators", "image", "metadata",
                "timeline": [...]}],
     "submitted_at", "start_tick", "visible_from_tick", "clock", "interval",
     "cancel": null | {"tick", "now", "delay", "delay_seconds", "immediate"},
     "infra", "entrypoint", "failure_reason", "secrets": {NAME: {source, sha256}},
     "pods": [{"task_id", "name", "namespace", "uid" | "error"}]}  # with $SKYSIM_KUBE_URL

Statuses are a pure function of the record, the tick and the wall clock, so a
queue answer never depends on who asked before.
"""

from __future__ import annotations

import os

from . import taskfile

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

    Job = dict[str, Any]

__all__ = [
    "DEFAULT_FIELDS",
    "FIELDS",
    "TERMINAL",
    "VERBOSE_FIELDS",
    "cluster_name_on_cloud",
    "controller_of",
    "job_status",
    "read_tasks",
    "row",
    "step",
    "task_statuses",
]


TERMINAL = frozenset(
    {
        "SUCCEEDED",
        "CANCELLED",
        "FAILED",
        "FAILED_SETUP",
        "FAILED_PRECHECKS",
        "FAILED_NO_RESOURCE",
        "FAILED_CONTROLLER",
    }
)
DEFAULT_TIMELINE = ("PENDING", "STARTING", "RUNNING")
FAILURE_REASONS = {
    "FAILED": "Job failed with return code list: [1]",
    "FAILED_SETUP": "Setup failed with return code list: [1]",
    "FAILED_PRECHECKS": (
        "Failed to provision: the Kubernetes cluster does not contain any instances "
        "satisfying the request"
    ),
    "FAILED_NO_RESOURCE": "Failed to provision all possible launchable resources.",
    "FAILED_CONTROLLER": "Unexpected error in the jobs controller.",
}
SCHEDULE_STATES = {
    "PENDING": "WAITING",
    "STARTING": "LAUNCHING",
    "CANCELLING": "ALIVE",
}

# §3.2: every key, in SkyPilot's order; keys not requested are null.
FIELDS = [
    "task_job_id",
    "job_id",
    "task_id",
    "job_name",
    "task_name",
    "job_duration",
    "workspace",
    "status",
    "schedule_state",
    "resources",
    "cluster_resources",
    "cluster_resources_full",
    "cloud",
    "region",
    "zone",
    "infra",
    "recovery_count",
    "details",
    "failure_reason",
    "user_name",
    "user_hash",
    "submitted_at",
    "start_at",
    "end_at",
    "user_yaml",
    "entrypoint",
    "metadata",
    "controller_pid",
    "controller_pid_started_at",
    "dag_yaml_path",
    "env_file_path",
    "last_recovered_at",
    "run_timestamp",
    "priority",
    "priority_class",
    "original_user_yaml_path",
    "pool",
    "pool_hash",
    "current_cluster_name",
    "cluster_name_on_cloud",
    "job_id_on_pool_cluster",
    "accelerators",
    "labels",
    "links",
    "node_names",
    "execution",
    "is_job_group",
    "is_primary_in_job_group",
    "is_batch",
    "batch_total_batches",
    "batch_completed_batches",
    "internal_external_ips",
    "internal_services",
]
DEFAULT_FIELDS = frozenset(
    [
        "job_id",
        "task_id",
        "workspace",
        "job_name",
        "task_name",
        "resources",
        "submitted_at",
        "end_at",
        "job_duration",
        "recovery_count",
        "status",
        "pool",
    ]
)
VERBOSE_FIELDS = frozenset(
    [
        "start_at",
        "failure_reason",
        "details",
        "schedule_state",
        "infra",
        "cloud",
        "region",
        "zone",
        "cluster_resources",
        "current_cluster_name",
        "metadata",
    ]
)


def _resources(doc: dict[str, Any]) -> tuple[str, str | None]:
    res = doc.get("resources")
    res = res if isinstance(res, dict) else {}
    nodes = doc.get("num_nodes") or 1
    acc = res.get("accelerators")
    if acc:
        return f"{nodes}x[{acc}]", str(acc)
    return f"{nodes}x[CPU:{res.get('cpus') or '1+'}]", None


def read_tasks(entrypoint: str, name: str | None) -> tuple[str, str, list[dict[str, Any]]]:
    """The job name, execution mode and tasks of a YAML file or an inline command.

    A multi-document file whose first document holds only ``name``/``execution``
    is a pipeline header (serial by default; ``parallel`` makes a JobGroup).
    """
    docs: list[dict[str, Any]]
    header: dict[str, Any] = {}
    if os.path.isfile(entrypoint):
        with open(entrypoint, encoding="utf-8") as handle:
            docs = taskfile.read_documents(handle.read())
        if len(docs) > 1 and set(docs[0]) <= {"name", "execution"}:
            header, docs = docs[0], docs[1:]
        docs = docs or [{}]
    else:
        docs = [{"run": entrypoint}]
    job_name = name or header.get("name") or docs[0].get("name") or f"sky-{os.urandom(2).hex()}"
    if len(docs) == 1:
        execution = "single"
    else:
        execution = "parallel" if header.get("execution") == "parallel" else "serial"
    tasks = []
    for i, doc in enumerate(docs):
        resources, accelerators = _resources(doc)
        task_name = doc.get("name") or (job_name if len(docs) == 1 else f"task-{i}")
        res = doc.get("resources")
        image = res.get("image_id") if isinstance(res, dict) else None
        metadata = doc.get("_metadata")
        tasks.append(
            {
                "task_name": str(task_name),
                "resources": resources,
                "accelerators": accelerators,
                "image": image or None,
                # the task's ``_metadata``, shown by ``jobs queue -v`` (skypilot-0.12.md §3.2)
                "metadata": dict(metadata) if isinstance(metadata, dict) else {},
            }
        )
    return str(job_name), execution, tasks


def step(job: Job, tick: int, now: float) -> int:
    if job.get("clock") == "seconds":
        return max(0, int((now - job["submitted_at"]) / float(job.get("interval") or 1.0)))
    return max(0, tick - int(job["start_tick"]))


def _at(timeline: list[str], index: int) -> str:
    return timeline[min(index, len(timeline) - 1)]


def _scripted(job: Job, tick: int, now: float) -> list[str]:
    """Each task's status from its timeline alone, ignoring cancellation."""
    current = step(job, tick, now)
    tasks = job["tasks"]
    if job["execution"] != "serial":
        return [_at(t["timeline"], current) for t in tasks]
    # A serial pipeline starts each task when the previous one succeeds (§2.5).
    out: list[str] = []
    offset = 0
    blocked: str | None = None
    for task in tasks:
        if blocked is not None:
            out.append(blocked)
            continue
        timeline = task["timeline"]
        status = _at(timeline, current - offset) if current >= offset else "PENDING"
        out.append(status)
        if status == "SUCCEEDED":
            offset += timeline.index("SUCCEEDED")
        elif status in TERMINAL:
            blocked = "CANCELLED"  # later tasks of a failed pipeline never run
        else:
            blocked = "PENDING"
    return out


def task_statuses(job: Job, tick: int, now: float) -> list[str]:
    """Each task's status at ``tick``/``now``, cancellation included (§4.2)."""
    cancel = job.get("cancel")
    if not cancel:
        return _scripted(job, tick, now)
    frozen = _scripted(job, cancel["tick"], cancel["now"])
    if cancel.get("immediate"):
        done = True
    elif cancel.get("delay_seconds") is not None:
        done = now - cancel["now"] >= float(cancel["delay_seconds"])
    else:
        done = tick - cancel["tick"] >= int(cancel.get("delay", 1))
    out = []
    for status in frozen:
        if status in TERMINAL:
            out.append(status)
        elif status == "PENDING" or done:
            out.append("CANCELLED")
        else:
            out.append("CANCELLING")
    return out


def job_status(job: Job, tick: int, now: float) -> str:
    """One status per job: the first non-terminal task's, else the first failure, else the last."""
    statuses = task_statuses(job, tick, now)
    for status in statuses:
        if status not in TERMINAL:
            return status
    failed = [s for s in statuses if s != "SUCCEEDED"]
    return failed[0] if failed else statuses[-1]


def controller_of(job: Job) -> str:
    """The user hash whose controller runs the job (older records: the submitter's)."""
    return str(job.get("controller") or job["user_hash"])


def _infra(job: Job) -> tuple[str, str, str | None]:
    infra = job.get("infra") or "k8s"
    _cloud, _, region = infra.partition("/")
    label = f"Kubernetes/{region}" if region else "Kubernetes"
    return label, "Kubernetes", region or None


def cluster_name_on_cloud(job: Job, task_index: int) -> str:
    """``<task>-<id>-<user hash>``: the pods' ``skypilot-cluster-name`` (kubernetes.md §6.1)."""
    return f"{job['tasks'][task_index]['task_name']}-{job['job_id']}-{job['user_hash']}"


def row(
    job: Job, task_index: int, status: str, step: int, now: float, fields: frozenset[str]
) -> dict[str, Any]:
    """One ``sky jobs queue -o json`` record; keys outside ``fields`` are null (§3.2)."""
    task = job["tasks"][task_index]
    timeline = task["timeline"]
    submitted = float(job["submitted_at"])
    started = status not in ("PENDING",)
    ended = status in TERMINAL
    infra, cloud, region = _infra(job)
    cluster = f"{task['task_name']}-{job['job_id']}"
    full: dict[str, Any] = {
        "task_job_id": job["job_id"],
        "job_id": job["job_id"],
        "task_id": task_index,
        "job_name": job["name"],
        "task_name": task["task_name"],
        "job_duration": float(max(0, step - 1)) if started else 0.0,
        "workspace": "default",
        "status": status,
        "schedule_state": "DONE" if ended else SCHEDULE_STATES.get(status, "ALIVE"),
        "resources": task["resources"],
        "cluster_resources": f"1x({task['accelerators'] or 'cpus=2, mem=8'})" if started else "-",
        "cloud": cloud,
        "region": region,
        "zone": None,
        "infra": infra,
        "recovery_count": timeline[: min(step, len(timeline) - 1) + 1].count("RECOVERING"),
        "details": None,
        "failure_reason": (job.get("failure_reason") or FAILURE_REASONS.get(status))
        if status.startswith("FAILED")
        else None,
        "user_name": job["user_name"],
        "user_hash": job["user_hash"],
        "submitted_at": submitted,
        "start_at": submitted + 1.0 if started else None,
        "end_at": submitted + float(step) if ended else None,
        "metadata": dict(task.get("metadata") or {}),
        "current_cluster_name": cluster if started and not ended else None,
        "cluster_name_on_cloud": cluster_name_on_cloud(job, task_index) if started else None,
        "pool": None,
        "execution": job["execution"],
        "accelerators": task["accelerators"],
    }
    return {key: (full.get(key) if key in fields else None) for key in FIELDS}
