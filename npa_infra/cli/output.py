"""Printing for the CLI: data on stdout, messages on stderr, never a traceback.

``fail`` renders an ``NpaError``: with ``--json`` one JSON document on
stdout, otherwise ``Error: …`` and ``Hint: …`` on stderr (located spec
issues as readable blocks with the offending line and a caret).

A reader that goes away (``npa … | head -1``) is not an error: ``stdout_closed``
tells a closed stdout from any other broken pipe, and ``closed_pipe_exit`` ends
the command quietly with 141 (128 + SIGPIPE), the status a shell shows for
``cat`` in the same pipe, after pointing stdout at ``/dev/null`` so the
interpreter's last flush cannot fail again (the Python documentation's advice
for SIGPIPE).
"""

from __future__ import annotations

import errno
import json
import os
import select
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import typer

from npa_infra.errors import ConfigError, ExitCode, NpaError, SpecError, UsageError
from npa_infra.spec.issues import SpecIssue, format_issue, issue_json

__all__ = [
    "closed_pipe_exit",
    "emit_json",
    "environment_error",
    "fail",
    "finish",
    "flush_stdout",
    "out",
    "stdout_closed",
    "table",
    "warn",
    "warn_spec",
]


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def warn(text: str) -> None:
    sys.stderr.write(text + "\n")


def stdout_closed() -> bool:
    """True when nothing reads stdout any more: the read end of its pipe is closed.

    ``poll`` reports POLLERR on a pipe's write end once every reader is gone; a
    stdout that is no file (a test's capture) or still read is not closed.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(event & (select.POLLERR | select.POLLNVAL) for _, event in events)


def closed_pipe_exit() -> NoReturn:
    """End the command quietly because stdout's reader went away (exit 141, as ``cat``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass  # no file to redirect: nothing buffered can reach a closed pipe then
    raise SystemExit(ExitCode.CLOSED_PIPE)


def flush_stdout() -> None:
    """Flush stdout before exit; a reader gone by then ends the command as ``closed_pipe_exit``.

    Raises:
        SystemExit: 141 when stdout's reader went away.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        closed_pipe_exit()
    except (OSError, ValueError):
        pass  # a stdout already closed or replaced: nothing left to write


# what an OSError about a local file means, and what to do (the path is the exception's)
_ENVIRONMENT: dict[int, tuple[str, str]] = {
    errno.EACCES: ("permission denied", "make it writable by this user"),
    errno.EPERM: ("operation not permitted", "make it writable by this user"),
    errno.EROFS: ("the file system is read-only", "use a writable file system"),
    errno.ENOSPC: ("no space left on the device", "free space on its file system"),
    errno.EDQUOT: ("the disk quota is exhausted", "free space within the quota"),
}


def environment_error(exc: OSError) -> ConfigError | None:
    """An unwritable or full local path as the error it is (exit 1), naming path and cause;
    None for any other OSError (still an internal error: a bug or an unknown cause).

    A failed ``write`` names no file (only ``open`` and ``mkdir`` do): a full disk is then
    reported as the npa home's, where every file npa writes lives.
    """
    from npa_infra import config

    known = _ENVIRONMENT.get(exc.errno or 0)
    home = config.npa_home(os.environ)
    if known is None or not (exc.filename or exc.errno in (errno.ENOSPC, errno.EDQUOT)):
        return None
    why, fix = known
    code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    path = os.fsdecode(exc.filename) if exc.filename else str(home)
    where = path if exc.filename else f"under the npa home {path}"
    return ConfigError(
        f"cannot write {where}: {why} ({code})",
        remedy=f"{fix} ({path}), or point NPA_HOME (now {home}) at a writable directory "
        "with free space",
        details={"path": path, "errno": code},
    )


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")


class _Report(Protocol):
    @property
    def exit_code(self) -> int: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


_R = TypeVar("_R", bound=_Report)


def finish(report: _R, render: Callable[[_R], None], *, as_json: bool) -> NoReturn:
    """Print a command's report (its JSON under --json, else ``render``) and exit with its code."""
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        render(report)
    raise typer.Exit(report.exit_code)


def table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Text rows as left-aligned columns two spaces apart (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _lines(label: str) -> list[str] | None:
    try:
        path = Path(label)
        if path.is_file() and path.stat().st_size < 8 * 1024 * 1024:
            return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return None


def warn_spec(issues: list[SpecIssue], label: str, *, placeholder_bucket: bool) -> None:
    """Spec warnings (located) and the placeholder-bucket warning, on stderr."""
    lines = _lines(label) if issues else None
    for issue in issues:
        warn("warning: " + format_issue(issue, label, lines))
    if placeholder_bucket:
        warn("warning: config.bucket is a placeholder; pass --var bucket=<your bucket>")


def fail(exc: NpaError, *, as_json: bool, extra: dict[str, Any] | None = None) -> NoReturn:
    """Render an expected failure and exit with its code.

    A usage error never prints JSON, even under ``--json`` (cli.md §0); its
    exit code, 64, tells it apart from a verdict (issue 17). ``extra`` adds
    command-specific keys (``submit`` adds ``run_id`` and ``launch_transaction``).
    """
    if isinstance(exc, SpecError):
        if as_json:
            emit_json(
                {
                    "status": "invalid",
                    "errors": [issue_json(i) for i in exc.issues],
                    "warnings": [issue_json(i) for i in exc.warnings],
                }
            )
        else:
            lines = _lines(exc.source)
            for issue in exc.issues:
                warn(format_issue(issue, exc.source or "spec", lines))
                warn("")
            for issue in exc.warnings:  # issue 18: always shown, after the errors
                warn("warning: " + format_issue(issue, exc.source or "spec", lines))
                warn("")
            warn(f"Error: {len(exc.issues)} problem(s) found in {exc.source}")
            warn(f"Hint: {exc.remedy}")
        raise SystemExit(exc.exit_code)
    if as_json and not isinstance(exc, UsageError):
        payload: dict[str, Any] = {"status": "error", **(extra or {})}
        payload["error"] = {
            "category": exc.category,
            "message": exc.message,
            "remedy": exc.remedy,
            "details": exc.details,
        }
        emit_json(payload)
    else:
        warn(f"Error: {exc.message}")
        if exc.remedy:
            warn(f"Hint: {exc.remedy}")
    raise SystemExit(exc.exit_code)
