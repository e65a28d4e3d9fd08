"""The one seam where SkyPilot's text enters npa: secret values masked, colour removed.

``sky`` prints what it likes: a launch error can echo a task's environment (and
with it a ``--secret-env`` value), and every message may carry terminal colour
codes. ``Redacting`` wraps any ``SkyPilot`` and cleans every text of every
answer before a caller sees it: each registered secret value becomes
``REDACTED`` (longest first, so a value that contains another is masked whole)
and ANSI escape sequences are removed (``classify.strip_ansi``). A line
streamed to ``on_line`` is cleaned the same way before it is handed over.

So third-party text reaches the journal, the logs, ``--json`` and exception
text already clean, and the journal's secret guard (``journal.guard``), which
refuses a secret value as a bug of the caller, keeps guarding npa's own data
without ever tripping on SkyPilot's. The values of a ``launch``'s own
``secrets`` are registered for every later call too: the job's environment
holds them, so its queue rows or request logs may echo them.

Enums, numbers and argv (which carries secret names, never values) pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from npa_infra.skypilot import classify
from npa_infra.skypilot.models import CommandResult

if TYPE_CHECKING:
    from npa_infra.runs.children import ChildIdentity
    from npa_infra.skypilot.base import SkyPilot
    from npa_infra.skypilot.checkoutput import CheckResult
    from npa_infra.skypilot.models import (
        ApiStatusResult,
        CancelResult,
        DownResult,
        LaunchResult,
        QueueResult,
    )

__all__ = ["MIN_SECRET", "REDACTED", "Redacting", "clean", "redacting"]

REDACTED = "<redacted>"
MIN_SECRET = 4  # journal.guard.MIN_SECRET_LENGTH: shorter values would match ordinary text
T = TypeVar("T")


def _usable(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({v for v in values if len(v) >= MIN_SECRET}, key=len, reverse=True))


def clean(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with every value of ``secrets`` replaced by ``REDACTED`` (the longest first,
    so a value inside another is masked whole) and ANSI removed."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return classify.strip_ansi(text) if "\x1b" in text else text


def _scrub(value: T, secrets: Sequence[str]) -> T:
    """Every string inside ``value`` (a NamedTuple answer, tuples of them) cleaned."""
    return cast(T, _scrubbed(value, secrets))  # each answer keeps its own type


def _scrubbed(value: object, secrets: Sequence[str]) -> object:
    if isinstance(value, Enum) or not isinstance(value, str | tuple):
        return value
    if isinstance(value, str):
        return clean(value, secrets)
    if isinstance(value, CommandResult):  # argv names secrets, never holds a value
        return value._replace(
            stdout=clean(value.stdout, secrets), stderr=clean(value.stderr, secrets)
        )
    items = [_scrubbed(item, secrets) for item in value]
    make = getattr(value, "_make", None)  # a NamedTuple
    return make(items) if make is not None else tuple(items)


class Redacting:
    """A ``SkyPilot`` whose every answer is cleaned (the module docstring)."""

    def __init__(self, inner: SkyPilot, secrets: Iterable[str] = ()) -> None:
        self.inner = inner
        self._secrets = _usable(secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def register(self, values: Iterable[str]) -> None:
        """Mask ``values`` too, in every later answer."""
        self._secrets = _usable((*self._secrets, *values))

    def _line(self, on_line: Callable[[str], None] | None) -> Callable[[str], None] | None:
        if on_line is None:
            return None
        return lambda line: on_line(clean(line, self._secrets))

    def version(self) -> str | None:
        return self.inner.version()

    def launch(
        self,
        task_yaml: Path,
        *,
        name: str,
        infra: str | None = None,
        secrets: Mapping[str, str] | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> LaunchResult:
        self.register((secrets or {}).values())  # before the child can print one
        result = self.inner.launch(
            task_yaml,
            name=name,
            infra=infra,
            secrets=secrets,
            on_started=on_started,
            on_line=self._line(on_line),
        )
        return _scrub(result, self._secrets)

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult:
        return _scrub(self.inner.queue(all_users=all_users, verbose=verbose), self._secrets)

    def api_status(self, request_ids: Sequence[str] = ()) -> ApiStatusResult:
        return _scrub(self.inner.api_status(request_ids), self._secrets)

    def api_logs(self, request_id: str) -> CommandResult:
        return _scrub(self.inner.api_logs(request_id), self._secrets)

    def cancel(self, job_ids: Sequence[int]) -> CancelResult:
        return _scrub(self.inner.cancel(job_ids), self._secrets)

    def logs(
        self,
        job_id: int,
        *,
        controller: bool = False,
        follow: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult:
        result = self.inner.logs(
            job_id, controller=controller, follow=follow, on_line=self._line(on_line)
        )
        return _scrub(result, self._secrets)

    def down_controller(self) -> DownResult:
        return _scrub(self.inner.down_controller(), self._secrets)

    def check(self, infra: str = "kubernetes") -> CheckResult:
        return _scrub(self.inner.check(infra), self._secrets)

    def __getattr__(self, name: str) -> object:
        # what is not part of the protocol (``binary`` for the drift gate) is the inner one's
        if name == "inner":  # not set yet (a copy being built): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)


def redacting(sky: SkyPilot, secrets: Iterable[str] = ()) -> Redacting:
    """``sky`` behind the seam, masking ``secrets`` as well (one wrapper, never two)."""
    if isinstance(sky, Redacting):
        sky.register(secrets)
        return sky
    return Redacting(sky, secrets)
