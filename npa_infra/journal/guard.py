"""The secret guard: decides whether a value may be written to the journal.

Secret values are never stored (style.md rule 11). The journal calls
``check`` on every JSON value and every text column inside its one write
path, so nothing reaches SQLite without passing here. A value is refused
when:

(a) a mapping key matches ``SECRET_KEY`` (case-insensitive ``secret``,
    ``password``, ``passwd``, ``credential``, ``token``, ``access_key``,
    ``private_key``) and is not in ``ALLOWED_KEYS``; or
(b) any string, key or value, at any depth, contains one of the secret
    values the caller registered (values shorter than ``MIN_SECRET_LENGTH``
    are ignored: they would match ordinary text).

``ALLOWED_KEYS`` are the fields that *describe* secrets without holding
one (runtime-reference.md §1 receipt, §2 ``credentials``):

- ``imagePullSecrets``: Kubernetes pod field; Secret *names*;
- ``secret_safe``: a flag that a record was checked;
- ``secret_names``: ``--secret-env`` names;
- ``secret_fingerprint``: 16 hex of sha256 (``fingerprint``), not reversible;
- ``secrets_persisted`` / ``values_persisted``: always ``false``;
- ``secret_env_hints``: names and sources for the operator;
- ``token_source``: where a token came from (``environment``, ``stack:NAME``).

The value under an allowed key must be a string, a bool, None, or a list of
strings or of flat records whose keys are not secret-looking and whose values
are strings, bools or None (``imagePullSecrets: [{"name": "regcred"}]``,
``secret_env_hints: [{"name", "available", "source"}]``); anything deeper
could smuggle a value past rule (a).

``bind`` is the journal's one gate from Python values to SQLite parameters:
it checks every text parameter and every ``Json`` parameter, then encodes
the latter as canonical JSON (sorted keys, no NaN). A ``Json`` value is first
checked on the text that will be stored: when that text is ASCII, holds no
key word (``SECRET_KEY``'s words or an allowed key's name, in any case) and no
registered secret value as JSON encodes it, neither rule can refuse it, and the
walk is skipped; anything else is walked. Every key and string is stored
verbatim in that text with JSON's character-by-character escaping, so this
is exact for the bytes that reach the file (a key that is not a string is
judged as stored: ``True`` as ``true``). Issue 19: most launch-record
checkpoints hold no key word, and walking each one cost more than encoding it.

A refusal raises ``InvariantError``: handing a secret to the journal is a
bug in the caller. The message names the key path and never the value; a
key that itself contains a secret value is shown as ``<redacted>``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from npa_infra.errors import InvariantError

__all__ = [
    "ALLOWED_KEYS",
    "MIN_SECRET_LENGTH",
    "SECRET_KEY",
    "Json",
    "bind",
    "check",
    "fingerprint",
    "usable_secrets",
]

_SECRET_WORDS = ("secret", "password", "passwd", "credential", "token", "access_key", "private_key")
SECRET_KEY = re.compile("|".join(_SECRET_WORDS), re.I)
ALLOWED_KEYS = frozenset(
    {
        "imagePullSecrets",
        "secret_safe",
        "secret_names",
        "secret_fingerprint",
        "secrets_persisted",
        "values_persisted",
        "secret_env_hints",
        "token_source",
    }
)
MIN_SECRET_LENGTH = 4
_REDACTED = "<redacted>"
# The words whose absence from a value's stored text proves no key is looked at (rule a).
_KEY_WORDS = (*_SECRET_WORDS, *sorted(k.lower() for k in ALLOWED_KEYS))


def usable_secrets(values: Iterable[str]) -> tuple[str, ...]:
    """The values worth guarding: distinct, at least ``MIN_SECRET_LENGTH`` characters."""
    return tuple(sorted({v for v in values if len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True))


def check(obj: object, secret_values: Iterable[str], *, path: str = "$") -> None:
    """Refuse ``obj`` if it holds a secret-looking key or a registered secret value.

    Raises:
        InvariantError: naming the key path, never the value.
    """
    _walk(obj, path, usable_secrets(secret_values))


@dataclass(frozen=True, slots=True)
class Json:
    """A parameter to be guarded, then stored as canonical JSON text."""

    value: object


def bind(
    params: Mapping[str, object], secret_values: Iterable[str], *, label: str
) -> dict[str, object]:
    """Guard every parameter of one statement and encode its ``Json`` values.

    Raises:
        InvariantError: a secret, or a ``Json`` value that is not JSON; the
            message names ``<label>.<parameter>`` and the key path.
    """
    secrets = usable_secrets(secret_values)
    stored = tuple(_dumps(secret)[1:-1] for secret in secrets)  # as each appears in JSON text
    bound: dict[str, object] = {}
    for name, value in params.items():
        where = f"{label}.{name}"
        if isinstance(value, Json):
            bound[name] = _guarded_json(value.value, where, secrets, stored)
            continue
        if isinstance(value, str):
            _walk(value, where, secrets)
        bound[name] = value
    return bound


def _dumps(value: object) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _guarded_json(
    value: object, where: str, secrets: tuple[str, ...], stored: tuple[str, ...]
) -> str:
    """The canonical JSON text of ``value``, walked unless the text itself proves it clean."""
    try:
        text = _dumps(value)
    except (TypeError, ValueError) as exc:
        _walk(value, where, secrets)  # a secret is reported before the encoding failure
        raise InvariantError(f"cannot journal {where}: not JSON ({type(exc).__name__})") from None
    if not _clean(text, stored):
        _walk(value, where, secrets)
    return text


def _clean(text: str, stored: tuple[str, ...]) -> bool:
    """True when ``text`` holds no registered secret value and no key word: no rule can refuse it.

    ASCII only: there, ``lower`` finds exactly what ``SECRET_KEY``'s ``re.I`` matches; outside
    it, ``re.I`` also matches the long s to ``s`` and the dotless i to ``i``, which ``lower``
    keeps as they are.
    """
    if not text.isascii():
        return False
    lowered = text.lower()
    return not any(word in lowered for word in _KEY_WORDS) and not any(s in text for s in stored)


def fingerprint(pairs: Mapping[str, str]) -> str:
    """16 hex of sha256 over the sorted ``name=value`` lines joined by newlines (§2)."""
    body = "\n".join(sorted(f"{name}={value}" for name, value in pairs.items()))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _holds(text: str, secrets: tuple[str, ...]) -> bool:
    return any(secret in text for secret in secrets)


def _refuse_text(text: str, path: str, secrets: tuple[str, ...]) -> None:
    if _holds(text, secrets):
        raise InvariantError(
            f"refusing to journal {path}: it contains a secret value (not shown); "
            "secret values are never stored"
        )


def _walk(obj: object, path: str, secrets: tuple[str, ...]) -> None:
    if isinstance(obj, str):
        _refuse_text(obj, path, secrets)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _walk_item(str(key), value, path, secrets)
    elif isinstance(obj, list | tuple):
        for index, item in enumerate(obj):
            _walk(item, f"{path}[{index}]", secrets)
    # Other scalars (None, bool, int, float) cannot hold text; anything else
    # fails JSON encoding in the journal, which is an InvariantError too.


def _walk_item(key: str, value: object, path: str, secrets: tuple[str, ...]) -> None:
    if _holds(key, secrets):
        raise InvariantError(
            f"refusing to journal {path}.{_REDACTED}: a key contains a secret value (not shown); "
            "secret values are never stored"
        )
    child = f"{path}.{key}"
    if key in ALLOWED_KEYS:
        _check_allowed(key, value, child, secrets)
    elif SECRET_KEY.search(key):
        raise InvariantError(
            f"refusing to journal {child}: the key name looks like a secret; store names, "
            "sources or a fingerprint under an allowed key (npa_infra.journal.guard.ALLOWED_KEYS)"
        )
    else:
        _walk(value, child, secrets)


def _check_allowed(key: str, value: object, path: str, secrets: tuple[str, ...]) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _refuse_text(value, path, secrets)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_allowed_item(key, item, f"{path}[{index}]", secrets)
        return
    raise InvariantError(
        f"refusing to journal {path}: an allowed secret-describing key must hold a string, "
        "a bool, null or a list of strings"
    )


def _check_allowed_item(key: str, item: object, path: str, secrets: tuple[str, ...]) -> None:
    if isinstance(item, str):
        _refuse_text(item, path, secrets)
        return
    # A flat record of names and flags: imagePullSecrets' [{"name": "regcred"}] and
    # secret_env_hints' [{"name": "HF_TOKEN", "available": true, "source": "environment"}].
    if isinstance(item, Mapping) and all(
        isinstance(k, str) and not SECRET_KEY.search(k) and _flat(v) for k, v in item.items()
    ):
        _walk(item, path, secrets)
        return
    raise InvariantError(
        f"refusing to journal {path}: an allowed secret-describing key must hold strings "
        "or flat records of names and flags"
    )


def _flat(value: object) -> bool:
    return value is None or isinstance(value, str | bool)
