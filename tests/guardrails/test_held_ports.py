"""The suite's proof that no test needs SkyPilot's fixed ports free (issue 31).

``tests/support/heldports.py`` keeps an unrelated process listening on
127.0.0.1:46580 and 50011 for the whole session; these tests fail if that proof
silently stops holding (the listener gone, a port free, or the listener mistaken
for a SkyPilot state of ours).
"""

from __future__ import annotations

import os

import pytest

from npa_infra.skypilot import port
from tests.support.heldports import UNRELATED_HOME, HeldPorts


@pytest.mark.parametrize("number", [port.API_PORT, port.EXTRA_PORT], ids=["api", "extra"])
def test_held_ports_fixed_port_is_held_by_something_not_ours(
    held_ports: HeldPorts, number: int
) -> None:
    found = port.check_port(number, {"HOME": os.environ.get("HOME", ""), "SKYPILOT_USER_ID": ""})

    assert found.ownership in (port.Ownership.FOREIGN, port.Ownership.UNKNOWN), found
    assert not found.safe
    if number in held_ports.bound:  # a session's own unrelated listener (this one's or another's)
        assert found.home == UNRELATED_HOME


def test_held_ports_listener_lives_for_the_session(held_ports: HeldPorts) -> None:
    assert os.path.exists(f"/proc/{held_ports.pid}")
