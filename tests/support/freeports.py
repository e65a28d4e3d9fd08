"""The observation of SkyPilot's fixed ports on a machine where nothing listens on them.

For tests that are not about the ports (issue 31): they inject it
(``Services(api_ports=nothing_listens)``, ``port_check=nothing_listens``) instead
of reading this machine's own ports, which another server may hold. Light on
purpose: fresh-interpreter children import it.
"""

from __future__ import annotations

from collections.abc import Mapping

from npa_infra.skypilot.port import Ownership, PortCheck

__all__ = ["nothing_listens"]


def nothing_listens(number: int, _expected: Mapping[str, str]) -> PortCheck:
    """Nothing listens on ``number``: the first ``sky`` call would start its own server."""
    return PortCheck(number, Ownership.FREE)
