"""``WWW-Authenticate`` challenges and where credentials may go (registry.md §2, §2.1).

``parse`` reads every challenge of a header (RFC 9110 §11.6.1: a scheme, then
``key=value`` or ``key="quoted"`` parameters, challenges separated by commas)
and never raises: a header it cannot read yields fewer challenges, and the
client then reports a malformed answer. ``token_url`` merges ``service`` and
``scope`` into the realm's own query, never replacing it. ``realm_trusted``
is npa-infra's rule: credentials go only to an HTTPS realm on the registry
host itself, on Docker Hub's ``auth.docker.io``, or on a configured host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["Challenge", "parse", "realm_trusted", "select", "token_url"]

_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# registry.md §2.1: the built-in pair for Docker Hub.
_DOCKER_HOSTS = frozenset({"registry-1.docker.io", "docker.io", "index.docker.io"})
_DOCKER_REALM = "auth.docker.io"


class Challenge(NamedTuple):
    """One challenge: the scheme in lower case and its parameters (keys in lower case)."""

    scheme: str
    params: Mapping[str, str]

    @property
    def realm(self) -> str:
        return self.params.get("realm", "")

    @property
    def service(self) -> str:
        return self.params.get("service", "")

    @property
    def scope(self) -> str:
        return self.params.get("scope", "")

    @property
    def error(self) -> str:
        return self.params.get("error", "")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self, chars: str = " \t") -> None:
        while self.pos < len(self.text) and self.text[self.pos] in chars:
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def token(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _TCHAR:
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        self.pos += 1  # the opening quote
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == "\\" and self.pos < len(self.text):
                out.append(self.text[self.pos])
                self.pos += 1
            elif char == '"':
                break
            else:
                out.append(char)
        return "".join(out)

    def value(self) -> str:
        if self.peek() == '"':
            return self.quoted()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ", \t":
            self.pos += 1
        return self.text[start : self.pos]

    def param_ahead(self) -> bool:
        """Whether a ``key=`` (not ``token68=``) starts at the current position."""
        saved = self.pos
        key = self.token()
        self.skip()
        ahead = bool(key) and self.peek() == "=" and self.text[self.pos : self.pos + 2] != "=="
        self.pos = saved
        return ahead


def parse(header: str) -> tuple[Challenge, ...]:
    """Every challenge in ``header``; unreadable parts are skipped, nothing raises."""
    if not isinstance(header, str):
        return ()
    reader = _Reader(header)
    found: list[Challenge] = []
    while True:
        reader.skip(" \t,")
        if reader.pos >= len(header):
            break
        scheme = reader.token()
        if not scheme:
            reader.pos += 1  # a character that cannot start a scheme
            continue
        reader.skip()
        if reader.peek() not in ("", ",") and not reader.param_ahead():
            reader.value()  # token68 (e.g. Negotiate data): registries never send one
            reader.skip()
        found.append(Challenge(scheme.lower(), _params(reader)))
    return tuple(found)


def _params(reader: _Reader) -> dict[str, str]:
    """``key=value`` pairs up to the next challenge; each loop consumes input or stops."""
    params: dict[str, str] = {}
    while reader.pos < len(reader.text):
        if reader.peek() == ",":
            if not _next_is_param(reader):
                break  # a new challenge (or the end) follows the comma
            reader.skip(" \t,")
            continue
        if not reader.param_ahead():
            break
        key = reader.token().lower()
        reader.skip()
        reader.pos += 1  # '='
        reader.skip()
        params.setdefault(key, reader.value())
        reader.skip()
    return params


def _next_is_param(reader: _Reader) -> bool:
    """After a comma: does a parameter of the same challenge follow (else a new scheme)?"""
    saved = reader.pos
    reader.pos += 1
    reader.skip(" \t,")
    ahead = reader.param_ahead()
    reader.pos = saved
    return ahead


def select(challenges: Sequence[Challenge]) -> Challenge | None:
    """The challenge to answer: Bearer when offered, else Basic, else None."""
    for scheme in ("bearer", "basic"):
        for challenge in challenges:
            if challenge.scheme == scheme:
                return challenge
    return None


def token_url(realm: str, service: str, scopes: Iterable[str]) -> str:
    """The token request URL: ``service`` and each ``scope`` merged into the realm's query.

    Raises:
        ValueError: the realm is not an absolute http(s) URL.
    """
    parts = urlsplit(realm)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"token realm {realm!r} is not an absolute http(s) URL")
    query = parse_qsl(parts.query, keep_blank_values=True)
    extra = [("service", service)] if service else []
    extra += [("scope", s) for s in scopes if s]
    query += [pair for pair in extra if pair not in query]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _host(url_or_host: str) -> str:
    text = url_or_host.strip().lower()
    if "://" in text:
        try:
            return (urlsplit(text).hostname or "").lower()
        except ValueError:
            return ""
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    return text.rsplit(":", 1)[0] if ":" in text else text


def realm_trusted(realm: str, registry: str, trusted_hosts: Iterable[str] = ()) -> bool:
    """Whether credentials may be sent to ``realm`` for ``registry`` (registry.md §2.1).

    Trusted: the scheme is ``https`` and the host (port ignored) is the
    registry host, ``auth.docker.io`` for Docker Hub, or a configured host.
    A plain-HTTP realm, a foreign host or anything unparsable is untrusted.
    """
    try:
        parts = urlsplit(realm)
        host = (parts.hostname or "").lower()
    except ValueError:
        return False
    if parts.scheme.lower() != "https" or not host:
        return False
    registry_host = _host(registry)
    if host == registry_host:
        return True
    if registry_host in _DOCKER_HOSTS and host == _DOCKER_REALM:
        return True
    return host in {_host(h) for h in trusted_hosts if h}
