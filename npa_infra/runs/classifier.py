"""Classify launch-transaction failure text into a ``Category``; redact text for the record.

The launch transaction retries only what this classifier calls transient,
so it is deliberately conservative (runtime-reference.md §1 Classifier):

1. The text (stdout + stderr + exception text) is ANSI-stripped and lowercased.
   A known failure of the local SkyPilot install (``runs.skyoutput``: the
   kubernetes-client ``pod_config`` loop, the fastapi crash, a foreign API
   server) is its own terminal category first: it is not the task's schema
   or a warm-up, and its remedy repairs the operator's machine (npa-infra adds).
2. *Terminal* categories are checked first, in every phase, in table order:
   identity, context, rbac, auth, certificate, config, schema, capacity,
   workload. A terminal match always beats a transient one.
3. *Transient* categories apply only in the readiness, controller, launch and
   reconciliation phases: API warm-up (npa-infra adds it, and checks it first
   because its texts also contain connection words), rate limit, server,
   transport. In ``supervision`` such text is ``unknown``.
4. Everything else, and empty text, is ``unknown``: ambiguous, never retried.

``classify`` is pure and total: it never raises. Classify the raw text, then
store ``redact(text)``: masking may hide a word a rule looks for.
"""

from __future__ import annotations

import re
from enum import StrEnum

from npa_infra.runs import skyoutput
from npa_infra.runs.models import Category

__all__ = [
    "TERMINAL_RULES",
    "TRANSIENT_RULES",
    "ClassifierPhase",
    "classify",
    "redact",
]


class ClassifierPhase(StrEnum):
    """Where the text came from; transient categories apply only before supervision."""

    READINESS = "readiness"
    CONTROLLER = "controller"
    LAUNCH = "launch"
    RECONCILIATION = "reconciliation"
    SUPERVISION = "supervision"


def _literal(*words: str) -> tuple[str, ...]:
    return tuple(re.escape(word) for word in words)


# runtime-reference.md §1 Classifier, terminal table; the items after the table's
# own substrings are npa-infra additions (allowed_contexts, 403, create, 401).
TERMINAL_RULES: tuple[tuple[Category, tuple[str, ...]], ...] = (
    (Category.IDENTITY, _literal("identity mismatch", "wrong context", "belongs to")),
    (
        Category.CONTEXT,
        _literal(
            "context does not exist",
            "context not found",
            "not found in kubeconfig",
            "invalid context",
            "invalid kube-context",
            "no current-context",
            "not in allowed_contexts",
        ),
    ),
    (
        Category.RBAC,
        _literal(
            "forbidden",
            "permission denied",
            "cannot list",
            "cannot get resource",
            "cannot create resource",
            "(403)",
        ),
    ),
    (
        Category.AUTH,
        _literal(
            "unauthorized",
            "authentication required",
            "authentication failed",
            "credentials expired",
            "invalid bearer token",
            "exec plugin",
            "(401)",
        ),
    ),
    (
        Category.CERTIFICATE,
        _literal("certificate signed by unknown authority", "certificate has expired", "x509:"),
    ),
    (
        Category.CONFIG,
        _literal(
            "invalid kubeconfig",
            "failed to load kubeconfig",
            "no such file or directory",
            "executable file not found",
        ),
    ),
    (
        Category.SCHEMA,
        _literal("invalid pod_config", "validation error", "invalid yaml", "schema"),
    ),
    (
        Category.CAPACITY,
        _literal("insufficient", "quota", "failed_prechecks", "no resource", "unschedulable"),
    ),
    (
        Category.WORKLOAD,
        _literal("imagepull", "errimagepull", "failed_setup", "workload failed"),
    ),
)

