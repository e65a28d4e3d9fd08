"""A launch's SkyPilot output: live on the operator's terminal, kept whole in a private log.

Every line a ``sky jobs launch`` child prints (and the log of its request, when
that request failed) passes here as it arrives. It is redacted (the run's
secret values, then ``runs.classifier.redact``'s credential patterns) and
ANSI-stripped, appended to ``<npa home>/logs/<run>/<wave>-<attempt>-launch.log``
(0600, its directories 0700, never through a symlink), and, when a progress
sink is given (text mode), shown as ``sky| <line>``. The first line that
``runs.skyoutput`` recognises is said at once with its cause and remedy, and
kept for the launch's classification and the result.

A log never grows without bound: past ``LOG_BYTES`` it is rotated (the full
file becomes ``<name>.1``, replacing an older one, and writing starts afresh),
so one attempt's output takes at most twice that on disk however much SkyPilot
prints, and npa keeps none of it in memory.

A log that cannot be written is reported once and then skipped: the launch's
identity is already journaled, and losing a copy of its output must not
abandon it half way (faults.md, intent before every external mutation).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from npa_infra.runs import classifier, skyoutput
from npa_infra.skypilot import classify

__all__ = ["LOG_BYTES", "PREFIX", "LaunchLog", "log_path"]

PREFIX = "sky| "
LOG_BYTES = 8 * 1024 * 1024  # one part of a launch log; the previous part is kept as .1
_MASK = "***"
_MIN_SECRET = 4  # journal.guard.MIN_SECRET_LENGTH: shorter values would match ordinary text


def log_path(home: str, run_id: str, wave_index: int, attempt: int) -> Path | None:
    """Where the launch output of one attempt is kept; None without a usable home or run id."""
    if not home or not run_id or "/" in run_id or run_id in (".", ".."):
        return None
    return Path(home) / "logs" / run_id / f"{wave_index}-{attempt}-launch.log"


class LaunchLog:
    """One launch's output sink. Constructing it does no I/O; the file opens on first write."""

    def __init__(
        self,
        path: Path | None,
        *,
        progress: Callable[[str], None] | None,
        secrets: Iterable[str] = (),
        token_vars: tuple[str, ...] = (),
    ) -> None:
        self.path = path
        self.known: skyoutput.KnownFailure | None = None
        self._progress = progress
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._token_vars = token_vars
        self._fd: int | None = None
        self._size = 0  # bytes in the open part
        self._broken = path is None
        self.written = False  # whether any line reached the file

    def note(self, text: str) -> None:
        """A line of npa's own in the log (a launch header), never shown on the terminal."""
        self._write(f"# {self._clean(text)}")

    def line(self, raw: str) -> None:
        """One line of SkyPilot's output, as it arrives."""
        clean = self._clean(raw)
        self._write(clean)
        if self._progress is not None:
            self._progress(PREFIX + clean)
        if self.known is None:
            self.recognise(raw)

    def recognise(self, raw: str) -> skyoutput.KnownFailure | None:
        """Recognise a known failure in ``raw`` (a line or a whole text); say the first at once."""
        if self.known is not None:
            return self.known
        found = skyoutput.first(raw, self._token_vars)
        if found is None:
            return None
        self.known = found
        self._write(
            f"# npa recognised {found.cause.value}: {found.message}; remedy: {found.remedy}"
        )
        if self._progress is not None:
            self._progress(f"Recognised: {found.message}")
            self._progress(f"Hint: {found.remedy}")
        return found

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _clean(self, raw: str) -> str:
        text = raw
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        text = classify.strip_ansi(text).replace("\r", "")
        return classifier.redact(text, limit=len(text) + 1000)

    def _write(self, text: str) -> None:
        if self._broken:
            return
        data = (text + "\n").encode("utf-8", errors="replace")
        try:
            if self._fd is None:
                self._fd = _open(self.path)
                self._size = os.fstat(self._fd).st_size
            if self._size and self._size + len(data) > LOG_BYTES:
                self._rotate()
            os.write(self._fd, data)
            self._size += len(data)
            self.written = True
        except OSError as exc:
            self._broken = True
            self.close()
            if self._progress is not None:
                self._progress(f"warning: cannot write the launch log {self.path}: {exc.strerror}")

    def _rotate(self) -> None:
        """The full part becomes ``<name>.1`` (an older one goes); a fresh part starts.

        Raises:
            OSError: the rename or the new file failed.
        """
        assert self.path is not None and self._fd is not None  # only while a part is open
        self.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self._fd = _open(self.path)
        note = (
            f"# npa rotated this log at {LOG_BYTES} bytes: the part before is {self.path.name}.1\n"
        )
        self._size = os.write(self._fd, note.encode())


def _open(path: Path | None) -> int:
    """Open ``path`` for appending, 0600, creating its two directories 0700; no symlinks.

    Raises:
        OSError: a directory or the file cannot be created or opened.
    """
    if path is None:
        raise OSError(0, "no log path")
    for directory in (path.parent.parent, path.parent):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # an older file of ours keeps no wider mode
    return fd
