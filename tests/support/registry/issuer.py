"""The token issuer for the token-auth test registry (registry.md §2 and §5.3), in the test process.

The registry never calls its realm; clients do. So this server sees exactly
what a client sends to a token realm, and records it: method, path, query and
``Authorization`` of every request (``TokenIssuer.requests``). Tests assert
where credentials went with it (registry.md §2.1).

Policy (``ACCESS``, ``USERS``): alice/alicepw may pull and push ``team/*``;
bob/bobpw may pull ``team/app``; everyone, anonymous included, may pull
``public/*``; nobody gets ``registry:catalog:*``. A request's grant is the
requested ∩ allowed actions per scope; too little access is not an error (an
anonymous token for a private repository carries ``actions: []``). Bad Basic
credentials get 401 from the issuer itself.

Tokens are ES256 JWTs with ``iss``/``aud``/``sub``/``iat``/``nbf``/``exp``/
``jti``/``access``, whose header names the key by ``x5c`` (the self-signed
issuer certificate) or by libtrust ``kid``. ``IssuerSwitches`` breaks them on
purpose: a rogue key, a wrong or list ``aud``, a wrong ``iss``, an expired
token, or a fixed error status for every request (ghcr.io-style 401/403).
Strictness a client must meet: ``service`` must be the registry's, and the
realm's own query parameters must still be there (registry.md §2: merge the
parameters into the realm's query, never replace it); otherwise 400.
"""

from __future__ import annotations

import base64
import datetime
import fnmatch
import json
import secrets
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from tests.support.registry.listener import LoopbackServer
from tests.support.registry.pki import ISSUER_NAME, SigningIdentity

__all__ = [
    "ACCESS",
    "SERVICE",
    "USERS",
    "AccessEntry",
    "Grant",
    "IssuerRequest",
    "IssuerSwitches",
    "KeyHeader",
    "TokenIssuer",
    "parse_scopes",
]

SERVICE = "npa-test-registry"
TOKEN_PATH = "/token"

KeyHeader = Literal["x5c", "kid"]

USERS: dict[str, str] = {"alice": "alicepw", "bob": "bobpw"}


@dataclass(frozen=True)
class Grant:
    """``principal`` (a user, ``*`` for everyone including anonymous) may do ``actions``."""

    principal: str
    type: str
    pattern: str  # fnmatch over the resource name
    actions: frozenset[str]


ACCESS: tuple[Grant, ...] = (
    Grant("alice", "repository", "team/*", frozenset({"pull", "push"})),
    Grant("bob", "repository", "team/app", frozenset({"pull"})),
    Grant("*", "repository", "public/*", frozenset({"pull"})),
)


@dataclass(frozen=True)
class AccessEntry:
    """One ``access`` claim entry: ``{type, name, actions}``."""

    type: str
    name: str
    actions: tuple[str, ...]

    def claim(self) -> dict[str, object]:
        return {"type": self.type, "name": self.name, "actions": list(self.actions)}


def parse_scopes(values: list[str]) -> list[AccessEntry]:
    """``scope`` parameters (repeatable, space-separated) as requested entries.

    ``repository:team/app:pull,push`` -> type, name, actions; the name is
    everything between the first and the last ``:``.
    """
    entries: list[AccessEntry] = []
    for value in values:
        for scope in value.split():
            parts = scope.split(":")
            if len(parts) < 3:
                continue
            actions = tuple(a for a in parts[-1].split(",") if a)
            entries.append(AccessEntry(parts[0], ":".join(parts[1:-1]), actions))
    return entries


@dataclass
class IssuerSwitches:
    """Faults and variants of the next tokens; ``TokenIssuer.reset()`` restores the defaults."""

    header: KeyHeader = "x5c"
    rogue_key: bool = False  # sign with a key the registry does not trust
    audience: str | list[str] | None = None  # None: the registry's service; a list is invalid
    issuer_name: str | None = None  # None: the registry's expected ``iss``
    expired: bool = False  # exp an hour ago: beyond the registry's 60 s leeway
    expires_in: int = 300
    status: int | None = None  # answer every request with this status and an error body
    fields: Literal["both", "token", "access_token"] = "both"
    require_service: bool = True  # 400 unless ``service`` equals the registry's
    require_realm_query: bool = True  # 400 unless the realm's own query was kept (§2)


