"""``skypilot.clienttools``: socat, nc and rsync on the operator's PATH, through an injected lookup."""

from __future__ import annotations

import pytest

from npa_infra.skypilot import clienttools
from npa_infra.skypilot.clienttools import ToolEffect

ALL = ("socat", "nc", "rsync")


def lookup(*present: str) -> clienttools.Which:
    return lambda name: f"/usr/bin/{name}" if name in present else None


@pytest.mark.parametrize(
    ("present", "missing", "debian", "brew"),
    [
        (ALL, [], "", ""),
        (("nc", "rsync"), ["socat"], "sudo apt install socat`", "brew install socat`"),
        (("socat", "rsync"), ["nc"], "sudo apt install netcat-openbsd`", "brew install netcat`"),
        (("socat", "nc"), ["rsync"], "sudo apt install rsync`", "brew install rsync`"),
        (
            (),
            ["socat", "nc", "rsync"],
            "sudo apt install socat netcat-openbsd rsync`",
            "brew install socat netcat rsync`",
        ),
    ],
    ids=["all-found", "no-socat", "no-nc", "no-rsync", "none"],
)
def test_check_missing_tools_named_with_packages(
    present: tuple[str, ...], missing: list[str], debian: str, brew: str
) -> None:
    report = clienttools.check(lookup(*present))

    assert report.ok is (not missing)
    assert report.missing == missing
    assert [t.name for t in report.tools] == list(ALL)
    assert debian in report.remedy and brew in report.remedy
    if missing:
        assert "npa skypilot verify" in report.remedy
    else:
        assert report.remedy == ""
        assert (
            report.detail
            == "found socat (/usr/bin/socat), nc (/usr/bin/nc), rsync (/usr/bin/rsync)"
        )


@pytest.mark.parametrize(
    ("tool", "effect", "text"),
    [
        ("socat", ToolEffect.DISABLES_KUBERNETES, "SkyPilot disables Kubernetes without it"),
        ("nc", ToolEffect.DISABLES_KUBERNETES, "SkyPilot disables Kubernetes without it"),
        ("rsync", ToolEffect.REFUSES_PROVISION, "SkyPilot refuses to provision without it"),
    ],
    ids=["socat", "nc", "rsync"],
)
def test_check_missing_tool_says_what_skypilot_does(
    tool: str, effect: ToolEffect, text: str
) -> None:
    report = clienttools.check(lookup(*(t for t in ALL if t != tool)))

    state = next(t for t in report.tools if t.name == tool)
    assert (state.found, state.path, state.effect) == (False, None, effect)
    assert report.detail == f"`{tool}` is not on PATH: {text}"


def test_check_empty_path_from_lookup_counts_as_missing() -> None:
    report = clienttools.check(lambda name: "" if name == "nc" else f"/bin/{name}")

    assert report.missing == ["nc"]


def test_check_json_shape_is_stable() -> None:
    data = clienttools.check(lookup("socat")).model_dump(mode="json")

    assert set(data) == {"ok", "tools", "missing"}
    assert data["tools"][1] == {
        "name": "nc",
        "found": False,
        "path": None,
        "effect": "disables_kubernetes",
        "debian_package": "netcat-openbsd",
        "brew_package": "netcat",
    }
