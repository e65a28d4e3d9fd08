"""The one place the CLI builds the SDK's adapters (``workflow.target.services.Services``).

An embedding caller, or a test, puts a ``Services`` in the root click context
(``CliRunner.invoke(app, args, obj=Services(...))``); every command that reaches
an adapter takes its ``typer.Context`` and passes ``build(ctx.obj)`` to its SDK
function, so a command run from the shell gets the real adapters. The SDK is
imported here only when a command runs,
so ``npa --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_infra.workflow.target.services import Services

__all__ = ["build"]


def build(
    obj: object,
    *,
    progress: Callable[[str], None] | None = None,
    waits: Callable[[str], None] | None = None,
) -> Services:
    """``obj`` (the root context's object) if it is a ``Services``, else the real adapters;
    with ``progress`` if given (every progress line, the waits too), or only the real
    ``sky``'s waits (what a call waits for, and its deadline) on ``waits``."""
    from npa_infra.workflow.target import services

    base = obj if isinstance(obj, services.Services) else services.Services()
    if progress is None and waits is None:
        return base
    return base.with_progress(progress, waits=waits or progress)