@dataclass(frozen=True)
class IssuerRequest:
    """What a client sent to the realm, and what the issuer answered."""

    method: str
    path: str
    query: str
    params: dict[str, list[str]]
    authorization: str | None
    scheme: str
    host: str
    status: int
    subject: str | None  # the authenticated user; None when anonymous or rejected
    granted: tuple[AccessEntry, ...] = ()


@dataclass
class TokenIssuer:
    """A running issuer (``start``); ``url``/``realm`` name its token endpoint."""

    signer: SigningIdentity
    rogue: SigningIdentity
    service: str
    issuer_name: str
    default_header: KeyHeader
    realm_host: str
    realm_query: str
    realm_port: int | None = None  # a front (e.g. a latency proxy) the realm names instead
    users: dict[str, str] = field(default_factory=lambda: dict(USERS))
    access: tuple[Grant, ...] = ACCESS
    switches: IssuerSwitches = field(default_factory=IssuerSwitches)
    _requests: list[IssuerRequest] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: LoopbackServer | None = field(default=None, repr=False)

    @classmethod
    def start(
        cls,
        *,
        signer: SigningIdentity,
        rogue: SigningIdentity,
        tls: ssl.SSLContext | None,
        header: KeyHeader = "x5c",
        realm_host: str = "127.0.0.1",
        realm_query: str = "",
        realm_port: int | None = None,
        service: str = SERVICE,
        issuer_name: str = ISSUER_NAME,
    ) -> TokenIssuer:
        """Serve on 127.0.0.1 (HTTPS when ``tls`` is an ``ssl.SSLContext``).

        ``realm_host`` is the host name the realm URL uses (``localhost`` names
        another host than the registry's ``127.0.0.1``); ``realm_query`` is kept
        in the realm URL so tests can check clients merge, not replace, it.
        ``realm_port`` makes the realm name another port (a proxy in front of
        the issuer) instead of the issuer's own.
        """
        issuer = cls(
            signer=signer,
            rogue=rogue,
            service=service,
            issuer_name=issuer_name,
            default_header=header,
            realm_host=realm_host,
            realm_query=realm_query,
            realm_port=realm_port,
            switches=IssuerSwitches(header=header),
        )
        handler = type("_BoundIssuerHandler", (_IssuerHandler,), {"issuer": issuer})
        issuer._server = LoopbackServer(handler, tls)
        return issuer

    @property
    def url(self) -> str:
        """The token endpoint without the realm's query: ``<scheme>://<host>:<port>/token``."""
        assert self._server is not None
        if self.realm_port is not None:
            return f"{self._server.scheme}://{self.realm_host}:{self.realm_port}{TOKEN_PATH}"
        return self._server.url(self.realm_host) + TOKEN_PATH

    @property
    def port(self) -> int:
        """The port the issuer itself listens on (``realm_port`` may name a front instead)."""
        assert self._server is not None
        return self._server.port

    @property
    def realm(self) -> str:
        """The realm exactly as the registry's challenge names it."""
        return self.url + (f"?{self.realm_query}" if self.realm_query else "")

    @property
    def requests(self) -> list[IssuerRequest]:
        """Every request since the last ``reset()``, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Forget recorded requests and restore the default switches."""
        with self._lock:
            self._requests.clear()
        self.switches = IssuerSwitches(header=self.default_header)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def allowed(self, subject: str | None, entry: AccessEntry) -> tuple[str, ...]:
        """requested ∩ allowed actions of ``subject`` (None: anonymous) on ``entry``."""
        permitted: set[str] = set()
        for grant in self.access:
            if grant.principal not in ("*", subject) or grant.type != entry.type:
                continue
            if fnmatch.fnmatchcase(entry.name, grant.pattern):
                permitted |= grant.actions
        return tuple(a for a in entry.actions if a in permitted)

    def mint(
        self,
        subject: str | None,
        access: list[AccessEntry],
        switches: IssuerSwitches | None = None,
    ) -> str:
        """A signed token for ``access`` as given (no policy, not recorded).

        ``switches`` defaults to the current ``self.switches``.
        """
        switches = self.switches if switches is None else switches
        now = int(time.time())
        if switches.expired:
            now -= 3600
        claims = {
            "iss": switches.issuer_name or self.issuer_name,
            "aud": self.service if switches.audience is None else switches.audience,
            "sub": subject or "",
            "iat": now,
            "nbf": now - 1,
            "exp": now + switches.expires_in,
            "jti": secrets.token_hex(8),
            "access": [entry.claim() for entry in access],
        }
        identity = self.rogue if switches.rogue_key else self.signer
        header: dict[str, object] = {"typ": "JWT", "alg": "ES256"}
        if switches.header == "x5c":
            header["x5c"] = identity.x5c
        else:
            header["kid"] = identity.kid
        signing_input = f"{_b64url_json(header)}.{_b64url_json(claims)}".encode("ascii")
        return f"{signing_input.decode('ascii')}.{_es256(identity.key, signing_input)}"

    def _record(self, record: IssuerRequest) -> None:
        with self._lock:
            self._requests.append(record)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_json(value: object) -> str:
    return _b64url(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def _es256(key: ec.EllipticCurvePrivateKey, data: bytes) -> str:
    # JWS ES256 is the raw 32-byte r || s, not the DER signature cryptography returns.
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    return _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def _basic_subject(authorization: str, users: dict[str, str]) -> str | None:
    """The user of a valid ``Basic`` header, or None (wrong scheme, user or password)."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    if user in users and secrets.compare_digest(users[user], password):
        return user
    return None


class _IssuerHandler(BaseHTTPRequestHandler):
    issuer: TokenIssuer  # bound per server by ``TokenIssuer.start``
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the recorded requests are the log."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        params = parse_qs(url.query, keep_blank_values=True)
        authorization = self.headers.get("Authorization")
        status, body, subject, granted, extra = self._answer(url.path, params, authorization)
        self._record(status, subject, granted)
        self._send(status, body, extra)

    def do_POST(self) -> None:
        # The OAuth2 POST flow is not offered; docker-style clients fall back to GET on 404.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(404, None, ())
        self._send(404, _error("NOT_FOUND", "use GET"), {})

    def _record(self, status: int, subject: str | None, granted: tuple[AccessEntry, ...]) -> None:
        url = urlsplit(self.path)
        server = self.server
        assert isinstance(server, LoopbackServer)
        self.issuer._record(
            IssuerRequest(
                method=self.command,
                path=url.path,
                query=url.query,
                params=parse_qs(url.query, keep_blank_values=True),
                authorization=self.headers.get("Authorization"),
                scheme=server.scheme,
                host=self.headers.get("Host", ""),
                status=status,
                subject=subject,
                granted=granted,
            )
        )

    def _answer(
        self, path: str, params: dict[str, list[str]], authorization: str | None
    ) -> tuple[int, dict[str, object], str | None, tuple[AccessEntry, ...], dict[str, str]]:
        issuer = self.issuer
        switches = issuer.switches
        if path != TOKEN_PATH:
            return 404, _error("NOT_FOUND", "no such endpoint"), None, (), {}
        if switches.status is not None:
            return switches.status, _error("DENIED", "switched"), None, (), {}
        if switches.require_service and params.get("service") != [issuer.service]:
            return 400, _error("UNSUPPORTED", "unknown service"), None, (), {}
        if switches.require_realm_query and not _kept(issuer.realm_query, params):
            message = "the realm's own query was dropped: merge into it, never replace it"
            return 400, _error("UNSUPPORTED", message), None, (), {}
        subject: str | None = None
        if authorization is not None:
            subject = _basic_subject(authorization, issuer.users)
            if subject is None:
                challenge = {"WWW-Authenticate": f'Basic realm="{issuer.issuer_name}"'}
                return 401, _error("UNAUTHORIZED", "bad credentials"), None, (), challenge
        requested = parse_scopes(params.get("scope", []))
        granted = tuple(AccessEntry(e.type, e.name, issuer.allowed(subject, e)) for e in requested)
        token = issuer.mint(subject, list(granted))
        body: dict[str, object] = {}
        if switches.fields in ("both", "token"):
            body["token"] = token
        if switches.fields in ("both", "access_token"):
            body["access_token"] = token
        body["expires_in"] = switches.expires_in
        body["issued_at"] = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        if params.get("offline_token") == ["true"] and subject is not None:
            body["refresh_token"] = f"refresh-{secrets.token_hex(8)}"
        return 200, body, subject, granted, {}

    def _send(self, status: int, body: dict[str, object], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _kept(realm_query: str, params: dict[str, list[str]]) -> bool:
    required = parse_qs(realm_query, keep_blank_values=True)
    return all(set(values) <= set(params.get(name, [])) for name, values in required.items())


def _error(code: str, message: str) -> dict[str, object]:
    return {"errors": [{"code": code, "message": message}]}
