"""List and fingerprint a local checkout: the file-system half of source staging.

Candidates come from ``git -C ROOT ls-files -z --cached --others
--exclude-standard``: tracked files and untracked files git does not ignore
(runtime-reference.md §6). When ROOT is not inside a git work tree, or git is
not installed, a sorted walk of ROOT lists every file instead. Any other git
failure (an unsafe repository, a corrupt index) is an error, never a silent
walk, because a walk would pick up ignored files and change the fingerprint.

Each candidate passes ``selection``'s name rules, then is opened once with
``O_NOFOLLOW | O_NONBLOCK`` (a symlink or FIFO can neither redirect nor block
the read), checked as a regular file with ``fstat``, and streamed through
``fingerprint.TreeHasher`` in path order. The exec bit is the owner-execute bit
of that ``fstat`` (cli.md §0). Sizes and modification times are kept, so the
stager can prove after an upload that no file changed under it.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from npa_infra.errors import ConfigError
from npa_infra.source import fingerprint, selection

__all__ = ["GIT_LS_FILES", "SourceFile", "SourceTree", "candidates", "changed_files", "scan"]

GIT_LS_FILES = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
_CHUNK = 1024 * 1024
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC
)
# Variables that would point git at another repository or index than ROOT's own.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
_NOT_A_REPO = b"not a git repository"

Listing = Literal["git", "walk"]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One selected file: its relative posix path, exec bit, and what ``fstat`` said."""

    path: str
    executable: bool
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class SourceTree:
    """A scanned checkout: the selected files in path order and their fingerprint."""

    root: Path
    fingerprint: str
    files: tuple[SourceFile, ...]
    total_bytes: int
    listing: Listing
    excluded: Mapping[str, int]  # selection.Exclusion value (or "missing") -> count

    @property
    def file_count(self) -> int:
        return len(self.files)


