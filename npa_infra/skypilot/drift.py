"""The drift gate's pure decision: may a live action run this SkyPilot? (faults.md, drifted tools)

Every live action that runs the ``sky`` binary (submit and ``--resume-run``,
cancel, status when it reads the queue, teardown) first asks ``decide`` about
what ``livegate`` observed: the distribution versions the binary really
imports (read from the dist-info metadata on its interpreter's import path,
whatever the install layout: ``venvmeta``), who holds the local API server
port, and which static Nebius IAM token variables are exported. One ordered
chain of early returns; the first matching rule wins:

1. the metadata could not be read (unknown is not absent) → refuse;
2. the binary names no Python we can read (a shell wrapper, a compiled
   binary, a missing interpreter), or its import path holds no ``skypilot``
   distribution: what it would run is unknown → refuse;
3. the installed versions miss a pin (kubernetes client ≥ 36 fails every
   ``pod_config`` validation and the controller retries forever; fastapi ≥
   0.120 kills the local API server at start) → refuse;
4. the API server port is held by another state directory, or by a listener
   we cannot attribute → refuse;
5. ``NEBIUS_IAM_TOKEN``/``NPA_NEBIUS_IAM_TOKEN`` is exported (its static token
   overrides the kubeconfig's refreshing plugin and expires mid-run) → warn;
6. an injected adapter has no binary to read → ok, ``unverified``;
7. otherwise → ok.

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

    READ = "read"  # the binary's import path lists a skypilot distribution
    NO_INTERPRETER = "no_interpreter"  # the binary names no Python whose path can be read
    NO_SKYPILOT = "no_skypilot"  # the import path was read and holds no skypilot
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
    VENV_UNKNOWN = "venv_unknown"
    PINS_BROKEN = "pins_broken"
    FOREIGN_API_SERVER = "foreign_api_server"
    STALE_IAM_TOKEN = "stale_iam_token"


@dataclass(frozen=True, slots=True)
class VenvObservation:
    """What the binary imports: ``versions`` maps each gated distribution to its version or None.

    A distribution missing from ``versions`` or mapped to None is authoritatively
    absent (every directory of the import path was listed and holds no dist-info
    for it); anything unreadable makes the whole observation ``UNREADABLE``.
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
            f"the SkyPilot install's package metadata cannot be read ({venv.detail})",
            BOOTSTRAP_COMMAND,
        )
    # rule 2: no layout gets past the gate unread (issue 24): what it would import is unknown
    if venv.state in (VenvState.NO_INTERPRETER, VenvState.NO_SKYPILOT):
        return Verdict(
            Action.REFUSE,
            Reason.VENV_UNKNOWN,
            f"cannot tell which SkyPilot versions the binary runs: {venv.detail}",
            BOOTSTRAP_COMMAND,
        )
    # rule 3: skypilot-0.12.md §8.1, §8.2: the pins the version gate checks on every use
    if venv.state is VenvState.READ:
        versions = {"python": venv.python, **{n: venv.versions.get(n) for n in GATED}}
        findings = tuple(f.message for f in pins.check_versions(versions))
        if findings:
            return Verdict(
                Action.REFUSE,
                Reason.PINS_BROKEN,
                f"the SkyPilot install {venv.detail} misses its pins: {'; '.join(findings)}",
                BOOTSTRAP_COMMAND,
                findings,
            )
    # rule 4: skypilot-0.12.md §7.3: another HOME's server has another user and database
    server = observation.api_server
    if server is not None and not server.safe:
        return Verdict(
            Action.REFUSE,
            Reason.FOREIGN_API_SERVER,
            f"127.0.0.1:{server.port} is held by {_owner(server)}, "
            "not by this run's SkyPilot state directory",
            PORT_REMEDY,
        )
    # rule 5: verify's stale_iam_token check, now before every live action
    advisory = token_advisory(observation.token_vars)
    if advisory is not None:
        return Verdict(Action.WARN, advisory.reason, advisory.message, advisory.remedy)
    # rule 6: an injected adapter: there is no binary to read
    if venv.state is VenvState.NOT_INSPECTED:
        return Verdict(Action.OK, Reason.UNVERIFIED, venv.detail)
    return Verdict(Action.OK, Reason.PINS_HOLD)
