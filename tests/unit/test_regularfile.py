"""Tests for ``npa_infra.regularfile``: user-named files are read bounded (issue 18).

Nothing here may block: a FIFO is refused by ``stat`` before it is opened, and
when a FIFO is swapped in after that check the open is non-blocking. The
``_within`` guard only turns a regression into a failure instead of a hang.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_infra import regularfile
from npa_infra.regularfile import RefusedFile


def _within(call: Callable[[], Any], seconds: float = 10.0) -> Any:
    """``call()``'s result or exception; fails (instead of hanging) if it blocks."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed back to the test thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the read blocked"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    yield path
    # a regressed reader stuck in open() is released by a writer's open; ENXIO
    # (nobody has it open for reading) is the expected case
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def _refusal(path: Path, max_bytes: int = 1024) -> str:
    with pytest.raises(RefusedFile) as caught:
        _within(lambda: regularfile.read(path, max_bytes))
    return caught.value.message


def test_read_regular_file_returns_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"a: 1\n")
    assert regularfile.read(path, 1024) == b"a: 1\n"


def test_read_symlink_to_regular_file_follows_it(tmp_path: Path) -> None:
    target = tmp_path / "spec.yaml"
    target.write_bytes(b"a: 1\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    assert regularfile.read(link, 1024) == b"a: 1\n"


def test_read_fifo_is_refused_without_blocking(fifo: Path) -> None:
    assert _refusal(fifo) == f"{fifo} is a FIFO (named pipe), not a regular file"


def test_read_symlink_to_fifo_is_refused_without_blocking(fifo: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(fifo)
    assert _refusal(link) == f"{link} is a FIFO (named pipe), not a regular file"


def test_read_fifo_swapped_in_after_stat_is_refused_by_fstat_without_blocking(
    fifo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the race: stat() saw a regular file, then the path became a FIFO before open()
    decoy = tmp_path / "decoy.yaml"
    decoy.write_bytes(b"a: 1\n")
    real_stat = os.stat
    monkeypatch.setattr(regularfile.os, "stat", lambda path: real_stat(decoy))
    assert _refusal(fifo) == f"{fifo} is a FIFO (named pipe), not a regular file"


def test_read_character_device_is_refused_before_reading() -> None:
    assert _refusal(Path("/dev/zero")) == "/dev/zero is a character device, not a regular file"


def test_read_directory_is_refused(tmp_path: Path) -> None:
    assert _refusal(tmp_path) == f"{tmp_path} is a directory, not a regular file"


def test_read_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        assert _refusal(path) == f"{path} is a socket, not a regular file"
    finally:
        server.close()


def test_read_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        regularfile.read(tmp_path / "absent.yaml", 1024)


def test_read_file_over_limit_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 101)
    assert _refusal(path, max_bytes=100) == "file is 101 bytes; the limit is 100 bytes"


def test_read_file_at_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    path.write_bytes(b"x" * 100)
    assert regularfile.read(path, 100) == b"x" * 100


class _ReadCounter:
    def __init__(self) -> None:
        self.bytes = 0
        self.real = os.read

    def __call__(self, fd: int, size: int) -> bytes:
        chunk = self.real(fd, size)
        self.bytes += len(chunk)
        return chunk


def test_read_endless_stream_that_passes_the_checks_reads_at_most_limit_plus_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # /dev/zero dressed as a small regular file: the size checks pass, the stream
    # never ends, so only the bounded read loop stands between it and memory
    decoy = tmp_path / "decoy.yaml"
    decoy.write_bytes(b"a: 1\n")
    info = os.stat(decoy)
    counter = _ReadCounter()
    monkeypatch.setattr(regularfile.os, "stat", lambda path: info)
    monkeypatch.setattr(regularfile.os, "fstat", lambda fd: info)
    monkeypatch.setattr(regularfile.os, "read", counter)
    message = _refusal(Path("/dev/zero"), max_bytes=4096)
    assert message == "file grew past the limit of 4096 bytes while it was read"
    assert counter.bytes == 4097


def test_read_file_growing_after_fstat_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "growing.yaml"
    path.write_bytes(b"x" * 10)
    small = os.stat(path)
    path.write_bytes(b"x" * 5000)  # grew after it was judged
    counter = _ReadCounter()
    monkeypatch.setattr(regularfile.os, "stat", lambda p: small)
    monkeypatch.setattr(regularfile.os, "fstat", lambda fd: small)
    monkeypatch.setattr(regularfile.os, "read", counter)
    assert "grew past the limit of 100 bytes" in _refusal(path, max_bytes=100)
    assert counter.bytes == 101


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (0o040755, "a directory"),
        (0o010644, "a FIFO (named pipe)"),
        (0o020666, "a character device"),
        (0o060660, "a block device"),
        (0o140755, "a socket"),
    ],
    ids=["dir", "fifo", "chr", "blk", "sock"],
)
def test_describe_non_regular_mode_names_what_it_is(mode: int, expected: str) -> None:
    assert regularfile.describe(mode) == expected
