"""The drift gate's pure decision: may a live action run this SkyPilot? (faults.md, drifted tools)

Every live action that runs the ``sky`` binary (submit and ``--resume-run``,
cancel, status when it reads the queue, teardown) first asks ``decide`` about
what ``livegate`` observed: the venv's installed distribution versions (read
from its dist-info metadata), who holds the local API server port, and which
static Nebius IAM token variables are exported. One ordered chain of early
returns; the first matching rule wins:

1. the venv's metadata could not be read (unknown is not absent) → refuse;
2. a venv with ``skypilot`` installed misses a pin (kubernetes client ≥ 36
   fails every ``pod_config`` validation and the controller retries forever;
   fastapi ≥ 0.120 kills the local API server at start) → refuse;
3. the API server port is held by another state directory, or by a listener
   we cannot attribute → refuse;
4. ``NEBIUS_IAM_TOKEN``/``NPA_NEBIUS_IAM_TOKEN`` is exported (its static token
   overrides the kubeconfig's refreshing plugin and expires mid-run) → warn;
5. the versions could not be checked at all (the binary is not in a venv, the
   venv holds no ``skypilot`` distribution, or an injected adapter has no
   binary) → ok, ``unverified``: ``npa skypilot status`` probes such a binary;
6. otherwise → ok.

Nothing here reads files, the environment or a clock: observations come in,
a ``Verdict`` goes out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from npa_infra.skypilot import pins, port

__all__ = [
    "BOOTSTRAP_COMMAND",
    "PORT_REMEDY",
    "STALE_TOKEN_VARS",
    "TOKEN_REMEDY",
    "Action",
    "Advisory",
    "Observation",
    "Reason",
    "VenvObservation",
    "VenvState",
    "decide",
    "token_advisory",
]

BOOTSTRAP_COMMAND = "npa skypilot bootstrap"
TOKEN_REMEDY = "unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN"
PORT_REMEDY = (
    "stop the other SkyPilot API server (`sky api stop` in its environment), "
    "or use the same isolated directory it uses"
)
STALE_TOKEN_VARS = ("NEBIUS_IAM_TOKEN", "NPA_NEBIUS_IAM_TOKEN")
GATED = tuple(pin.name for pin in pins.PINS)  # skypilot, kubernetes, fastapi, click


class VenvState(StrEnum):
    """What reading the binary's venv found."""

    READ = "read"  # a venv whose site-packages lists a skypilot distribution
    NOT_A_VENV = "not_a_venv"  # no pyvenv.cfg beside the binary: versions unknowable here
    NO_SKYPILOT = "no_skypilot"  # a venv without a skypilot distribution (not ours)
    NOT_INSPECTED = "not_inspected"  # an injected adapter: no binary to read
    UNREADABLE = "unreadable"  # a metadata file or directory could not be read


class Action(StrEnum):
    OK = "ok"
    WARN = "warn"
    REFUSE = "refuse"


class Reason(StrEnum):
    PINS_HOLD = "pins_hold"
    UNVERIFIED = "unverified"
    VENV_UNREADABLE = "venv_unreadable"
    PINS_BROKEN = "pins_broken"
    FOREIGN_API_SERVER = "foreign_api_server"
    STALE_IAM_TOKEN = "stale_iam_token"


@dataclass(frozen=True, slots=True)
class VenvObservation:
    """The binary's venv: ``versions`` maps each gated distribution to its version or None.

    A distribution missing from ``versions`` or mapped to None is authoritatively
    absent (the site-packages listing was read and holds no dist-info for it);
    anything unreadable makes the whole observation ``UNREADABLE``.
    """

    state: VenvState
    python: str | None = None
    versions: Mapping[str, str | None] = field(default_factory=dict)
    detail: str = ""  # where the observation came from (the venv path), or what failed


@dataclass(frozen=True, slots=True)
class Observation:
    venv: VenvObservation
    api_server: port.PortCheck | None  # None: not checked (remote endpoint, injected adapter)
    token_vars: tuple[str, ...]  # the names of the IAM token variables set non-empty


@dataclass(frozen=True, slots=True)
class Advisory:
    """A warning the action goes on after; printed on stderr and listed in JSON."""

    reason: Reason
    message: str
    remedy: str

    def to_json(self) -> dict[str, str]:
        return {"reason": self.reason.value, "message": self.message, "remedy": self.remedy}

    def text(self) -> str:
        return f"Warning: {self.message}. Hint: {self.remedy}"


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: Reason
    message: str = ""
    remedy: str = ""
    findings: tuple[str, ...] = ()

    @property
    def advisories(self) -> tuple[Advisory, ...]:
        if self.action is not Action.WARN:
            return ()
        return (Advisory(self.reason, self.message, self.remedy),)


def token_advisory(token_vars: tuple[str, ...]) -> Advisory | None:
    """The stale-token warning for the names set, or None; values are never seen here."""
    if not token_vars:
        return None
    return Advisory(
        Reason.STALE_IAM_TOKEN,
        f"{', '.join(token_vars)} is set: a static IAM token overrides the kubeconfig's "
        "refreshing credential plugin and expires during long runs",
        TOKEN_REMEDY,
    )


def _owner(check: port.PortCheck) -> str:
    if check.pid is None:
        return "an unidentified process"
    return f"pid {check.pid} (HOME={check.home}, SKYPILOT_USER_ID={check.user_id})"


def decide(observation: Observation) -> Verdict:
    """The verdict for one live action; the first matching rule of the module docstring wins."""
    venv = observation.venv
    # rule 1: unknown is not absent (faults.md invariant 4): fail closed, bootstrap repairs
    if venv.state is VenvState.UNREADABLE:
        return Verdict(
            Action.REFUSE,
            Reason.VENV_UNREADABLE,
            f"the SkyPilot venv's package metadata cannot be read ({venv.detail})",
            BOOTSTRAP_COMMAND,
        )
    # rule 2: skypilot-0.12.md §8.1, §8.2: the pins the version gate checks on every use
    if venv.state is VenvState.READ:
        versions = {"python": venv.python, **{n: venv.versions.get(n) for n in GATED}}
        findings = tuple(f.message for f in pins.check_versions(versions))
        if findings:
            return Verdict(
                Action.REFUSE,
                Reason.PINS_BROKEN,
                f"the SkyPilot venv {venv.detail} misses its pins: {'; '.join(findings)}",
                BOOTSTRAP_COMMAND,
                findings,
            )
    # rule 3: skypilot-0.12.md §7.3: another HOME's server has another user and database
    server = observation.api_server
    if server is not None and not server.safe:
        return Verdict(
            Action.REFUSE,
            Reason.FOREIGN_API_SERVER,
            f"127.0.0.1:{server.port} is held by {_owner(server)}, "
            "not by this run's SkyPilot state directory",
            PORT_REMEDY,
        )
    # rule 4: verify's stale_iam_token check, now before every live action
    advisory = token_advisory(observation.token_vars)
    if advisory is not None:
        return Verdict(Action.WARN, advisory.reason, advisory.message, advisory.remedy)
    # rule 5: nothing to read the versions from; never a refusal (module docstring)
    if venv.state is not VenvState.READ:
        return Verdict(Action.OK, Reason.UNVERIFIED, venv.detail)
    return Verdict(Action.OK, Reason.PINS_HOLD)
