"""The one interface the orchestration layer uses to talk to SkyPilot."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from npa_infra.runs.children import ChildIdentity
from npa_infra.skypilot.checkoutput import CheckResult
from npa_infra.skypilot.models import (
    ApiStatusResult,
    CancelResult,
    CommandResult,
    DownResult,
    LaunchResult,
    QueueResult,
)

__all__ = ["SkyPilot"]


class SkyPilot(Protocol):
    def version(self) -> str | None: ...

    def launch(
        self,
        task_yaml: Path,
        *,
        name: str,
        infra: str | None = None,
        secrets: Mapping[str, str] | None = None,
        on_started: Callable[[ChildIdentity], None] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> LaunchResult: ...

    def queue(self, *, all_users: bool = False, verbose: bool = False) -> QueueResult: ...

    def api_status(self, request_ids: Sequence[str] = ()) -> ApiStatusResult: ...

    def api_logs(self, request_id: str) -> CommandResult: ...

    def cancel(self, job_ids: Sequence[int]) -> CancelResult: ...

    def logs(
        self,
        job_id: int,
        *,
        controller: bool = False,
        follow: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult: ...

    def down_controller(self) -> DownResult: ...

    def check(self, infra: str = "kubernetes") -> CheckResult: ...
