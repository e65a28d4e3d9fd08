"""Run ids (cli.md §0): the pattern, fresh ids, and plan-time defaults."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npa_infra.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["RUN_ID", "check_run_id", "fresh_run_id"]

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def check_run_id(run_id: str) -> str:
    if not RUN_ID.match(run_id):
        raise UsageError(
            f"invalid run id {run_id!r}",
            remedy="use 1-96 characters: a letter or digit, then letters, digits, '.', '_' or '-'",
        )
    return run_id


def fresh_run_id(workflow: str, now: datetime | None = None, token: str | None = None) -> str:
    """``<slug>-<YYYYmmddTHHMMSSffffffZ>-<6hex>``; clock and token are injectable."""
    import secrets  # only fresh ids need them; keeps validate-spec start-up small
    from datetime import UTC, datetime

    moment = (now or datetime.now(UTC)).astimezone(UTC)
    slug = re.sub(r"[^a-z0-9-]+", "-", workflow.lower()).strip("-")[:48] or "run"
    return f"{slug}-{moment.strftime('%Y%m%dT%H%M%S%fZ')}-{token or secrets.token_hex(3)}"
