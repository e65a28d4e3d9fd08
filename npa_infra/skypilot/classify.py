"""Pure readers of ``sky`` output: ANSI stripping, error classification, parsers.

One classifier maps a finished command to an ``ErrorKind`` (style.md rule 8);
the parsers turn the recorded output forms of skypilot-0.12.md into typed
results and fail closed: output they cannot prove is *unavailable*, never
empty. Every function here is pure and tested against recorded text.
"""

from __future__ import annotations

import json
import re

from npa_infra.runs import ownership
from npa_infra.skypilot.models import (
    ApiRequest,
    ApiStatusResult,
    CancelResult,
    CommandResult,
    DownOutcome,
    DownResult,
    ErrorKind,
    JobStatus,
    LaunchResult,
    QueueRecord,
    QueueResult,
    QueueVerdict,
)

__all__ = [
    "CLUSTER_NOT_UP_LINE",
    "classify",
    "parse_api_status",
    "parse_cancel",
    "parse_down",
    "parse_launch",
    "parse_queue",
    "parse_version",
    "strip_ansi",
]

# ECMA-48 control sequences (CSI, with private and intermediate bytes), OSC strings ended by
# BEL or ST (terminal titles, hyperlinks), and the other escapes (charset choices, ESC 7)
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")
CLUSTER_NOT_UP_LINE = "sky.exceptions.ClusterNotUpError: No in-progress managed jobs."
# Lines the auto-started local API server prints on stdout, even with -o json (§1).
_BANNER = (
    re.compile(r"^Failed to connect to SkyPilot API server at \S+\. Starting a local server\.$"),
    re.compile(r"^\W*SkyPilot API server started\.?$"),
)
_REQUEST = re.compile(r"Submitted sky\.jobs\.launch request: ([0-9a-f-]{36})")
_VERSION = re.compile(r"\b(\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d+)?)\b")
_ONE = re.compile(r"(?:'[^']*' )?Job with ID ([0-9]{1,18}) is scheduled to be cancelled\.")
_MANY = re.compile(r"Jobs with IDs ([0-9]{1,18}(?:, [0-9]{1,18})*) are scheduled to be cancelled\.")
_NO_JOB = re.compile(r"^(No job to cancel\.|No running job found with name '.*'\.)$", re.MULTILINE)

