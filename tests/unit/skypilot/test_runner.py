"""The runner's promise with real processes: no child acts unnoticed, none outlives npa.

Each test starts real processes and waits on events (a pipe line, a pidfd
becoming readable), never on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs.children import ChildIdentity, ChildState
from npa_infra.skypilot import children
from npa_infra.skypilot.runner import GATE_CLOSED, SubprocessRunner

ROOT = Path(__file__).resolve().parents[3]
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def test_run_gated_command_records_identity_before_it_acts(tmp_path: Path) -> None:
    marker = tmp_path / "acted"
    seen: list[tuple[ChildIdentity, bool]] = []
    result = SubprocessRunner().run(
        ["/bin/sh", "-c", f"echo acted > {marker}; echo out"],
        env=ENV,
        on_started=lambda child: seen.append((child, marker.exists())),
    )
    assert result.returncode == 0 and result.stdout == "out\n"
    assert result.argv == ("/bin/sh", "-c", f"echo acted > {marker}; echo out")
    [(child, acted_before)] = seen
    assert not acted_before  # the identity was in hand while the child was still gated
    assert child.pid > 0 and child.host and child.start_ticks > 0
    assert children.observe(child) is ChildState.GONE  # reaped by the time run returns


def test_run_gated_command_whose_identity_cannot_be_recorded_never_acts(tmp_path: Path) -> None:
    marker = tmp_path / "acted"

    def refuse(child: ChildIdentity) -> None:
        raise OSError("journal is read-only")

    with pytest.raises(OSError, match="read-only"):
        SubprocessRunner().run(["/bin/sh", "-c", f"touch {marker}"], env=ENV, on_started=refuse)
    assert not marker.exists()


def test_gate_closed_by_a_dead_parent_never_runs_the_command(tmp_path: Path) -> None:
    """npa dies between starting the child and releasing it: the gate reads end-of-file."""
    marker = tmp_path / "acted"
    script = textwrap.dedent(
        f"""
        import json, os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        os.environ["PATH"] = ""  # no setpriv: only the gate protects the command
        from npa_infra.skypilot.runner import SubprocessRunner
        def die(child):
            print(json.dumps(child.to_json()), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        SubprocessRunner().run(["/bin/sh", "-c", "touch {marker}"], env={{}}, on_started=die)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = ChildIdentity.from_json(json.loads(parent.stdout.readline()))
    assert parent.wait() == -signal.SIGKILL
    assert child is not None
    assert children.wait_gone(child, 30.0) is ChildState.GONE
    assert not marker.exists()
    assert GATE_CLOSED == 125


@pytest.mark.parametrize(
    "how", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=["kill", "term", "hup"]
)
def test_child_dies_with_npa_however_npa_dies(how: signal.Signals, tmp_path: Path) -> None:
    """A child blocked in a long call is gone once its npa is gone (pdeathsig, or the
    interrupt path killing its process group)."""
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from npa_infra import signals
        from npa_infra.skypilot.runner import SubprocessRunner
        signals.install()
        def started(child):
            print(json.dumps(child.to_json()), flush=True)
        try:
            SubprocessRunner().run(["/bin/sleep", "600"], env={{}}, on_started=started)
        except KeyboardInterrupt:
            sys.exit(signals.exit_code())
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = ChildIdentity.from_json(json.loads(parent.stdout.readline()))
    assert child is not None and children.observe(child) is ChildState.ALIVE
    parent.send_signal(how)
    code = parent.wait()
    assert code == (-signal.SIGKILL if how is signal.SIGKILL else 128 + how)
    assert children.wait_gone(child, 30.0) is ChildState.GONE


def test_observe_a_reused_pid_is_gone() -> None:
    me = children.identify(os.getpid())
    assert children.observe(me) is ChildState.ALIVE
    other_start = ChildIdentity(me.pid, me.start_ticks + 1, me.boot_id, me.host)
    assert children.observe(other_start) is ChildState.GONE


def test_observe_another_host_or_boot() -> None:
    me = children.identify(os.getpid())
    assert children.observe(ChildIdentity(me.pid, me.start_ticks, me.boot_id, me.host + "-x")) is (
        ChildState.UNKNOWN
    )
    assert children.observe(ChildIdentity(me.pid, me.start_ticks, "another-boot", me.host)) is (
        ChildState.GONE
    )


def test_wait_gone_returns_when_the_process_exits() -> None:
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(["/bin/sh", "-c", "read -r _"], stdin=read_end)
    os.close(read_end)
    child = children.identify(proc.pid)
    assert children.wait_gone(child, 0.0) is ChildState.ALIVE  # no time allowed: still there
    os.write(write_end, b"\n")
    os.close(write_end)
    proc.wait()
    assert children.wait_gone(child, 30.0) is ChildState.GONE


# -- streaming: on_line sees each line as it arrives (issue 17) ---------------------------------
def test_run_on_line_gets_a_line_while_the_child_still_runs(tmp_path: Path) -> None:
    """The child prints a line, then blocks until the callback releases it: only a runner
    that hands the line over while the child runs can finish (else the timeout ends it)."""
    release = tmp_path / "release.fifo"
    os.mkfifo(release)
    seen: list[str] = []
    identities: list[ChildIdentity] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if line == "ready":
            assert children.observe(identities[0]) is ChildState.ALIVE  # not yet released
            with open(release, "w", encoding="ascii") as fifo:
                fifo.write("go\n")

    script = f"echo ready; read -r _ < {release}; echo done; echo oops >&2"
    result = SubprocessRunner().run(
        ["/bin/sh", "-c", script],
        env=ENV,
        timeout=120,
        on_started=identities.append,
        on_line=on_line,
    )
    assert not result.timed_out and result.returncode == 0
    assert seen[0] == "ready" and sorted(seen[1:]) == ["done", "oops"]
    assert (result.stdout, result.stderr) == ("ready\ndone\n", "oops\n")  # still whole


def test_run_on_line_error_kills_the_child_and_propagates(tmp_path: Path) -> None:
    identities: list[ChildIdentity] = []

    def on_line(line: str) -> None:
        raise RuntimeError(f"sink broke on {line}")

    with pytest.raises(RuntimeError, match="sink broke on ready"):
        SubprocessRunner().run(
            ["/bin/sh", "-c", "echo ready; exec /bin/sleep 600"],
            env=ENV,
            on_started=identities.append,
            on_line=on_line,
        )
    assert children.wait_gone(identities[0], 30.0) is ChildState.GONE


def test_run_on_line_timeout_kills_and_keeps_what_was_read() -> None:
    seen: list[str] = []
    result = SubprocessRunner().run(
        ["/bin/sh", "-c", "echo first; exec /bin/sleep 600"],
        env=ENV,
        timeout=0.3,
        on_line=seen.append,
    )
    assert result.timed_out
    assert result.stdout.splitlines() == seen  # the callback saw exactly what was kept


@given(
    st.lists(st.sampled_from(["a", "é", "line two", "", "\n", "\r\n", "\r", "x\ry"]), max_size=12),
    st.data(),
)
def test_lines_any_chunking_same_lines_and_text(parts: list[str], data: st.DataObject) -> None:
    from npa_infra.skypilot import runner

    raw = "".join(parts).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    pipe = runner._Lines()
    lines: list[str] = []
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        lines += pipe.feed(raw[start:end]) if end > start else []
    lines += pipe.close()
    text = raw.decode().replace("\r\n", "\n").replace("\r", "\n")
    assert pipe.text() == text
    assert lines == text.splitlines()


def test_lines_keep_start_and_bounded_tail_and_split_endless_lines() -> None:
    """However much a pipe carries, what is kept is bounded; a gap is marked, never hidden."""
    from npa_infra.skypilot import runner

    pipe = runner._Lines(head=64, tail=256)
    seen = 0
    for index in range(2000):  # 2000 lines of 100 bytes, then one line without an end
        seen += len(pipe.feed(f"{index:04d}".encode() + b"x" * 95 + b"\n"))
        kept = len(pipe.head) + len(pipe.tail) + len(pipe._partial)
        assert kept <= 64 + 2 * 256 + 100
    endless = pipe.feed(b"y" * (3 * runner.LINE_BYTES + 5))
    assert seen == 2000 and [len(part) for part in endless] == [runner.LINE_BYTES] * 3
    assert pipe.close() == ["y" * 5]
    text = pipe.text()
    assert text.startswith("0000") and "bytes omitted]" in text and text.endswith("y" * 5)
    assert pipe.dropped > 0 and len(text) < 64 + 256 + 100


def test_run_whole_answer_past_its_limit_is_marked_truncated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from npa_infra.skypilot import classify, runner

    monkeypatch.setattr(runner, "WHOLE_TAIL_BYTES", 4096)
    result = SubprocessRunner().run(
        ["/bin/sh", "-c", "printf '['; head -c 600000 /dev/zero | tr '\\0' ' '; printf ']'"],
        env=ENV,
    )
    assert result.truncated and len(result.stdout) < 4096 + runner.HEAD_BYTES + 200
    assert classify.parse_queue(result).verdict.value == "unavailable"  # never a part as whole


def test_run_silent_child_reports_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_infra.skypilot import runner

    monkeypatch.setattr(runner, "WAIT_FIRST", 0.05)
    waits: list[float] = []
    result = SubprocessRunner().run(
        ["/bin/sh", "-c", "exec /bin/sleep 600"], env=ENV, timeout=0.5, on_wait=waits.append
    )
    assert result.timed_out and waits and all(0.04 <= w <= 0.6 for w in waits)
