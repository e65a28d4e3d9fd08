"""The journal's SQLite file: opened privately, configured for durability, errors translated.

``connect`` decides how the file may be opened: the npa home and missing
parents are created 0700, the database and its ``-wal``/``-shm`` siblings are
0600 regular files owned by the current user, and a symlink at any of those
paths is refused (a link could point the journal at another user's file).

The journal never silently starts over (issue 24). A missing journal is
created whole under a private temporary name and hard-linked into place, so
it appears complete or not at all and two processes cannot both create one
(the second link fails and that process opens the first one's). An existing
file is inspected before anything writes to it, and refused with what was
found and the exact command that moves it aside with its ``-wal`` and
``-shm`` files: an empty file, one that is not SQLite, another application's
database (never switched to WAL), a journal without its version or of an
unknown one (``schema.inspect``); so is a ``-wal`` file left without its
journal, whose frames SQLite would replay into a new one.

The connection runs in autocommit mode (every transaction is an explicit
``BEGIN IMMEDIATE`` … ``COMMIT`` in store.py) with ``journal_mode=WAL``,
``synchronous=FULL`` (a commit is on disk before it returns, so a SIGKILL or
power loss keeps every committed step), ``foreign_keys=ON`` and a
``BUSY_TIMEOUT_S`` wait for other writers; then the schema is migrated, under
``synchronous=NORMAL`` (``_migrate``: the first durable step syncs it too).

``translate`` is the one place SQLite errors become ours (style.md rule 8):
result codes that describe the environment (busy, disk full, read-only,
I/O, corrupt, not a database) become ``ConfigError`` with a remedy; anything
else (constraint and trigger aborts from schema.py, SQL or API misuse) is a
bug, ``InvariantError``.
"""

from __future__ import annotations

import os
import random
import secrets
import shlex
import sqlite3
import stat
import time
from pathlib import Path

from npa_infra.errors import ConfigError, InvariantError
from npa_infra.journal import schema

__all__ = [
    "BUSY_TIMEOUT_S",
    "ENVIRONMENT_CODES",
    "connect",
    "move_aside_command",
    "siblings",
    "translate",
]

BUSY_TIMEOUT_S = 10.0
SQLITE_HEADER = b"SQLite format 3\x00"

# SQLite primary result codes that describe the environment: (what happened, remedy).
ENVIRONMENT_CODES: dict[str, tuple[str, str]] = {
    "SQLITE_BUSY": ("is locked by another npa process", "retry once the other command ends"),
    "SQLITE_LOCKED": ("is locked by another npa process", "retry once the other command ends"),
    "SQLITE_FULL": ("cannot grow: the disk is full", "free disk space, then rerun the command"),
    "SQLITE_READONLY": ("is read-only", "make it writable by you (chmod u+w), then rerun"),
    "SQLITE_PERM": ("is not accessible", "check its ownership and permissions, then rerun"),
    "SQLITE_CANTOPEN": ("cannot be opened", "check the npa home's permissions, then rerun"),
    "SQLITE_IOERR": ("hit a disk I/O error", "check the disk, then rerun the command"),
    "SQLITE_NOLFS": ("exceeds the file-size limit", "move NPA_HOME to a larger file system"),
    "SQLITE_PROTOCOL": ("lost a locking race", "rerun the command"),
    "SQLITE_CORRUPT": (
        "is corrupt",
        "move it aside with its -wal and -shm files (its runs can no longer be resumed); "
        "npa starts a new journal",
    ),
    "SQLITE_NOTADB": (
        "is not an SQLite database",
        "move it aside with its -wal and -shm files; npa starts a new journal on the next command",
    ),
}
_MOVE_ASIDE = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


