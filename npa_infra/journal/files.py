"""Durable small files beside the journal: written whole, under a private name, then renamed.

A reader of a record such as the in-flight launch or a probe pod's ledger
entry must see the old content or the new, never a torn write, and a crash
right after the call must find the new content on disk: so the bytes go to a
temporary name of this process (0600, never through a symlink), are fsynced,
renamed over the target, and the directory is fsynced too.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

__all__ = ["replace_private"]


def replace_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (file 0600)."""
    # private to this process and thread, so two writers never share a temporary file
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # a failed write leaves the old record, and no litter
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
