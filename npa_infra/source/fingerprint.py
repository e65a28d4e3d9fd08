"""The source fingerprint: one sha256 over the selected files (runtime-reference.md §6).

Byte format, reproduced byte for byte from the reference. The files are taken
in ascending order of their relative posix path (Python ``str`` order, which is
the order of the paths' UTF-8 bytes), and each contributes, in this order::

    <path, UTF-8> 0x00 <"x" if owner-executable else "-"> 0x00 <file bytes> 0x00

The fingerprint is the lowercase hex sha256 of the concatenation: 64 characters,
the last segment of the staged prefix ``s3://<bucket>/<prefix>/<fingerprint>/``.
An empty tree hashes the empty string. Only the path, the owner-execute bit and
the bytes count: timestamps, owners and the other mode bits never do, so the
same checkout gives the same fingerprint on every machine.

Pure: the caller reads the files and feeds their bytes in chunks, so a tree is
never held in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from npa_infra.errors import InvariantError

__all__ = ["FINGERPRINT_LENGTH", "TreeHasher", "fingerprint_of", "is_fingerprint"]

FINGERPRINT_LENGTH = 64
_NUL = b"\0"
_EXEC = b"\0x\0"  # NUL, the exec bit, NUL: what follows a path
_PLAIN = b"\0-\0"
_HEX = frozenset("0123456789abcdef")


class TreeHasher:
    """Feeds files in path order into the running sha256; ``hexdigest`` is the fingerprint."""

    __slots__ = ("_digest", "_last", "file_count", "total_bytes")

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._last: str | None = None
        self.file_count = 0
        self.total_bytes = 0

    def add(self, path: str, executable: bool, chunks: Iterable[bytes]) -> int:
        """Hash one file; returns its size. Paths must come strictly ascending.

        Raises:
            InvariantError: ``path`` is not after the previous one (a caller bug).
        """
        if self._last is not None and path <= self._last:
            raise InvariantError(f"source paths out of order: {path!r} after {self._last!r}")
        self._last = path
        update = self._digest.update
        update(path.encode("utf-8") + (_EXEC if executable else _PLAIN))
        size = 0
        for chunk in chunks:
            update(chunk)
            size += len(chunk)
        update(_NUL)
        self.file_count += 1
        self.total_bytes += size
        return size

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def fingerprint_of(files: Iterable[tuple[str, bool, bytes]]) -> str:
    """The fingerprint of in-memory files ``(path, executable, content)``, in any order."""
    hasher = TreeHasher()
    for path, executable, content in sorted(files, key=lambda item: item[0]):
        hasher.add(path, executable, (content,))
    return hasher.hexdigest()


def is_fingerprint(text: str) -> bool:
    """64 lowercase hex characters: what a staged prefix ends in."""
    return len(text) == FINGERPRINT_LENGTH and set(text) <= _HEX
