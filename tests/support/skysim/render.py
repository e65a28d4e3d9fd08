"""Fixed output blocks and tables of the 0.12 CLI (skypilot-0.12.md §2.2, §2.4, §3, §5.4)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BOLD", "RED", "RESET", "YELLOW", "async_block", "hint_block", "job_table", "table"]

BOLD = "\x1b[1m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
RESET = "\x1b[0m"
RESET_BOLD = "\x1b[22m"


def async_block(request_id: str, port: str) -> list[str]:
    """§2.4, exactly."""
    short = request_id[:8]
    return [
        f"Submitted sky.jobs.launch request: {request_id}",
        f"├── Check logs with: sky api logs {short}",
        f"├── Or, visit: http://127.0.0.1:{port}/api/stream?request_id={short}",
        f"└── To cancel the request, run: sky api cancel {short}",
    ]


def hint_block(job_id: int) -> list[str]:
    """The ``📋 Useful Commands`` block that follows a synchronous launch (§2.2)."""

    def cmd(text: str) -> str:
        return f"{BOLD}{text}{RESET_BOLD}"

    return [
        "",
        "📋 Useful Commands",
        f"Managed Job ID: {job_id}",
        f"├── To cancel the job:\t\t{cmd(f'sky jobs cancel {job_id}')}",
        f"├── To stream job logs:\t\t{cmd(f'sky jobs logs {job_id}')}",
        f"├── To stream controller logs:\t\t{cmd(f'sky jobs logs --controller {job_id}')}",
        f"├── To view all managed jobs:\t\t{cmd('sky jobs queue')}",
        f"└── To view managed job dashboard:\t\t{cmd('sky jobs dashboard')}",
    ]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [len(h) for h in header]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]


def _duration(seconds: float | None) -> str:
    if not seconds:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def job_table(rows: list[dict[str, Any]], *, all_users: bool, verbose: bool) -> list[str]:
    """The table mode of ``sky jobs queue`` (and the in-progress table of ``down``)."""
    header = ["ID", "TASK", "NAME"]
    if all_users:
        header.append("USER")
    header += ["REQUESTED", "SUBMITTED", "TOT. DURATION", "JOB DURATION", "#RECOVERIES", "STATUS"]
    if verbose:
        header += ["STARTED", "INFRA", "DETAILS", "FAILOVER"]
    body = []
    for r in rows:
        multi = sum(1 for x in rows if x["job_id"] == r["job_id"]) > 1
        line = [str(r["job_id"]), str(r["task_id"]) if multi else "-", str(r["job_name"])]
        if all_users:
            line.append(str(r.get("user_name") or "-"))
        line += [
            str(r["resources"]),
            "a few secs ago",
            _duration(r["job_duration"]),
            _duration(r["job_duration"]),
            str(r["recovery_count"]),
            str(r["status"]),
        ]
        if verbose:
            line += ["-" if r.get("start_at") is None else "a few secs ago"]
            line += [str(r.get("infra") or "-"), str(r.get("failure_reason") or "-"), "-"]
        body.append(line)
    return table(header, body)