def siblings(path: Path) -> tuple[Path, Path, Path]:
    """The database file and the ``-wal`` and ``-shm`` files SQLite keeps beside it."""
    return path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def move_aside_command(path: Path) -> str:
    """The shell command that moves the journal and its existing siblings aside together,
    under names SQLite pairs again (``X``, ``X-wal``, ``X-shm``), never over another file."""
    target = path.with_name(f"{path.name}.aside-{time.strftime('%Y%m%dT%H%M%S')}")
    moves = [
        f"mv -n {shlex.quote(str(src))} {shlex.quote(str(target) + src.name[len(path.name) :])}"
        for src in siblings(path)
        if os.path.lexists(src)
    ]
    return " && ".join(moves) or f"mv -n {shlex.quote(str(path))} {shlex.quote(str(target))}"


def connect(path: Path) -> sqlite3.Connection:
    """Open, configure and migrate the journal at ``path`` (created exclusively when absent).

    Raises:
        ConfigError: an unusable home, a symlinked or foreign file, a file that is
            not npa's journal (empty, not SQLite, another application's, without
            or of an unknown schema version), a ``-wal`` without its journal, a
            corrupt or newer-version database, or a file system without WAL support.
    """
    _prepare_home(path)
    old_umask = os.umask(0o077)  # the -wal/-shm files SQLite creates stay private
    conn: sqlite3.Connection | None = None
    try:
        if not _open_existing(path):
            _create_exclusively(path)
            _open_existing(path)  # judged like any other: the winner's file, if not ours
        conn = _sqlite(path)
        _require_journal(conn, path)
        _configure(conn, path)
        _migrate(conn, path)
        for sibling in siblings(path)[1:]:
            _make_private(sibling)
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, "open", path) from exc
        raise
    finally:
        os.umask(old_umask)
    return conn


