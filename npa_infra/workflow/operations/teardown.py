"""``npa stack destroy``: the teardown order, with ``--cancel-runs`` (cli.md §6, §2.4).

The stack layer runs the terminal-run gate and the engine's destroy
(``stack.api.destroy``); cancelling a run is this layer's business
(``cancellation.cancel_run``: exact job ids only, polled until terminal, both
journaled). With ``cancel_runs``, every run the gate names is cancelled and
waited for, then the gate is asked again; a cancel that could not prove its
jobs gone leaves the run active, so the destroy stays refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from npa_infra.stack import api as stack_api
from npa_infra.stack.models import DestroyReport

__all__ = ["destroy_stack"]


def _canceller(env: Mapping[str, str]) -> Callable[[str], str]:
    def cancel(run_id: str) -> str:
        from npa_infra.workflow.operations import cancellation

        return cancellation.cancel_run(run_id, env=env).outcome

    return cancel


def destroy_stack(
    request: stack_api.StackRequest,
    *,
    env: Mapping[str, str],
    yes: bool,
    exclude_protected: bool = False,
    cancel_runs: bool = False,
    cancel_run: Callable[[str], str] | None = None,
    engine_factory: stack_api.EngineFactory | None = None,
) -> DestroyReport:
    """Gate, cancel when asked (``cancel_run`` replaces the real cancel in tests), destroy.

    Raises:
        The errors of ``stack.api.destroy``.
    """
    canceller = (cancel_run or _canceller(env)) if cancel_runs else None
    return stack_api.destroy(
        request,
        env=env,
        yes=yes,
        exclude_protected=exclude_protected,
        cancel_run=canceller,
        engine_factory=engine_factory,
    )
