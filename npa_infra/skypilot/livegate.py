"""The drift gate before every live action that runs ``sky`` (faults.md, drifted tools).

Submit and ``--resume-run``, cancel, status when it reads the queue
(all through ``workflow.execution.adapters.open_adapters``) and the controller teardown
(``stack.providers``) call ``enforce`` once the binary is resolved and before
anything is journaled or run. It gathers the observations of ``drift``: the
versions the binary imports (``venvmeta``: its shebang's interpreter, that
interpreter's import path under the environment of the ``sky`` calls, the
dist-info metadata there; cached per binary), the
owner of the local API server ports (``port.check_port``, as ``SkyCli``
checks them before its first call), and which IAM token variables are set
(names only: a value is never read into anything that is printed). A
refusal raises ``SkyPilotDriftError`` with the remedy; a warning comes back
in the verdict for the caller's result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from npa_infra import config as npa_config
from npa_infra.errors import SkyPilotDriftError
from npa_infra.skypilot import drift, port, venvmeta

__all__ = ["PortChecker", "Probes", "enforce", "observe", "token_vars"]

PortChecker = port.PortChecker


def token_vars(env: Mapping[str, str]) -> tuple[str, ...]:
    """The names of the static IAM token variables set non-empty in ``env``."""
    return tuple(name for name in drift.STALE_TOKEN_VARS if env.get(name))


def _api_server(
    sky_env: Mapping[str, str], api_port: int, check: PortChecker
) -> port.PortCheck | None:
    """The first unsafe listener on the two fixed ports, else the API port's check."""
    if sky_env.get("SKYPILOT_API_SERVER_ENDPOINT"):
        return None  # a remote API server: the local ports are not used (skypilot-0.12.md §7.3)
    first = check(api_port, sky_env)
    if not first.safe:
        return first
    extra = check(port.EXTRA_PORT, sky_env)
    return first if extra.safe else extra


@dataclass(frozen=True, slots=True)
class Probes:
    """How the gate looks: the API port, the port checker and the METADATA reader (tests)."""

    api_port: int = port.API_PORT
    port_check: PortChecker = port.check_port
    reader: venvmeta.MetadataReader = venvmeta.read_headers


def observe(
    binary: Path | None,
    env: Mapping[str, str],
    *,
    sky_env: Mapping[str, str] | None,
    probes: Probes = Probes(),
) -> drift.Observation:
    """What the gate decides on; ``binary`` None (an injected adapter) reads no install.

    ``sky_env`` is the environment of the ``sky`` calls (the isolated
    directory's): its HOME and SKYPILOT_USER_ID are what a listener must
    have to be ours. None skips the port check (the caller checks nothing
    through this adapter, as a test double's SkyPilot does).
    """
    if binary is None:
        venv = drift.VenvObservation(
            drift.VenvState.NOT_INSPECTED, detail="an injected SkyPilot adapter"
        )
    else:
        cache_dir = npa_config.npa_home(env) / "cache"
        # the import path is the one of the `sky` calls: their HOME holds the user site
        runs_with = sky_env if sky_env is not None else env
        venv = venvmeta.observe(binary, cache_dir, runs_with, reader=probes.reader)
    server = None if sky_env is None else _api_server(sky_env, probes.api_port, probes.port_check)
    return drift.Observation(venv, server, token_vars(env))


def enforce(
    binary: Path | None,
    env: Mapping[str, str],
    *,
    sky_env: Mapping[str, str] | None,
    probes: Probes = Probes(),
) -> drift.Verdict:
    """Observe, decide, and refuse when the verdict says so; else return it (ok or warn).

    Raises:
        SkyPilotDriftError: the install misses its pins, cannot be read or names no
            readable Python, or another state directory's API server holds the port;
            nothing has run yet.
    """
    observation = observe(binary, env, sky_env=sky_env, probes=probes)
    verdict = drift.decide(observation)
    if verdict.action is drift.Action.REFUSE:
        server = observation.api_server
        raise SkyPilotDriftError(
            f"{verdict.message}; npa ran nothing",
            remedy=verdict.remedy,
            details={
                "reason": verdict.reason.value,
                "sky_bin": str(binary) if binary else None,
                "findings": list(verdict.findings),
                "api_server": None
                if server is None
                else {"port": server.port, "ownership": server.ownership.value, "pid": server.pid},
            },
        )
    return verdict
