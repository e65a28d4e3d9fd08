"""Read a user-named input file (spec, stack file, tool catalog) with bounds.

A path a user passes may name a FIFO (reading it hangs), a device
(``/dev/zero`` never ends), a directory or a socket (faults.md, hostile
input). ``read`` refuses every one of them before reading a byte, and reads a
regular file in bounded memory: at most ``max_bytes + 1`` bytes, so a file that
grows while it is read is refused too.

Symlinks are followed: a spec linked into a workflow directory is ordinary.
What the link names is judged, by ``stat`` before opening (so a device is not
even opened) and again by ``fstat`` on the opened descriptor (so a path
swapped between the two is still judged by what was opened). The open is
non-blocking, so a FIFO swapped in after the first check cannot hang it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["RefusedFile", "describe", "read"]

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_CHUNK = 1 << 20


class RefusedFile(Exception):
    """The path is not a regular file, or holds more than the limit."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def describe(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in user terms ("a FIFO (named pipe)")."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _judge(label: str, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        what = describe(info.st_mode)
        raise RefusedFile(
            f"{label} is {what}, not a regular file", "pass the path of the file itself"
        )
    if info.st_size > max_bytes:
        raise RefusedFile(
            f"file is {info.st_size} bytes; the limit is {max_bytes} bytes",
            "check you passed the right file",
        )


def read(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``max_bytes``.

    Raises:
        RefusedFile: not a regular file, or more than ``max_bytes`` bytes (also
            when it grows past the limit while being read).
        OSError: the path cannot be opened or read (``FileNotFoundError`` when absent).
    """
    label = str(path)
    _judge(label, os.stat(path), max_bytes)
    fd = os.open(path, _FLAGS)
    try:
        _judge(label, os.fstat(fd), max_bytes)
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > max_bytes:
        raise RefusedFile(
            f"file grew past the limit of {max_bytes} bytes while it was read",
            "check you passed the right file, and that nothing is writing it",
        )
    return b"".join(chunks)
