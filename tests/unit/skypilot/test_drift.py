"""The drift gate's pure decision (``skypilot.drift.decide``): rule tables and properties."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given

from npa_infra.skypilot import drift, pins, port
from tests.strategies import drift_observations

GOOD = {"skypilot": "0.12.2", "kubernetes": "35.0.0", "fastapi": "0.119.1", "click": "8.1.8"}
FREE = port.PortCheck(port.API_PORT, port.Ownership.FREE)
OURS = port.PortCheck(port.API_PORT, port.Ownership.OURS, 7, "/iso/home", "npa-1")
FOREIGN = port.PortCheck(port.API_PORT, port.Ownership.FOREIGN, 42, "/home/other", "npa-2")
UNKNOWN = port.PortCheck(port.EXTRA_PORT, port.Ownership.UNKNOWN)
TOKEN = ("NEBIUS_IAM_TOKEN",)


def _venv(
    state: drift.VenvState = drift.VenvState.READ,
    python: str | None = "3.11.7",
    **versions: str | None,
) -> drift.VenvObservation:
    merged: Mapping[str, str | None] = {**GOOD, **versions}
    return drift.VenvObservation(state, python, merged, "/opt/sky-venv")


def _obs(
    venv: drift.VenvObservation | None = None,
    server: port.PortCheck | None = FREE,
    tokens: tuple[str, ...] = (),
) -> drift.Observation:
    return drift.Observation(venv or _venv(), server, tokens)


CASES = {
    "pins-hold": (_obs(), drift.Action.OK, drift.Reason.PINS_HOLD),
    "our-server": (_obs(server=OURS), drift.Action.OK, drift.Reason.PINS_HOLD),
    "ports-unchecked": (_obs(server=None), drift.Action.OK, drift.Reason.PINS_HOLD),
    "kubernetes-36": (_obs(_venv(kubernetes="36.0.0")), drift.Action.REFUSE, "pins_broken"),
    "kubernetes-37": (_obs(_venv(kubernetes="37.0.0")), drift.Action.REFUSE, "pins_broken"),
    "kubernetes-32": (_obs(_venv(kubernetes="32.0.0")), drift.Action.REFUSE, "pins_broken"),
    "kubernetes-missing": (_obs(_venv(kubernetes=None)), drift.Action.REFUSE, "pins_broken"),
    "fastapi-0.120": (_obs(_venv(fastapi="0.120.0")), drift.Action.REFUSE, "pins_broken"),
    "click-8.2": (_obs(_venv(click="8.2.0")), drift.Action.REFUSE, "pins_broken"),
    "skypilot-0.12.3": (_obs(_venv(skypilot="0.12.3")), drift.Action.REFUSE, "pins_broken"),
    "python-3.13": (_obs(_venv(python="3.13.0")), drift.Action.REFUSE, "pins_broken"),
    "python-unknown": (_obs(_venv(python=None)), drift.Action.REFUSE, "pins_broken"),
    "unreadable": (
        _obs(_venv(drift.VenvState.UNREADABLE)),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNREADABLE,
    ),
    "foreign-server": (_obs(server=FOREIGN), drift.Action.REFUSE, "foreign_api_server"),
    "unattributed-server": (_obs(server=UNKNOWN), drift.Action.REFUSE, "foreign_api_server"),
    "token": (_obs(tokens=TOKEN), drift.Action.WARN, drift.Reason.STALE_IAM_TOKEN),
    # issue 24: a layout the gate cannot read is refused, never waved through
    "no-interpreter": (
        _obs(_venv(drift.VenvState.NO_INTERPRETER, kubernetes="37.0.0")),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNKNOWN,
    ),
    "no-interpreter-good-pins": (
        _obs(_venv(drift.VenvState.NO_INTERPRETER)),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNKNOWN,
    ),
    "path-without-skypilot": (
        _obs(_venv(drift.VenvState.NO_SKYPILOT, kubernetes="37.0.0")),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNKNOWN,
    ),
    "injected-adapter": (
        _obs(_venv(drift.VenvState.NOT_INSPECTED), server=None),
        drift.Action.OK,
        drift.Reason.UNVERIFIED,
    ),
    # the order of the rules: the first that matches wins
    "unreadable-before-foreign": (
        _obs(_venv(drift.VenvState.UNREADABLE), server=FOREIGN, tokens=TOKEN),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNREADABLE,
    ),
    "pins-before-foreign": (
        _obs(_venv(kubernetes="37.0.0"), server=FOREIGN, tokens=TOKEN),
        drift.Action.REFUSE,
        drift.Reason.PINS_BROKEN,
    ),
    "foreign-before-token": (
        _obs(server=FOREIGN, tokens=TOKEN),
        drift.Action.REFUSE,
        drift.Reason.FOREIGN_API_SERVER,
    ),
    "unknown-before-foreign": (
        _obs(_venv(drift.VenvState.NO_SKYPILOT), server=FOREIGN, tokens=TOKEN),
        drift.Action.REFUSE,
        drift.Reason.VENV_UNKNOWN,
    ),
    "token-before-unverified": (
        _obs(_venv(drift.VenvState.NOT_INSPECTED), tokens=("NPA_NEBIUS_IAM_TOKEN",)),
        drift.Action.WARN,
        drift.Reason.STALE_IAM_TOKEN,
    ),
}


@pytest.mark.parametrize(("observation", "action", "reason"), CASES.values(), ids=list(CASES))
def test_decide_rule_table_first_match_wins(
    observation: drift.Observation, action: drift.Action, reason: str
) -> None:
    verdict = drift.decide(observation)
    assert (verdict.action, verdict.reason) == (action, drift.Reason(reason))


@pytest.mark.parametrize(
    ("versions", "package"),
    [({"kubernetes": "37.0.0"}, "kubernetes"), ({"fastapi": "0.120.0"}, "fastapi")],
    ids=["kubernetes", "fastapi"],
)
def test_decide_broken_pin_names_package_and_bootstrap_remedy(
    versions: dict[str, str], package: str
) -> None:
    venv = drift.VenvObservation(
        drift.VenvState.READ, "3.11.7", {**GOOD, **versions}, "/opt/sky-venv"
    )
    verdict = drift.decide(_obs(venv))
    assert verdict.remedy == "npa skypilot bootstrap"
    assert len(verdict.findings) == 1
    assert verdict.findings[0].startswith(f"{package} {versions[package]} is outside")
    assert "/opt/sky-venv" in verdict.message
    assert verdict.advisories == ()


def test_decide_foreign_server_names_owner_and_port_remedy() -> None:
    verdict = drift.decide(_obs(server=FOREIGN))
    assert "127.0.0.1:46580" in verdict.message and "pid 42" in verdict.message
    assert "/home/other" in verdict.message
    assert verdict.remedy == drift.PORT_REMEDY


def test_decide_token_warning_names_variables_and_unset_remedy() -> None:
    verdict = drift.decide(_obs(tokens=("NEBIUS_IAM_TOKEN", "NPA_NEBIUS_IAM_TOKEN")))
    (advisory,) = verdict.advisories
    assert advisory.remedy == "unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN"
    assert "NEBIUS_IAM_TOKEN, NPA_NEBIUS_IAM_TOKEN is set" in advisory.message
    assert advisory.to_json() == {
        "reason": "stale_iam_token",
        "message": advisory.message,
        "remedy": advisory.remedy,
    }
    assert advisory.text().startswith("Warning: ") and advisory.text().endswith(advisory.remedy)


def test_decide_unknown_install_names_what_was_read_and_bootstrap_remedy() -> None:
    venv = drift.VenvObservation(
        drift.VenvState.NO_SKYPILOT, detail="/opt/conda/bin/python imports no skypilot"
    )
    verdict = drift.decide(_obs(venv))
    assert verdict.remedy == "npa skypilot bootstrap"
    assert "/opt/conda/bin/python imports no skypilot" in verdict.message


def test_token_advisory_no_names_none() -> None:
    assert drift.token_advisory(()) is None


@given(drift_observations())
def test_decide_any_observation_one_verdict_in_rule_order(observation: drift.Observation) -> None:
    verdict = drift.decide(observation)
    venv, server = observation.venv, observation.api_server
    versions = {"python": venv.python, **{n: venv.versions.get(n) for n in drift.GATED}}
    broken = venv.state is drift.VenvState.READ and bool(pins.check_versions(versions))
    unsafe = server is not None and not server.safe
    unknown = venv.state in (
        drift.VenvState.UNREADABLE,
        drift.VenvState.NO_INTERPRETER,
        drift.VenvState.NO_SKYPILOT,
    )
    refuse = unknown or broken or unsafe
    assert (verdict.action is drift.Action.REFUSE) is refuse
    if refuse:
        assert verdict.remedy in (drift.BOOTSTRAP_COMMAND, drift.PORT_REMEDY)
        assert verdict.advisories == ()
    elif observation.token_vars:
        assert verdict.action is drift.Action.WARN
        assert [a.remedy for a in verdict.advisories] == [drift.TOKEN_REMEDY]
    else:
        assert verdict.action is drift.Action.OK and verdict.advisories == ()