def translate(exc: sqlite3.Error, label: str, path: Path) -> ConfigError | InvariantError:
    """Map an SQLite error raised during ``label`` to the error tree."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    for code, (what, remedy) in ENVIRONMENT_CODES.items():
        if name == code or name.startswith(code + "_"):
            if code in _MOVE_ASIDE:
                remedy = f"{remedy}: {move_aside_command(path)}"
            return ConfigError(
                f"the journal {path} {what} ({label})",
                remedy=remedy,
                details={"sqlite_error": name, "step": label, "journal": str(path)},
            )
    # Constraint and trigger aborts (schema.py), SQL or API misuse: bugs.
    return InvariantError(f"journal {label} failed: {name or type(exc).__name__}: {exc}")


def _prepare_home(path: Path) -> None:
    old_umask = os.umask(0o077)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the npa home {path.parent}: {exc.strerror}",
            remedy="set NPA_HOME to a directory you can write, or create it (mkdir -m 700)",
        ) from exc
    finally:
        os.umask(old_umask)
    for sibling in siblings(path):
        if sibling.is_symlink():
            raise ConfigError(
                f"the journal file {sibling} is a symlink; npa refuses to follow it",
                remedy=f"replace the link with the real file (or remove it): rm {sibling}",
            )


def _refused(
    path: Path,
    what: str,
    why: str,
    *,
    found: str,
    first: str = "if its runs are gone for good, move it aside with its -wal and -shm files",
) -> ConfigError:
    return ConfigError(
        f"the journal {path} {what}; npa will not start a new journal over it: {why}",
        remedy=f"{first} and rerun (npa then starts a new journal): {move_aside_command(path)}",
        details={"journal": str(path), "found": found},
    )


def _open_existing(path: Path) -> bool:
    """Check an existing journal file (private, regular, SQLite); False: there is none."""
    wal_seen = os.path.lexists(siblings(path)[1])  # read before the journal (module docstring)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if wal_seen:
            raise _refused(
                path,
                "is missing but its -wal file is there",
                "SQLite would replay that log into a new journal",
                found="wal_without_journal",
                first="put the journal back beside its log if you moved it; otherwise move "
                "the log aside",
            ) from None
        return False
    except OSError as exc:
        raise ConfigError(
            f"cannot open the journal {path}: {exc.strerror}",
            remedy=f"check the ownership and permissions of {path.parent}",
        ) from exc
    try:
        info = os.fstat(fd)
        _check_private(path, info)
        os.fchmod(fd, 0o600)
        head = os.pread(fd, len(SQLITE_HEADER), 0)
    finally:
        os.close(fd)
    if not head:
        why = "it was emptied, and a new journal would forget every run it held"
        raise _refused(path, "is empty (0 bytes)", why, found="empty")
    if not head.startswith(SQLITE_HEADER):
        why = "it may be another program's file"
        raise _refused(path, "is not an SQLite database", why, found="not_sqlite")
    return True


def _sqlite(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path),
        timeout=BUSY_TIMEOUT_S,
        isolation_level=None,  # autocommit: every transaction is explicit
        check_same_thread=False,  # the Journal serialises threads itself
    )
    conn.row_factory = sqlite3.Row
    return conn


def _create_exclusively(path: Path) -> None:
    """Create a complete, migrated journal under a private name and link it into place;
    another process's journal linked first wins (module docstring)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    try:
        conn = sqlite3.connect(str(temporary), isolation_level=None)
        try:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = OFF")  # one fsync below covers it all
            schema.migrate(conn, source=str(path))
        finally:
            conn.close()  # checkpoints the log into the file and removes it
        fd = os.open(temporary, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return  # another process created the journal first: use that one
        _fsync_directory(path.parent)
    except sqlite3.Error as exc:
        raise translate(exc, "create", path) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot create the journal {path}: {exc.strerror}",
            remedy=f"check the ownership, permissions and free space of {path.parent}",
        ) from exc
    finally:
        for leftover in siblings(temporary):
            leftover.unlink(missing_ok=True)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _require_journal(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a database that is not npa's journal before anything writes to it."""
    seen = schema.inspect(conn)
    if seen.found is schema.Found.JOURNAL:
        return
    if seen.found is schema.Found.NEWER:
        raise ConfigError(
            f"the journal {path} has schema version {seen.version}, newer than this "
            f"npa-infra understands ({schema.SCHEMA_VERSION})",
            remedy="upgrade npa-infra (pip install -U npa-infra) and rerun the command",
            details={"schema_version": seen.version, "supported": schema.SCHEMA_VERSION},
        )
    why = {
        schema.Found.NO_TABLES: "it holds no run, and may be another program's file",
        schema.Found.FOREIGN: "it belongs to another application, and npa never changes it",
        schema.Found.NO_VERSION: "npa cannot tell which schema its runs were written with",
        schema.Found.BAD_VERSION: "npa cannot tell which schema its runs were written with",
    }[seen.found]
    raise _refused(path, f"holds {seen.detail}", why, found=seen.found.value)


def _check_private(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(
            f"the journal file {path} is not a regular file owned by you",
            remedy=f"move {path} aside; npa creates a new journal on the next command",
        )


def _make_private(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    _check_private(path, info)
    if stat.S_IMODE(info.st_mode) != 0o600:
        path.chmod(0o600)


def _enable_wal(conn: sqlite3.Connection) -> str:
    """``PRAGMA journal_mode = WAL``, retried while another process holds the lock.

    Switching a new database to WAL needs an exclusive lock that SQLite does not
    wait for (the busy handler is not called), so two processes opening a new
    journal at once would fail; they retry within the same busy timeout instead.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            busy = str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_BUSY")
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(0.01 + random.random() * 0.04)


def _configure(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    mode = _enable_wal(conn)
    if mode != "wal":
        raise ConfigError(
            f"the journal {path} cannot use write-ahead logging (journal_mode={mode})",
            remedy="point NPA_HOME at a local disk; network file systems cannot hold the journal",
        )
    conn.execute("PRAGMA foreign_keys = ON")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Migrate the schema with ``synchronous = NORMAL``, then set ``FULL`` for every step.

    The migration's commit alone is not synced: in WAL mode NORMAL keeps the file
    consistent (a migration that a power loss undoes is applied again by the next
    open), and the next ``FULL`` commit syncs the write-ahead log, and with it the
    migration's frames, before it returns. So a step a command reports as done never
    depends on an unsynced migration, and a new journal costs one sync fewer (issue 19).
    """
    conn.execute("PRAGMA synchronous = NORMAL")
    schema.migrate(conn, source=str(path))
    conn.execute("PRAGMA synchronous = FULL")
