"""Recognise known failures of the local SkyPilot install in its output, one line at a time.

A few failures print a recognisable line long before (or instead of) a clear
error, and their remedy is not "fix the task": it is a repair of the
operator's machine (skypilot-0.12.md §8.1 and §11). ``recognise`` names the
cause and the remedy for one line, so ``submit`` can say them the moment the
line arrives; ``first`` does the same for a whole text (a finished command,
a failed request's log). The known failures, in table order:

1. ``kubernetes_client_pod_config``: the venv's kubernetes client is >= 36,
   so every ``pod_config`` fails validation (``Invalid pod_config. Details:
   ... No module named 'kubernetes.client.models.dict[str, str]'``) and the
   jobs controller retries forever → ``skypilot_venv``, ``npa skypilot bootstrap``.
   A plain ``Invalid pod_config`` without that module error is the task's own
   mistake and stays the classifier's ``schema``.
2. ``fastapi_server_crash``: fastapi >= 0.120 kills the local API server at
   start (``TypeError: FastAPI.__init__() got an unexpected keyword argument``)
   → ``skypilot_venv``, ``npa skypilot bootstrap``.
3. ``foreign_api_server``: the API server that answered is another install's
   (``APIVersionMismatchError``, ``Client and local API server version
   mismatch``) → ``foreign_api_server``, stop that server.
4. ``stale_nebius_token``: ``PermissionDenied``/``Unauthenticated`` (the gRPC
   status names, case as printed) while ``NEBIUS_IAM_TOKEN`` or
   ``NPA_NEBIUS_IAM_TOKEN`` is exported: the static token overrides the
   refreshing login → ``stale_iam_token``, unset the variables. Without an
   exported token these words are ordinary auth failures, not recognised here.

Within a line the leftmost match wins (at one position, table order), so
where the output's lines break, or whether two lines arrive joined, never
changes which failure is named first. A recognition only names a cause: it
decides nothing about the launch, whose outcome the transaction still
proves by exact queue evidence (faults.md).

Pure: the exported token variables are an observation passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.runs.models import Category

__all__ = [
    "BOOTSTRAP_REMEDY",
    "PORT_REMEDY",
    "TOKEN_REMEDY",
    "KnownCause",
    "KnownFailure",
    "first",
    "recognise",
    "remedy_for",
]

BOOTSTRAP_REMEDY = "npa skypilot bootstrap"
TOKEN_REMEDY = "unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN"
PORT_REMEDY = (
    "stop the other SkyPilot API server (`sky api stop` in its environment), "
    "or use the same isolated directory it uses"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class KnownCause(StrEnum):
    KUBERNETES_CLIENT_POD_CONFIG = "kubernetes_client_pod_config"
    FASTAPI_SERVER_CRASH = "fastapi_server_crash"
    FOREIGN_API_SERVER = "foreign_api_server"
    STALE_NEBIUS_TOKEN = "stale_nebius_token"


@dataclass(frozen=True, slots=True)
class KnownFailure:
    """A recognised failure: what it is, in user terms, and the next command."""

    cause: KnownCause
    message: str
    remedy: str
    category: Category

    def to_json(self) -> dict[str, str]:
        return {
            "cause": self.cause.value,
            "message": self.message,
            "remedy": self.remedy,
            "category": self.category.value,
        }


_FAILURES: dict[KnownCause, KnownFailure] = {
    KnownCause.KUBERNETES_CLIENT_POD_CONFIG: KnownFailure(
        KnownCause.KUBERNETES_CLIENT_POD_CONFIG,
        "SkyPilot's venv has a kubernetes client >= 36, which fails every pod_config "
        "validation: the jobs controller retries this launch forever",
        BOOTSTRAP_REMEDY,
        Category.SKYPILOT_VENV,
    ),
    KnownCause.FASTAPI_SERVER_CRASH: KnownFailure(
        KnownCause.FASTAPI_SERVER_CRASH,
        "SkyPilot's venv has fastapi >= 0.120, whose local API server crashes at start: "
        "every sky call fails",
        BOOTSTRAP_REMEDY,
        Category.SKYPILOT_VENV,
    ),
    KnownCause.FOREIGN_API_SERVER: KnownFailure(
        KnownCause.FOREIGN_API_SERVER,
        "the SkyPilot API server that answered belongs to another SkyPilot install "
        "(its version differs from this venv's)",
        PORT_REMEDY,
        Category.FOREIGN_API_SERVER,
    ),
    KnownCause.STALE_NEBIUS_TOKEN: KnownFailure(
        KnownCause.STALE_NEBIUS_TOKEN,
        "Nebius refused the exported static IAM token (NEBIUS_IAM_TOKEN/NPA_NEBIUS_IAM_TOKEN): "
        "it overrides the kubeconfig's refreshing login and has expired or lacks access",
        TOKEN_REMEDY,
        Category.STALE_IAM_TOKEN,
    ),
}

# skypilot-0.12.md §8.1 and §11; group names are the KnownCause values, in table order.
_PATTERNS: tuple[tuple[KnownCause, str], ...] = (
    (KnownCause.KUBERNETES_CLIENT_POD_CONFIG, r"no module named '?kubernetes\.client\.models\."),
    (
        KnownCause.FASTAPI_SERVER_CRASH,
        r"fastapi\.__init__\(\) got an unexpected keyword argument",
    ),
    (
        KnownCause.FOREIGN_API_SERVER,
        r"apiversionmismatcherror|client and local api server version mismatch",
    ),
    # the gRPC status names exactly as printed: "permission denied" is a file or RBAC error
    (
        KnownCause.STALE_NEBIUS_TOKEN,
        r"(?-i:PermissionDenied|PERMISSION_DENIED|Unauthenticated|UNAUTHENTICATED)",
    ),
)


def _compile(causes: tuple[tuple[KnownCause, str], ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<{c.value}>{p})" for c, p in causes), re.IGNORECASE)


_WITHOUT_TOKEN = _compile(tuple(c for c in _PATTERNS if c[0] is not KnownCause.STALE_NEBIUS_TOKEN))
_WITH_TOKEN = _compile(_PATTERNS)


def recognise(line: str, token_vars: tuple[str, ...] = ()) -> KnownFailure | None:
    """The known failure ``line`` shows (leftmost match), or None.

    ``token_vars``: the names of the static Nebius token variables exported to SkyPilot.
    """
    pattern = _WITH_TOKEN if token_vars else _WITHOUT_TOKEN
    found = pattern.search(_ANSI.sub("", line))
    if found is None or found.lastgroup is None:
        return None
    return _FAILURES[KnownCause(found.lastgroup)]


def first(text: str, token_vars: tuple[str, ...] = ()) -> KnownFailure | None:
    """The first known failure in ``text``, line by line, as ``recognise`` would name it."""
    for line in text.splitlines():
        known = recognise(line, token_vars)
        if known is not None:
            return known
    return None


def remedy_for(category: Category) -> str | None:
    """The remedy of the known failures of ``category``; None for the classifier's own."""
    return next((f.remedy for f in _FAILURES.values() if f.category is category), None)
