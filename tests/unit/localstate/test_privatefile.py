"""npa's small files (localstate.privatefile): private modes whatever the umask, one writer at
a time per file across processes, atomic replacement, a bounded wait for the lock."""

from __future__ import annotations

import multiprocessing
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_infra.errors import ConfigError
from npa_infra.localstate import privatefile


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)  # the worst case: nothing masked
    try:
        yield
    finally:
        os.umask(old)


def test_private_dirs_every_missing_level_0700_whatever_the_umask(
    tmp_path: Path, loose_umask: None
) -> None:
    privatefile.private_dirs(tmp_path / "a" / "b" / "c")
    for level in ("a", "a/b", "a/b/c"):
        assert _mode(tmp_path / level) == 0o700, level


def test_replace_writes_0600_whatever_the_umask_and_leaves_no_temporary(
    tmp_path: Path, loose_umask: None
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("old", encoding="utf-8")
    privatefile.replace(path, b"new")
    assert (path.read_bytes(), _mode(path)) == (b"new", 0o600)
    assert os.listdir(tmp_path) == ["f.yaml"]


def test_replace_never_writes_through_a_planted_temporary_symlink(tmp_path: Path) -> None:
    path, victim = tmp_path / "f", tmp_path / "victim"
    victim.write_text("keep", encoding="utf-8")
    import threading

    (tmp_path / f".f.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
    privatefile.replace(path, b"data")
    assert victim.read_text(encoding="utf-8") == "keep"
    assert path.read_bytes() == b"data"


def _increment(path: str, barrier: Any) -> None:
    target = Path(path)
    barrier.wait()
    with privatefile.locked(target):
        count = int(target.read_text(encoding="utf-8")) if target.exists() else 0
        privatefile.replace(target, str(count + 1).encode())


def test_locked_read_merge_writes_of_16_processes_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(16)
    path = tmp_path / "counter"
    workers = [context.Process(target=_increment, args=(str(path), barrier)) for _ in range(16)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * 16
    assert path.read_text(encoding="utf-8") == "16"
    assert _mode(privatefile.lock_path(path)) == 0o600


def _hold(path: str, held: Any, release: Any) -> None:
    with privatefile.locked(Path(path)):
        held.set()
        release.wait(60)


def test_locked_wait_is_bounded_and_names_the_lock(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    held, release = context.Event(), context.Event()
    path = tmp_path / "config.yaml"
    holder = context.Process(target=_hold, args=(str(path), held, release))
    holder.start()
    try:
        assert held.wait(60)
        with pytest.raises(ConfigError) as info, privatefile.locked(path, wait=0.2):
            pass
        assert str(privatefile.lock_path(path)) == info.value.details["lock"]
        assert "another process" in info.value.message
    finally:
        release.set()
        holder.join(timeout=60)
    with privatefile.locked(path, wait=5):  # free again once the holder is gone
        pass