# Order matters: the first matching rule wins.
_RULES: tuple[tuple[ErrorKind, re.Pattern[str]], ...] = (
    (ErrorKind.CLUSTER_NOT_UP, re.compile(r"ClusterNotUpError")),
    (
        ErrorKind.API_WARMUP,
        re.compile(
            r"Could not connect to SkyPilot API server|ApiServerConnectionError|"
            r"SkyPilot API server is (starting|not healthy)|Failed to start SkyPilot API server|"
            r"Failed to connect to SkyPilot API server(?!.*Starting a local server)",
            re.I,
        ),
    ),
    (ErrorKind.RATE_LIMIT, re.compile(r"\b429\b|Too Many Requests|rate limit", re.I)),
    (
        ErrorKind.SERVER,
        re.compile(
            r"\b50[0-4]\b|Internal Server Error|Bad Gateway|Service Unavailable|"
            r"Gateway Time-?out",
            re.I,
        ),
    ),
    (
        ErrorKind.TRANSPORT,
        re.compile(
            r"Connection (reset|aborted|refused)|RemoteDisconnected|ConnectionError|ReadTimeout|"
            r"Read timed out|ProtocolError|BrokenPipe|IncompleteRead|unexpected EOF|"
            r"TLS handshake timeout|Temporary failure in name resolution|No route to host|"
            r"Network is unreachable|i/o timeout|dial tcp|server closed idle connection",
            re.I,
        ),
    ),
    (
        ErrorKind.CONTEXT,
        re.compile(
            r"context .* (not found|does not exist)|Invalid kube ?config context|"
            r"not in allowed_contexts|allowed_contexts",
            re.I,
        ),
    ),
    (
        ErrorKind.RBAC,
        re.compile(r"\b403\b|Forbidden|cannot (get|list|create|delete) resource", re.I),
    ),
    (
        ErrorKind.AUTH,
        re.compile(
            r"\b401\b|Unauthorized|Unauthenticated|PermissionDenied|"
            r"certificate verify failed|x509",
            re.I,
        ),
    ),
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colour, cursor moves, titles, links)."""
    return ANSI.sub("", text)


def _meaningful(stdout: str) -> str:
    """stdout without the benign local-server banner lines."""
    kept = [
        ln
        for ln in strip_ansi(stdout).splitlines()
        if not any(b.match(ln.strip()) for b in _BANNER)
    ]
    return "\n".join(kept).strip()


def classify(result: CommandResult) -> ErrorKind:
    """The kind of a finished command; NONE when it exited 0."""
    if result.timed_out:
        return ErrorKind.TIMEOUT
    if result.returncode == 0:
        return ErrorKind.NONE
    if result.returncode == 127:
        return ErrorKind.NOT_FOUND
    text = strip_ansi(result.stderr + "\n" + result.stdout)
    if result.returncode == 2 and ("Usage:" in text or "Error: " in text):
        return ErrorKind.USAGE
    if "Aborted!" in text:
        return ErrorKind.ABORTED
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    return ErrorKind.UNKNOWN


def _detail(result: CommandResult, limit: int = 1000) -> str:
    text = strip_ansi(result.stderr).strip() or _meaningful(result.stdout)
    return text[-limit:]


def parse_version(result: CommandResult) -> str | None:
    """The version in ``sky --version`` output, by regex, not whole-line comparison (§12)."""
    if result.returncode != 0:
        return None
    match = _VERSION.search(_meaningful(result.stdout))
    return match.group(1) if match else None


def _find_json_list(text: str) -> list[object] | None:
    """The one JSON document in ``text``: a list, or ``{"jobs": [...]}``.

    It starts a line and only whitespace follows it. Leading lines are tolerated
    (the local-server banner, §1); trailing text or a second JSON value is not,
    so such output stays unavailable instead of being guessed at
    (runtime-reference.md §1, queue parsing).
    """
    decoder = json.JSONDecoder()
    found: list[tuple[object, int]] = []
    covered = -1
    for match in re.finditer(r"^[ \t]*[\[{]", text, re.MULTILINE):
        start = match.end() - 1
        if start < covered:
            continue  # a line inside a document already decoded
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, (list, dict)):
            found.append((value, end))
            covered = end
    if len(found) != 1:
        return None
    value, end = found[0]
    if text[end:].strip():
        return None
    if isinstance(value, dict):
        jobs = value.get("jobs")
        return jobs if isinstance(jobs, list) and set(value) == {"jobs"} else None
    return value if isinstance(value, list) else None


def _record(raw: object) -> QueueRecord | None:
    if not isinstance(raw, dict):
        return None
    try:
        status = JobStatus(str(raw.get("status")))
        job_id = raw["job_id"]
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            return None
        task_id = raw.get("task_id") or 0
        return QueueRecord(
            job_id=job_id,
            task_id=int(task_id),
            job_name=str(raw.get("job_name") or ""),
            task_name=str(raw.get("task_name") or ""),
            status=status,
            submitted_at=_float(raw.get("submitted_at")),
            end_at=_float(raw.get("end_at")),
            failure_reason=_opt(raw.get("failure_reason")),
            cluster_name_on_cloud=_opt(raw.get("cluster_name_on_cloud")),
            user_hash=_opt(raw.get("user_hash")),
            user_name=_opt(raw.get("user_name")),
            launch_id=_launch_id(raw.get("metadata")),
        )
    except (KeyError, ValueError, TypeError, OverflowError):
        return None


def _launch_id(metadata: object) -> str | None:
    """The npa launch identity a task's ``metadata`` carries (runs.ownership), if any."""
    if isinstance(metadata, str):  # a JSON text, as SkyPilot stores it
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    value = metadata.get(ownership.STAMP_KEY) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)  # an int past float range raises OverflowError: the row is unreadable


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def parse_queue(result: CommandResult) -> QueueResult:
    """``sky jobs queue --all [-v] -o json``: records, verified empty, or unavailable (§3)."""
    kind = classify(result)
    if kind is ErrorKind.CLUSTER_NOT_UP:
        # Only exactly the recorded answer proves "no controller, no jobs" (§3.3).
        stderr_lines = [ln.strip() for ln in strip_ansi(result.stderr).splitlines() if ln.strip()]
        if (
            result.returncode == 1
            and stderr_lines == [CLUSTER_NOT_UP_LINE]
            and not _meaningful(result.stdout)
        ):
            return QueueResult(
                QueueVerdict.VERIFIED_EMPTY, (), ErrorKind.NONE, "no jobs controller"
            )
        return QueueResult(QueueVerdict.UNAVAILABLE, (), kind, _detail(result))
    if kind is not ErrorKind.NONE:
        return QueueResult(QueueVerdict.UNAVAILABLE, (), kind, _detail(result))
    if result.truncated:  # a part of an answer is never read as the whole of it
        return QueueResult(
            QueueVerdict.UNAVAILABLE, (), ErrorKind.UNKNOWN, "queue output too large to keep whole"
        )
    rows = _find_json_list(strip_ansi(result.stdout))
    if rows is None:
        return QueueResult(
            QueueVerdict.UNAVAILABLE, (), ErrorKind.UNKNOWN, "queue output holds no JSON list"
        )
    records = []
    for raw in rows:
        record = _record(raw)
        if record is None:
            return QueueResult(
                QueueVerdict.UNAVAILABLE,
                (),
                ErrorKind.UNKNOWN,
                f"unreadable queue row: {str(raw)[:200]}",
            )
        records.append(record)
    return QueueResult(QueueVerdict.RECORDS, tuple(records), ErrorKind.NONE, "")