# runtime-reference.md §1 Classifier, transient table. API warm-up comes first:
# "could not connect to skypilot api server" must not read as transport.
# Server codes are 500/502/503/504 only: 501 (not implemented) is not transient.
# A status code must end there: "http 4290" is not a 429.
TRANSIENT_RULES: tuple[tuple[Category, tuple[str, ...]], ...] = (
    (
        Category.API_WARMUP,
        _literal(
            "could not connect to skypilot api server",
            "failed to connect to skypilot api server",
            "skypilot api server is starting",
            "apiserverconnectionerror",
        ),
    ),
    (
        Category.KUBERNETES_RATE_LIMIT,
        (*_literal("too many requests", "429 client error"), r"(?:status code|http) 429\b"),
    ),
    (
        Category.KUBERNETES_SERVER,
        (
            r"status code 50[0234]\b",
            r"50[0234] server error",
            *_literal(
                "internal server error", "service unavailable", "bad gateway", "gateway timeout"
            ),
        ),
    ),
    (
        Category.KUBERNETES_TRANSPORT,
        (
            *_literal(
                "connection refused",
                "connection reset",
                "connection aborted",
                "unexpected eof",
                "tls handshake timeout",
                "temporary failure in name resolution",
                "no route to host",
                "network is unreachable",
                "i/o timeout",
                "dial tcp",
                "server closed idle connection",
                "remotedisconnected",
            ),
            r"\beof\b",  # EOF as a word, not inside "eoferror" or "geofence"
        ),
    ),
)

_TRANSIENT_PHASES = frozenset(
    {
        ClassifierPhase.READINESS,
        ClassifierPhase.CONTROLLER,
        ClassifierPhase.LAUNCH,
        ClassifierPhase.RECONCILIATION,
    }
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _compile(
    rules: tuple[tuple[Category, tuple[str, ...]], ...],
) -> tuple[tuple[Category, re.Pattern[str]], ...]:
    return tuple((category, re.compile("|".join(patterns))) for category, patterns in rules)


_TERMINAL = _compile(TERMINAL_RULES)
_TRANSIENT = _compile(TRANSIENT_RULES)


def classify(text: str, phase: ClassifierPhase) -> Category:
    """Map failure text seen in ``phase`` to a category; ``unknown`` when nothing matches."""
    normalized = _ANSI.sub("", text).lower()
    if not normalized.strip():
        return Category.UNKNOWN
    known = skyoutput.first(normalized)  # the install's own failures, before the tables
    if known is not None:
        return known.category
    for category, pattern in _TERMINAL:  # terminal first, in every phase
        if pattern.search(normalized):
            return category
    if phase not in _TRANSIENT_PHASES:  # supervision: connection words are not warm-up
        return Category.UNKNOWN
    for category, pattern in _TRANSIENT:
        if pattern.search(normalized):
            return category
    return Category.UNKNOWN


MASK = "***"
_QUOTED_OR_WORD = r"(?:\"[^\"]*\"|'[^']*'|\S+)"
_FLAG = re.compile(
    r"(--(?:kubeconfig|token|certificate-authority|client-key))(=|\s+)" + _QUOTED_OR_WORD
)
# "invalid bearer token" is the auth classifier's own phrase: keep it readable.
_BEARER = re.compile(r"(\bbearer\s+)(?!token\b)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
_KEY_VALUE = re.compile(
    r"(\b[\w.-]*(?:token|password|passwd|secret|api[_-]?key|access[_-]?key)[\w.-]*"
    r"[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&]+",
    re.IGNORECASE,
)


def _may_hold_credential(text: str) -> bool:
    """Whether any masking pattern can match: ``_FLAG`` needs ``--``, ``_KEY_VALUE`` a ``=``
    or ``:``, ``_BEARER`` the word bearer. Long plain output (a flood of launch lines)
    then costs one scan instead of three regular expressions."""
    return "=" in text or ":" in text or "--" in text or "bearer" in text.lower()


def redact(text: str, limit: int = 1000) -> str:
    """Mask credentials in ``text``, then keep its first ``limit`` characters.

    Masks the value after ``--kubeconfig``, ``--token``,
    ``--certificate-authority`` and ``--client-key`` (``--flag value`` and
    ``--flag=value``), ``Bearer <token>``, and ``token=…``/``password: …``-like
    values. Masking runs on the whole text before capping, so a secret cut at
    the boundary can never leak a prefix. The cap keeps the *start* of the
    text (the first ``limit`` characters, no marker added); ``limit <= 0``
    gives an empty string.
    """
    if not _may_hold_credential(text):  # none of the three patterns can match: skip them
        return text[: max(limit, 0)]
    masked = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    masked = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", masked)
    masked = _KEY_VALUE.sub(lambda m: f"{m.group(1)}{MASK}", masked)
    return masked[: max(limit, 0)]
