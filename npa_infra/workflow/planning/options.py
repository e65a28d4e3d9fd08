"""Parsing of repeatable ``KEY=VALUE`` options shared by the spec commands."""

from __future__ import annotations

import re
from collections.abc import Iterable

from npa_infra.errors import UsageError
from npa_infra.plan import decisions

__all__ = ["check_assumption", "parse_overrides", "parse_secret_names", "parse_vars"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_vars(items: Iterable[str]) -> dict[str, str]:
    """``--var K=V`` split at the first ``=``; later values win."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("Invalid --var format. Use KEY=VALUE.", remedy=f"got {item!r}")
        out[key.strip()] = value
    return out


def parse_overrides(items: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        ref, sep, image = item.partition("=")
        if not sep or not ref.strip() or not image.strip():
            raise UsageError(
                "Invalid --image-override format. Use TOOL_REF=IMAGE.", remedy=f"got {item!r}"
            )
        out.append((ref.strip(), image.strip()))
    return out


def parse_secret_names(items: Iterable[str]) -> list[str]:
    """``--secret-env NAME`` names, deduplicated in order.

    Raises:
        UsageError: an item is not a name. Its text is never echoed (issue 24): what
            follows a ``=`` is a value, and anything else may be one pasted by mistake.
    """
    names = []
    for item in items:
        if not _ENV_NAME.match(item):
            name, sep, _ = item.partition("=")
            shown = f"{name}=…" if sep and _ENV_NAME.match(name) else "(not shown)"
            raise UsageError(
                f"invalid --secret-env {shown}: it takes the NAME of an environment variable, "
                "never a value (the text is not shown: it may be a secret)",
                remedy="export NAME=… in the shell and pass --secret-env NAME",
            )
        if item not in names:
            names.append(item)
    return names


def check_assumption(value: str | None) -> str:
    if not value:
        return ""
    if not decisions.is_allowed_assumption(value):
        raise UsageError(
            f"invalid --assume-decision {value!r}",
            remedy=f"use one of: {', '.join(decisions.ALLOWED_ASSUMPTIONS)}",
        )
    return value.strip()
