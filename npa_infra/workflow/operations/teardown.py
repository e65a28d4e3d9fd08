"""``npa stack destroy``: the teardown order, with ``--cancel-runs`` (cli.md §6, §2.4).

The stack layer runs the terminal-run gate and the engine's destroy
(``stack.api.destroy``); cancelling a run is this layer's business
(``cancellation.cancel_run``: exact job ids only, polled until terminal, both
journaled), and so is opening SkyPilot for the controller's gate
(``controllercleanup``: the same gate as ``npa skypilot cleanup-controller``, on
the queue of every user, in the state directory the stack's outputs name).
With ``cancel_runs``, every run of the stack the gate names is cancelled and
waited for once the engine has been proven usable, then the gate is asked
again; a cancel that could not prove its jobs gone leaves the run active, so
the destroy stays refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from npa_infra.stack import api as stack_api
from npa_infra.stack import controllerdown
from npa_infra.stack.models import ControllerReport, DestroyReport, OutputEntry
from npa_infra.workflow.target.services import Services, silent

__all__ = ["destroy_stack"]


def _controller_gate(
    env: Mapping[str, str], services: Services, deadline_seconds: float
) -> stack_api.ControllerGate:
    def run(stack: str, outputs: dict[str, OutputEntry], yes: bool) -> ControllerReport:
        from npa_infra.workflow.operations import controllercleanup

        named = outputs.get("isolated_config_dir")
        given = services
        if given.isolated_dir is None and named is not None and isinstance(named.value, str):
            given = replace(services, isolated_dir=Path(named.value))  # the stack's own
        return controllercleanup.cleanup_controller(
            stack, env=env, yes=yes, deadline_seconds=deadline_seconds, services=given
        )

    return run


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
    services: Services | None = None,
    deadline_seconds: float = controllerdown.DEFAULT_DEADLINE,
) -> DestroyReport:
    """Gate, cancel when asked (``cancel_run`` replaces the real cancel in tests), the
    controller's queue gate (``services`` opens its SkyPilot), destroy.

    Raises:
        The errors of ``stack.api.destroy``; ConfigError or SkyPilotDriftError from
            opening SkyPilot for the controller's gate.
    """
    canceller = (cancel_run or _canceller(env)) if cancel_runs else None
    given = services or Services(progress=request.on_output or silent)
    return stack_api.destroy(
        request,
        env=env,
        yes=yes,
        exclude_protected=exclude_protected,
        cancel_run=canceller,
        engine_factory=engine_factory,
        controller_gate=_controller_gate(env, given, deadline_seconds),
    )
