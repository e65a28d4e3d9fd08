"""One queue read per tick shared by every supervisor of a controller (skypilot.sharedqueue)."""

from __future__ import annotations

import json
import multiprocessing
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from npa_infra.skypilot.models import ErrorKind, JobStatus, QueueRecord, QueueResult, QueueVerdict
from npa_infra.skypilot.sharedqueue import SharedQueue, decode, encode

ROW = QueueRecord(1, 0, "run-a-00-train", "train", JobStatus.PENDING, 1.5, None, None, "c-1", "u")
RECORDS = QueueResult(QueueVerdict.RECORDS, (ROW,))
DOWN = QueueResult(QueueVerdict.UNAVAILABLE, (), ErrorKind.TRANSPORT, "connection refused")


@dataclass
class CountingSky:
    """The one ``SkyPilot`` method a shared read uses; counts the calls."""

    answers: list[QueueResult]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        self.calls.append({"all_users": all_users, "verbose": verbose})
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


@dataclass
class Clock:
    t: float = 1000.0

    def now(self) -> float:
        return self.t


def _pair(
    tmp_path: Path, *answers: QueueResult
) -> tuple[CountingSky, Clock, SharedQueue, SharedQueue]:
    sky, clock = CountingSky(list(answers)), Clock()
    directory = tmp_path / "state" / "supervision"
    first = SharedQueue(sky, directory, clock.now)  # type: ignore[arg-type]
    second = SharedQueue(sky, directory, clock.now)  # type: ignore[arg-type]
    return sky, clock, first, second


def test_supervisors_of_one_controller_share_one_read_per_tick(tmp_path: Path) -> None:
    sky, clock, a, b = _pair(tmp_path, RECORDS)

    assert a.read(max_age=30, not_before=0) == RECORDS
    clock.t += 10
    assert b.read(max_age=30, not_before=0) == RECORDS  # A's answer, 10 s old
    clock.t += 20
    assert a.read(max_age=30, not_before=0) == RECORDS  # 30 s old: a tick has passed, read again
    clock.t += 1
    assert b.read(max_age=30, not_before=0) == RECORDS

    assert len(sky.calls) == 2 and all(c["verbose"] for c in sky.calls)
    assert (a.calls, b.calls) == (2, 0)


def test_an_answer_read_before_the_watch_began_is_not_taken(tmp_path: Path) -> None:
    """It may predate the watcher's own job, which would then look lost by the controller."""
    sky, clock, a, b = _pair(tmp_path, RECORDS)
    a.read(max_age=30, not_before=0)
    clock.t += 5
    b.read(max_age=30, not_before=clock.t - 1)  # B began watching after A's read

    assert len(sky.calls) == 2


def test_an_unavailable_answer_is_never_shared(tmp_path: Path) -> None:
    sky, clock, a, b = _pair(tmp_path, DOWN, RECORDS)

    assert a.read(max_age=30, not_before=0) == DOWN
    clock.t += 1
    assert b.read(max_age=30, not_before=0) == RECORDS  # B tries for itself

    assert len(sky.calls) == 2


def test_an_answer_from_the_future_or_a_foreign_file_is_not_reused(tmp_path: Path) -> None:
    sky, clock, a, b = _pair(tmp_path, RECORDS)
    a.read(max_age=30, not_before=0)
    clock.t -= 5  # another clock behind: the stored answer looks newer than now
    b.read(max_age=30, not_before=0)
    store = tmp_path / "state" / "supervision" / "queue.json"
    store.write_text("{not json", encoding="utf-8")
    a.read(max_age=30, not_before=0)
    store.write_text(json.dumps({"schema": "something-else"}), encoding="utf-8")
    b.read(max_age=30, not_before=0)

    assert len(sky.calls) == 4


def test_stored_answer_private(tmp_path: Path) -> None:
    _, _, a, _ = _pair(tmp_path, RECORDS)
    a.read(max_age=30, not_before=0)
    directory = tmp_path / "state" / "supervision"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "queue.json").stat().st_mode) == 0o600


STATUSES = st.sampled_from(list(JobStatus))
TEXT = st.text(max_size=20)
RECORD = st.builds(
    QueueRecord,
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=0, max_value=50),
    TEXT,
    TEXT,
    STATUSES,
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
    st.none() | TEXT,
    st.none() | TEXT,
    st.none() | TEXT,
)
RESULT = st.builds(
    QueueResult,
    st.sampled_from(list(QueueVerdict)),
    st.lists(RECORD, max_size=5).map(tuple),
    st.sampled_from(list(ErrorKind)),
    TEXT,
)


@given(RESULT)
def test_encode_decode_round_trip(result: QueueResult) -> None:
    assert decode(json.loads(json.dumps(encode(result)))) == result


@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda k: k != "records"),
        st.integers() | st.text(max_size=8) | st.none(),
        max_size=6,
    ),
    st.lists(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8)), max_size=3),
)
def test_decode_of_a_malformed_answer_is_none_never_raises(
    data: dict[str, object], rows: list[dict[str, object]]
) -> None:
    schema = {"schema": "npa.skypilot.shared-queue.v1"}
    assert decode({**data, **schema}) is None  # no records
    bad_rows = {
        "verdict": "records",
        "error_kind": "none",
        "detail": "",
        "records": rows,
    }
    if rows:  # rows of up to 8-character keys can never name every QueueRecord field
        assert decode({**bad_rows, **schema}) is None


# -- processes racing for the same tick -----------------------------------------------------------
class FileCountingSky:
    """A queue read that appends to a file: counted across processes."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write("read\n")
        return RECORDS


def _supervisor(directory: str, log: str, barrier: Any) -> None:
    shared = SharedQueue(FileCountingSky(Path(log)), Path(directory), lambda: 5000.0)  # type: ignore[arg-type]
    barrier.wait()
    assert shared.read(max_age=30, not_before=0) == RECORDS


def test_concurrent_supervisor_processes_make_one_read(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    log = tmp_path / "reads.log"
    workers = [
        context.Process(target=_supervisor, args=(str(tmp_path / "sup"), str(log), barrier))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert log.read_text(encoding="utf-8").splitlines() == ["read"]