def parse_launch(result: CommandResult) -> LaunchResult:
    """``sky jobs launch --async``: accepted with a request id, or a classified failure (§2.4)."""
    kind = classify(result)
    match = _REQUEST.search(strip_ansi(result.stdout))
    if kind is ErrorKind.NONE and match:
        return LaunchResult(True, match.group(1), ErrorKind.NONE, "", result)
    if kind is ErrorKind.NONE:
        # exit 0 without the acceptance block: not proof of anything
        return LaunchResult(
            False, None, ErrorKind.UNKNOWN, "launch exited 0 without a request id", result
        )
    return LaunchResult(False, match.group(1) if match else None, kind, _detail(result), result)


def parse_cancel(result: CommandResult) -> CancelResult:
    """``sky jobs cancel -y IDS``: the ids acknowledged, or a classified failure (§4.2)."""
    kind = classify(result)
    text = strip_ansi(result.stdout)
    if kind is not ErrorKind.NONE:
        return CancelResult((), False, kind, _detail(result), result)
    ids: set[int] = {int(m.group(1)) for m in _ONE.finditer(text)}
    for match in _MANY.finditer(text):
        ids.update(int(part) for part in match.group(1).replace(" ", "").split(",") if part)
    nothing = bool(_NO_JOB.search(text))
    if not ids and not nothing:
        return CancelResult((), False, ErrorKind.UNKNOWN, "cancel output not recognised", result)
    return CancelResult(tuple(sorted(ids)), nothing, ErrorKind.NONE, "", result)


def parse_down(result: CommandResult) -> DownResult:
    """``sky down sky-jobs-controller-<h>``: torn down, already absent, blocked, or failed (§5.4)."""
    text = strip_ansi(result.stdout + "\n" + result.stderr)
    if "In-progress managed jobs found" in text:
        return DownResult(DownOutcome.BLOCKED_IN_PROGRESS, ErrorKind.NONE, _detail(result), result)
    if result.returncode == 0 and "Managed jobs controller has already been torn down." in text:
        return DownResult(DownOutcome.ALREADY_ABSENT, ErrorKind.NONE, "", result)
    kind = classify(result)
    if kind is ErrorKind.NONE:
        return DownResult(DownOutcome.TORN_DOWN, kind, "", result)
    return DownResult(DownOutcome.FAILED, kind, _detail(result), result)


def parse_api_status(result: CommandResult) -> ApiStatusResult:
    """``sky api status [IDS] [-a] -o json``: request rows, or unreadable (§1, §2.4)."""
    kind = classify(result)
    if kind is not ErrorKind.NONE:
        return ApiStatusResult(False, (), kind, _detail(result))
    if result.truncated:
        return ApiStatusResult(False, (), ErrorKind.UNKNOWN, "api status output too large")
    rows = _find_json_list(strip_ansi(result.stdout))
    if rows is None:
        return ApiStatusResult(False, (), ErrorKind.UNKNOWN, "api status output holds no JSON list")
    requests = []
    for raw in rows:
        if not isinstance(raw, dict) or not all(
            isinstance(raw.get(k), str) for k in ("request_id", "name", "status")
        ):
            return ApiStatusResult(
                False, (), ErrorKind.UNKNOWN, f"unreadable request row: {str(raw)[:200]}"
            )
        requests.append(ApiRequest(raw["request_id"], raw["name"], raw["status"].upper()))
    return ApiStatusResult(True, tuple(requests))
