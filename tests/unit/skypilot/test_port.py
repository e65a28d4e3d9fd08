"""Who owns the local API server ports (skypilot-0.12.md §7.3), on a fake and the real /proc."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.skypilot.port import Ownership, check_port

TCP_HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
)
HOME, USER = "/iso/home", "npa-0a1b2c3d4e"
EXPECTED = {"HOME": HOME, "SKYPILOT_USER_ID": USER}


def _tcp_line(port: int, inode: int, state: str = "0A") -> str:
    return (
        f"   0: 0100007F:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 "
        f"00000000  1000        0 {inode} 1 0000000000000000 100 0 0 10 0\n"
    )


def _proc(
    root: Path,
    *,
    tcp: str = "",
    tcp6: str = "",
    owners: dict[int, list[str]] | None = None,
    environs: dict[int, dict[str, str]] | None = None,
) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(TCP_HEADER + tcp)
    (root / "net" / "tcp6").write_text(TCP_HEADER + tcp6)
    (root / "self").mkdir()  # non-numeric entries are skipped
    for pid, targets in (owners or {}).items():
        fd = root / str(pid) / "fd"
        fd.mkdir(parents=True)
        for n, target in enumerate(targets):
            (fd / str(n)).symlink_to(target)
    for pid, environ in (environs or {}).items():
        (root / str(pid)).mkdir(exist_ok=True)
        raw = b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items())
        (root / str(pid) / "environ").write_bytes(raw)
    return root


@pytest.mark.parametrize(
    ("tcp", "tcp6"),
    [
        ("", ""),
        (_tcp_line(46580, 111, state="01"), ""),  # ESTABLISHED, not LISTEN
        (_tcp_line(46581, 111), ""),
    ],
    ids=["no-sockets", "not-listening", "other-port"],
)
def test_check_port_nothing_listening_free(tmp_path: Path, tcp: str, tcp6: str) -> None:
    proc = _proc(tmp_path / "proc", tcp=tcp, tcp6=tcp6)
    result = check_port(46580, EXPECTED, proc=proc)
    assert (result.ownership, result.safe, result.pid) == (Ownership.FREE, True, None)


@pytest.mark.parametrize("table", ["tcp", "tcp6"], ids=["ipv4", "ipv6"])
def test_check_port_listener_with_our_env_ours(tmp_path: Path, table: str) -> None:
    line = _tcp_line(46580, 4242)
    proc = _proc(
        tmp_path / "proc",
        **{table: line},
        owners={77: ["/dev/null", "socket:[4242]"]},
        environs={77: {"HOME": HOME, "SKYPILOT_USER_ID": USER, "PATH": "/bin"}},
    )
    result = check_port(46580, EXPECTED, proc=proc)
    assert (result.ownership, result.safe, result.pid) == (Ownership.OURS, True, 77)
    assert (result.home, result.user_id) == (HOME, USER)


@pytest.mark.parametrize(
    "environ",
    [
        {"HOME": "/other/home", "SKYPILOT_USER_ID": USER},
        {"HOME": HOME, "SKYPILOT_USER_ID": "someone-else"},
        {"HOME": HOME},
    ],
    ids=["other-home", "other-user", "no-user-id"],
)
def test_check_port_listener_with_other_env_foreign(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    proc = _proc(
        tmp_path / "proc",
        tcp=_tcp_line(50011, 99),
        owners={12: ["socket:[99]"]},
        environs={12: environ},
    )
    result = check_port(50011, EXPECTED, proc=proc)
    assert (result.ownership, result.safe, result.pid) == (Ownership.FOREIGN, False, 12)


@pytest.mark.parametrize(
    ("owners", "environs", "pid"),
    [({}, {}, None), ({5: ["socket:[1]"]}, {}, None), ({5: ["socket:[99]"]}, {}, 5)],
    ids=["no-owner", "other-socket-only", "environ-unreadable"],
)
def test_check_port_unattributable_listener_unknown(
    tmp_path: Path,
    owners: dict[int, list[str]],
    environs: dict[int, dict[str, str]],
    pid: int | None,
) -> None:
    proc = _proc(tmp_path / "proc", tcp=_tcp_line(46580, 99), owners=owners, environs=environs)
    result = check_port(46580, EXPECTED, proc=proc)
    assert (result.ownership, result.safe, result.pid) == (Ownership.UNKNOWN, False, pid)


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _own_initial_env() -> dict[str, str]:
    """/proc/self/environ is the environment this process started with."""
    raw = Path("/proc/self/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if b"=" in item)
    return {key: value for key, _, value in pairs}


def test_check_port_real_listener_identifies_this_process(listener: int) -> None:
    initial = _own_initial_env()
    expected = {"HOME": os.environ["HOME"]}
    if "SKYPILOT_USER_ID" in initial:
        expected["SKYPILOT_USER_ID"] = initial["SKYPILOT_USER_ID"]
    result = check_port(listener, expected)
    assert (result.ownership, result.pid) == (Ownership.OURS, os.getpid())
    assert result.home == os.environ["HOME"]


def test_check_port_real_listener_other_home_foreign(listener: int) -> None:
    result = check_port(listener, {"HOME": "/nowhere", "SKYPILOT_USER_ID": "npa-x"})
    assert (result.ownership, result.pid) == (Ownership.FOREIGN, os.getpid())


def test_check_port_net_reads_another_namespaces_tables_owner_among_these_processes(
    tmp_path: Path,
) -> None:
    """``net=`` (a private namespace's ``/proc/<pid>/net``): its listener is found there while
    this namespace's own table lists nothing, and its owner among this host's processes."""
    proc = _proc(
        tmp_path / "proc",
        owners={88: ["socket:[5151]"]},
        environs={88: {"HOME": HOME, "SKYPILOT_USER_ID": USER}},
    )
    inside = tmp_path / "proc" / "88" / "net"
    inside.mkdir()
    (inside / "tcp").write_text(TCP_HEADER + _tcp_line(46580, 5151))
    (inside / "tcp6").write_text(TCP_HEADER)

    assert check_port(46580, EXPECTED, proc=proc).ownership is Ownership.FREE
    found = check_port(46580, EXPECTED, proc=proc, net=inside)
    assert (found.ownership, found.pid) == (Ownership.OURS, 88)
