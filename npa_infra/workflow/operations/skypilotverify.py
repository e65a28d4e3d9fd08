"""``npa skypilot verify``: ``skypilot.verify``'s checks on the SDK's adapters (issue 17).

``skypilot.verify`` decides; this module gives it the world. The cluster, the
clock and the operator's tool lookup come from ``Services``; SkyPilot's own
``sky check kubernetes`` runs where a submit of the same selection would run
``sky``:

- the state directory: ``Services.isolated_dir``, else the project's state
  directory, else the stack file's ``npa-infra:stateDir``, else the one the
  configuration resolves for the stack (``controllercleanup.state_dir``);
- prepared as a submit prepares it (``IsolatedDir.prepare``: the kubeconfig
  link, the generated config that allows exactly this context, the stable
  controller identity; a directory another stack owns is refused, and that
  refusal is the check's finding);
- ``Services.sky`` behind the drift gate (``adapters.gated_sky``), so verify
  never reaches a drifted SkyPilot venv or another state's API server.

Nothing here raises for an expected problem: a refusal before ``sky`` runs is
reported in ``sky_check_kubernetes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from npa_infra.errors import NpaError, StackConfigError
from npa_infra.workflow.execution import adapters
from npa_infra.workflow.operations import controllercleanup
from npa_infra.workflow.target import stackbinding
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    from npa_infra.kube.readiness import ReadinessProgress
    from npa_infra.skypilot.checkoutput import CheckResult
    from npa_infra.skypilot.isolation import IsolatedDir
    from npa_infra.skypilot.verify import VerifyReport
    from npa_infra.workflow.target.stackfile import StackSettings

__all__ = ["verify"]


def _state_dir(
    stack: str | None, state_dir: str | None, env: Mapping[str, str], services: Services
) -> IsolatedDir:
    from npa_infra import config as npa_config
    from npa_infra.skypilot.isolation import IsolatedDir, resolve_isolated_dir

    if services.isolated_dir is not None:
        return IsolatedDir(services.isolated_dir)
    if state_dir:
        return IsolatedDir(Path(state_dir).expanduser())
    if stack:
        return controllercleanup.state_dir(stack, env, services)[0]
    return resolve_isolated_dir(None, env, npa_config.load_config(env), None)


def _stack_settings(stack: str | None) -> StackSettings | None:
    """The stack file's settings (its controller block), as a submit reads them; None without one.

    Raises:
        StackConfigError: the file exists but a key is wrong (a submit would refuse too).
    """
    from npa_infra.errors import ConfigError
    from npa_infra.workflow.target import stackfile

    if not stack:
        return None
    try:
        return stackfile.read_stack(stack, Path.cwd())
    except StackConfigError:
        raise
    except ConfigError:
        return None


def verify(
    context: str,
    *,
    env: Mapping[str, str],
    services: Services,
    kubeconfig_path: Path | None = None,
    stack: str | None = None,
    state_dir: str | None = None,
    sky_bin: str | None = None,
    on_sample: Callable[[ReadinessProgress], None] | None = None,
) -> VerifyReport:
    """Every check of ``npa skypilot verify`` against ``context``; never raises for a problem.

    ``stack`` and ``state_dir`` are the selection's (``-s``/``-p``): whose SkyPilot
    state and config the checks use.
    """
    from npa_infra.skypilot import status
    from npa_infra.skypilot import verify as skyverify

    isolated: IsolatedDir | None = None
    unresolved: NpaError | None = None
    try:
        isolated = _state_dir(stack, state_dir, env, services)
    except NpaError as exc:  # an unreadable configuration or stack file: the check says so
        unresolved = exc

    def sky_check() -> CheckResult:
        if isolated is None:
            raise unresolved or NpaError("no SkyPilot state directory")
        controller = stackbinding.controller_settings(_stack_settings(stack))
        isolated.prepare(env, context=context, controller=controller, stack=stack)
        sky = adapters.gated_sky(services, isolated, env, sky_bin)
        return sky.check("kubernetes")

    return skyverify.verify(
        context,
        kubeconfig_path=kubeconfig_path,
        stack=stack,
        sky_bin=sky_bin,
        env=env,
        cluster_factory=services.cluster,
        status_probe=lambda environ: status.status(sky_bin, environ, port_check=services.api_ports),
        clock=services.clock.now,
        sleep=services.clock.sleep,
        sky_check=sky_check,
        which=services.which,
        state_dir=isolated.root if isolated is not None else None,
        on_sample=on_sample,
    )