def candidates(root: Path, *, git: str = "git") -> tuple[Listing, list[str]]:
    """The candidate paths under ``root`` (unfiltered, unsorted) and how they were listed.

    Raises:
        ConfigError: ``root`` is not a directory, git failed inside a work tree, or a
            file name is not UTF-8 (S3 keys must be).
    """
    if not root.is_dir():
        raise ConfigError(
            f"source directory {root} does not exist or is not a directory",
            remedy="pass --source DIR naming the checkout to stage",
        )
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    try:
        proc = subprocess.run(
            [git, "-C", str(root), *GIT_LS_FILES],
            capture_output=True,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return "walk", _walk(root)
    if proc.returncode != 0:
        if _NOT_A_REPO in proc.stderr:
            return "walk", _walk(root)
        detail = proc.stderr.decode("utf-8", "replace").strip()[:500]
        raise ConfigError(
            f"git could not list the files of {root} (exit {proc.returncode}): {detail}",
            remedy="fix the repository (see git's message; an unsafe owner needs "
            "`git config --global --add safe.directory DIR`), then rerun",
            details={"argv": ["git", "-C", str(root), *GIT_LS_FILES], "code": proc.returncode},
        )
    return "git", [_decode(raw, root) for raw in proc.stdout.split(b"\0") if raw]


def _decode(raw: bytes, root: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_utf8(root, raw.decode("utf-8", "backslashreplace")) from None


def _not_utf8(root: Path, shown: str) -> ConfigError:
    return ConfigError(
        f"cannot stage {root}: the file name {shown!r} is not UTF-8, and S3 keys must be",
        remedy="rename the file, or add it to .gitignore, then rerun",
    )


def _walk(root: Path) -> list[str]:
    """Every file under ``root``, never entering symlinked or excluded directories."""
    skip = selection.EXCLUDED_DIRS
    found: list[str] = []
    base = str(root)
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        # Pruning only saves time: every file below these would be excluded by name anyway.
        dirnames[:] = [
            d
            for d in dirnames
            if d not in skip
            and not d.endswith(selection.EXCLUDED_DIR_SUFFIXES)
            and d.lower() not in selection.SENSITIVE_DIRS
        ]
        rel = os.path.relpath(dirpath, base)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in filenames:
            path = prefix + name
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                raise _not_utf8(
                    root,
                    path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
                ) from None
            found.append(path)
    return found


def scan(root: Path, *, git: str = "git") -> SourceTree:
    """List, select and fingerprint the checkout at ``root``.

    Raises:
        ConfigError: see ``candidates``; or a selected file cannot be read.
    """
    listing, paths = candidates(root, git=git)
    hasher = fingerprint.TreeHasher()
    files: list[SourceFile] = []
    excluded: Counter[str] = Counter()
    symlinked: dict[str, bool] = {}
    base = str(root)
    prefix = base.rstrip(os.sep) + os.sep
    for path in sorted(set(paths)):
        reason = selection.name_exclusion(path)
        if reason is not None:
            excluded[reason.value] += 1
            continue
        parent_link = _symlinked_dir(base, path.rpartition("/")[0], symlinked)
        try:
            fd = os.open(prefix + path, _OPEN_FLAGS)
        except FileNotFoundError:
            excluded["missing"] += 1  # tracked, but deleted in the work tree
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                excluded[selection.Exclusion.SYMLINK.value] += 1
                continue
            raise _unreadable(root, path, exc) from exc
        try:
            info = os.fstat(fd)
            reason = _type_exclusion(info.st_mode, parent_link)
            if reason is not None:
                excluded[reason.value] += 1
                continue
            executable = bool(info.st_mode & stat.S_IXUSR)
            size = hasher.add(path, executable, _contents(fd, info.st_size))
        except OSError as exc:
            raise _unreadable(root, path, exc) from exc
        finally:
            os.close(fd)
        files.append(SourceFile(path, executable, size, info.st_mtime_ns))
    return SourceTree(
        root=root,
        fingerprint=hasher.hexdigest(),
        files=tuple(files),
        total_bytes=hasher.total_bytes,
        listing=listing,
        excluded=dict(excluded),
    )


def changed_files(root: Path, files: Sequence[SourceFile]) -> list[str]:
    """The files whose type, size, mtime or exec bit differ from the scan (or that are gone)."""
    changed: list[str] = []
    base = str(root)
    for item in files:
        try:
            info = os.lstat(os.path.join(base, item.path))
        except OSError:
            changed.append(item.path)
            continue
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_size != item.size
            or info.st_mtime_ns != item.mtime_ns
            or bool(info.st_mode & stat.S_IXUSR) != item.executable
        ):
            changed.append(item.path)
    return changed


def _type_exclusion(mode: int, symlinked_parent: bool) -> selection.Exclusion | None:
    """``selection.exclusion``'s file-type rules (the name rules already passed)."""
    if symlinked_parent or stat.S_ISLNK(mode):
        return selection.Exclusion.SYMLINK
    if not stat.S_ISREG(mode):
        return selection.Exclusion.NOT_REGULAR
    return None


def _contents(fd: int, size: int) -> Iterator[bytes]:
    """The file's bytes in chunks; a file under ``_CHUNK`` costs one ``read`` call.

    Asking for one byte more than ``fstat`` reported proves end of file by a
    short read; a file that grew or shrank meanwhile is read on to its real end.
    """
    if size < _CHUNK:
        first = os.read(fd, size + 1)
        yield first
        if len(first) == size:
            return
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return
        yield chunk


def _symlinked_dir(base: str, directory: str, memo: dict[str, bool]) -> bool:
    """Whether ``directory`` (relative) or any directory above it is a symbolic link."""
    if not directory:
        return False
    known = memo.get(directory)
    if known is not None:
        return known
    parent = directory.rpartition("/")[0]
    try:
        is_link = stat.S_ISLNK(os.lstat(os.path.join(base, directory)).st_mode)
    except OSError:
        is_link = False
    result = is_link or _symlinked_dir(base, parent, memo)
    memo[directory] = result
    return result


def _unreadable(root: Path, path: str, exc: OSError) -> ConfigError:
    return ConfigError(
        f"cannot read {path} in {root}: {exc.strerror or exc}",
        remedy="fix the file's permissions, or add it to .gitignore, then rerun",
        details={"path": path},
    )
