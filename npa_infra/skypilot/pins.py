"""The pinned SkyPilot install and the pure checks against it (skypilot-0.12.md §8).

``skypilot==0.12.2`` alone resolves packages that break it: kubernetes 37
fails every ``pod_config`` validation, fastapi ≥ 0.120 crashes the local API
server at start, click 8.2 breaks the CLI. Bootstrap installs exactly this set
and the version gate checks the same set on every use. Everything here is
pure: versions come in as strings, findings go out as records.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "PINS",
    "PYTHON_MAX",
    "PYTHON_MIN",
    "SKYPILOT_VERSION",
    "Finding",
    "Pin",
    "check_versions",
    "constraints_text",
    "pin_hash",
    "python_supported",
    "release",
    "requirements",
    "satisfies",
]

SKYPILOT_VERSION = "0.12.2"
PYTHON_MIN = (3, 9)
PYTHON_MAX = (3, 12)  # inclusive


class Pin(NamedTuple):
    """One pinned distribution: its requirement for pip and its constraint for the gate."""

    name: str
    extras: str
    specifier: str
    why: str

    @property
    def requirement(self) -> str:
        return f"{self.name}{self.extras}{self.specifier}"

    @property
    def constraint(self) -> str:
        """The constraints-file line: pip refuses extras there."""
        return f"{self.name}{self.specifier}"


PINS: tuple[Pin, ...] = (
    Pin("skypilot", "[kubernetes]", f"=={SKYPILOT_VERSION}", "npa-infra targets 0.12.2"),
    Pin(
        "kubernetes",
        "",
        ">=20,!=32.0.0,<36",
        "kubernetes client >= 36 fails every pod_config validation and the jobs controller "
        "retries forever",
    ),
    Pin(
        "fastapi",
        "",
        "<0.120",
        "with fastapi >= 0.120 the local API server cannot start (TypeError: "
        "FastAPI.__init__() got an unexpected keyword argument 'prefix')",
    ),
    Pin("click", "", ">=8.1,<8.2", "skypilot 0.12.2 requires click < 8.2"),
)

_CLAUSE = re.compile(r"^\s*(==|!=|>=|<=|<|>)\s*([0-9][0-9A-Za-z.+-]*)\s*$")


def release(version: str) -> tuple[int, ...]:
    """The numeric release part of a version (``35.0.0b1`` → ``(35, 0, 0)``), for ordering."""
    parts: list[int] = []
    for piece in version.strip().split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:
            break
    return tuple(parts)


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every comma-separated clause of ``specifier``."""
    have = release(version)
    if not have:
        return False
    for clause in specifier.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"unsupported version clause {clause!r}")
        op, bound = match.group(1), release(match.group(2))
        left, right = _padded(have, bound)
        ok = {
            "==": left == right,
            "!=": left != right,
            ">=": left >= right,
            "<=": left <= right,
            "<": left < right,
            ">": left > right,
        }[op]
        if not ok:
            return False
    return True


def python_supported(version: str) -> bool:
    """Python 3.9 to 3.12 inclusive (skypilot-0.12.md §8.2)."""
    minor = release(version)[:2]
    return len(minor) == 2 and PYTHON_MIN <= minor <= PYTHON_MAX


class Finding(NamedTuple):
    """One way an installed SkyPilot environment misses the pins."""

    package: str
    found: str | None
    wanted: str
    message: str


def check_versions(versions: Mapping[str, str | None]) -> tuple[Finding, ...]:
    """Every pin the installed ``versions`` miss; empty means the pins hold.

    ``versions`` maps ``python`` and each pinned distribution name to its
    installed version, or None when it is missing.
    """
    findings: list[Finding] = []
    py = versions.get("python")
    if py is None or not python_supported(py):
        findings.append(
            Finding("python", py, "3.9-3.12", f"the SkyPilot venv's python is {py or 'missing'}")
        )
    for pin in PINS:
        found = versions.get(pin.name)
        if found is not None and satisfies(found, pin.specifier):
            continue
        what = "is not installed" if found is None else f"{found} is outside {pin.specifier}"
        findings.append(Finding(pin.name, found, pin.specifier, f"{pin.name} {what}: {pin.why}"))
    return tuple(findings)


def requirements() -> list[str]:
    """The pip requirements, extras included."""
    return [pin.requirement for pin in PINS]


def constraints_text() -> str:
    """The constraints file bootstrap passes to pip with ``-c``."""
    lines = ["# npa-infra SkyPilot pins (skypilot-0.12.md §8.2); generated, do not edit"]
    lines += [pin.constraint for pin in PINS]
    return "\n".join(lines) + "\n"


def pin_hash(python_version: str) -> str:
    """A short stable hash of the pin set and the interpreter's minor version."""
    minor = ".".join(str(p) for p in release(python_version)[:2])
    material = json.dumps({"pins": requirements(), "python": minor}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:12]
