"""The operator's own tools that SkyPilot 0.12.2's Kubernetes path runs (issue 17).

SkyPilot reaches Kubernetes pods from the operator's machine through a
port-forward proxy that needs ``socat`` and ``nc``: without either one,
``sky check`` disables Kubernetes. It copies the workdir and file mounts
with ``rsync``: without it, a launch is refused before provisioning. A
remote API server checks its own machine, not the operator's, so these are
looked up here, on the operator's PATH.

Pure: ``check`` takes the lookup (``shutil.which`` in production) and says,
per tool, whether it was found, what SkyPilot does without it, and which
package installs it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

__all__ = ["TOOLS", "ClientTool", "ClientToolsReport", "ToolEffect", "ToolState", "check"]

Which = Callable[[str], "str | None"]


class ToolEffect(StrEnum):
    """What SkyPilot 0.12.2 does when the tool is missing."""

    DISABLES_KUBERNETES = "disables_kubernetes"  # `sky check` reports Kubernetes disabled
    REFUSES_PROVISION = "refuses_provision"  # `sky jobs launch` stops before provisioning


class ClientTool(NamedTuple):
    name: str  # the executable SkyPilot runs
    debian_package: str  # apt (Debian/Ubuntu)
    brew_package: str  # Homebrew (macOS)
    effect: ToolEffect


TOOLS: tuple[ClientTool, ...] = (
    ClientTool("socat", "socat", "socat", ToolEffect.DISABLES_KUBERNETES),
    ClientTool("nc", "netcat-openbsd", "netcat", ToolEffect.DISABLES_KUBERNETES),
    ClientTool("rsync", "rsync", "rsync", ToolEffect.REFUSES_PROVISION),
)

_EFFECT_TEXT = {
    ToolEffect.DISABLES_KUBERNETES: "SkyPilot disables Kubernetes without it",
    ToolEffect.REFUSES_PROVISION: "SkyPilot refuses to provision without it",
}


class ToolState(BaseModel):
    """One tool: found (and where), or missing with what that costs and how to install it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    found: bool
    path: str | None
    effect: ToolEffect
    debian_package: str
    brew_package: str


class ClientToolsReport(BaseModel):
    """``client_tools`` of ``npa skypilot verify --json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    tools: list[ToolState]
    missing: list[str]

    @property
    def detail(self) -> str:
        """One line: every tool found, else each missing one with SkyPilot's consequence."""
        if self.ok:
            return "found " + ", ".join(f"{t.name} ({t.path})" for t in self.tools)
        return "; ".join(
            f"`{t.name}` is not on PATH: {_EFFECT_TEXT[t.effect]}"
            for t in self.tools
            if not t.found
        )

    @property
    def remedy(self) -> str:
        """The install commands for the missing tools; empty when none is missing."""
        absent = [t for t in self.tools if not t.found]
        if not absent:
            return ""
        debian = " ".join(t.debian_package for t in absent)
        brew = " ".join(t.brew_package for t in absent)
        return (
            f"install {', '.join(t.name for t in absent)}: `sudo apt install {debian}` "
            f"(Debian/Ubuntu) or `brew install {brew}` (macOS), then rerun `npa skypilot verify`"
        )


def check(which: Which, tools: tuple[ClientTool, ...] = TOOLS) -> ClientToolsReport:
    """Look each tool up with ``which``; the report is ok only when every one was found."""
    states = []
    for tool in tools:
        path = which(tool.name)
        states.append(
            ToolState(
                name=tool.name,
                found=bool(path),
                path=path or None,
                effect=tool.effect,
                debian_package=tool.debian_package,
                brew_package=tool.brew_package,
            )
        )
    missing = [s.name for s in states if not s.found]
    return ClientToolsReport(ok=not missing, tools=states, missing=missing)
