"""The seam SkyPilot's text enters npa through: secret values masked, colour removed.

``Redacting`` wraps any ``SkyPilot``; every string of every answer (and every streamed
line) comes out without a registered secret value and without an escape sequence,
while enums, ids and argv pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from npa_infra.skypilot import redaction
from npa_infra.skypilot.models import (
    ApiRequest,
    ApiStatusResult,
    CancelResult,
    CommandResult,
    ErrorKind,
    JobStatus,
    LaunchResult,
    QueueRecord,
    QueueResult,
    QueueVerdict,
)

SECRET = "hunter2-canary"
ESCAPES = ("\x1b[31m", "\x1b[0m", "\x1b[?25l", "\x1b]8;;http://x\x1b\\", "\x1b]0;t\x07", "\x1b(B")


@given(
    st.lists(
        st.one_of(st.text(max_size=20), st.just(SECRET), st.sampled_from(ESCAPES)), max_size=12
    )
)
def test_redaction_clean_leaves_no_secret_and_no_escape(parts: list[str]) -> None:
    text = "".join(parts)
    cleaned = redaction.clean(text, (SECRET,))
    assert SECRET not in cleaned
    assert all(escape not in cleaned for escape in ESCAPES)


def test_redaction_clean_masks_the_longest_value_first() -> None:
    assert redaction.clean("a=abcd1234", ("abcd", "abcd1234")) == f"a={redaction.REDACTED}"


class _Echoing:
    """A SkyPilot that echoes the secret (and colour) in every text it answers."""

    binary = Path("/opt/sky")

    def __init__(self) -> None:
        self.echo = f"\x1b[31mvalue {SECRET}\x1b[0m"

    def _command(self) -> CommandResult:
        return CommandResult(("sky", "--secret", "NAME"), 1, self.echo, self.echo)

    def launch(
        self,
        task_yaml: Path,
        *,
        name: str,
        infra: str | None = None,
        secrets: Mapping[str, str] | None = None,
        on_started: Callable[[Any], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> LaunchResult:
        assert on_line is not None
        on_line(self.echo)
        return LaunchResult(False, None, ErrorKind.UNKNOWN, self.echo, self._command())

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        row = QueueRecord(7, 0, "job", "task", JobStatus.FAILED, failure_reason=self.echo)
        return QueueResult(QueueVerdict.RECORDS, (row,), ErrorKind.NONE, self.echo)

    def api_status(self, request_ids: Sequence[str] = ()) -> ApiStatusResult:
        return ApiStatusResult(True, (ApiRequest("r", "sky.jobs.launch", "FAILED"),), detail="x")

    def api_logs(self, request_id: str) -> CommandResult:
        return self._command()

    def cancel(self, job_ids: Sequence[int]) -> CancelResult:
        return CancelResult((), False, ErrorKind.UNKNOWN, self.echo, self._command())


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [text for item in value for text in _texts(item)]
    return []


def test_redaction_wrapped_answers_hold_no_secret_and_keep_their_types() -> None:
    sky = redaction.redacting(_Echoing())  # type: ignore[arg-type]  # the protocol's subset used
    lines: list[str] = []
    launched = sky.launch(
        Path("t.yaml"), name="job", secrets={"NAME": SECRET}, on_line=lines.append
    )
    answers = [launched, sky.queue(), sky.api_logs("r"), sky.cancel([7]), sky.api_status()]
    for answer in answers:
        assert not any(SECRET in t or "\x1b" in t for t in _texts(answer)), answer
    assert lines == [f"value {redaction.REDACTED}"]  # the streamed line too
    queue = answers[1]
    assert isinstance(queue, QueueResult) and queue.records[0].status is JobStatus.FAILED
    assert queue.records[0].job_id == 7 and queue.verdict is QueueVerdict.RECORDS
    assert launched.command.argv == ("sky", "--secret", "NAME")  # names pass unchanged
    assert sky.binary == Path("/opt/sky")  # what the drift gate reads is the inner one's
    assert redaction.redacting(sky) is sky  # one seam, never two
