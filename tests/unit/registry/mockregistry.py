"""An in-memory OCI registry and token realm behind ``httpx.MockTransport``.

``MockRegistry`` serves ``/v2/<repo>/manifests/<ref>`` and
``/v2/<repo>/blobs/<digest>`` for one host with no auth, Bearer token auth (an issuer at ``realm``) or Basic auth; grants are
per repository: ``public`` for everyone, ``grants[user]`` for a user with the
right password. ``faults`` run first and may answer any request. Every
request is recorded, with its ``Authorization``, so tests see where
credentials went.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import httpx

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
CONTRACT_LABEL = {"org.nebius.npa.skypilot-bootstrap-contract": "skypilot-0.12.2-v1"}
ACCEPT = (
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json"
)
Fault = Callable[[httpx.Request], httpx.Response | None]


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def manifest_body(seed: str) -> bytes:
    """A single-platform OCI manifest, serialised with indentation (hash the exact bytes)."""
    config = digest(f"config {seed}".encode())
    layer = digest(f"layer {seed}".encode())
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer}],
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def config_body(labels: dict[str, str] | None) -> bytes:
    """An image config blob whose ``config.Labels`` are ``labels`` (None: no ``Labels`` key)."""
    config: dict[str, object] = {} if labels is None else {"Labels": labels}
    doc = {"architecture": "amd64", "os": "linux", "config": config}
    return (json.dumps(doc, indent=2) + "\n").encode()


def image_manifest_body(config: bytes) -> bytes:
    """A single-platform OCI manifest naming ``config`` as its config blob."""
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest(config), "size": len(config)},
        "layers": [],
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def index_body(platforms: dict[str, str]) -> bytes:
    """An OCI index over ``{"linux/amd64": child_digest, …}`` (``unknown/unknown`` = attestation)."""
    entries = []
    for plat, child in platforms.items():
        os_name, arch, *variant = plat.split("/")
        p = {"os": os_name, "architecture": arch}
        if variant:
            p["variant"] = variant[0]
        entries.append({"mediaType": OCI_MANIFEST, "digest": child, "size": 100, "platform": p})
    doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    return (json.dumps(doc, indent=2) + "\n").encode()


def errors(code: str, message: str = "") -> bytes:
    return json.dumps({"errors": [{"code": code, "message": message or code.lower()}]}).encode()


@dataclass
class MockRegistry:
    host: str = "registry.example.com"
    auth: Literal["none", "bearer", "basic"] = "none"
    realm: str = "https://registry.example.com/token"
    service: str = "registry.example.com"
    public: set[str] = field(default_factory=set)
    users: dict[str, str] = field(default_factory=lambda: {"alice": "alicepw"})
    grants: dict[str, set[str]] = field(default_factory=dict)
    manifests: dict[tuple[str, str], tuple[bytes, str]] = field(default_factory=dict)
    blobs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    scheme: str = "https"

    # -- content -------------------------------------------------------------------
    def add(self, repo: str, tag: str, body: bytes, media_type: str = OCI_MANIFEST) -> str:
        d = digest(body)
        self.manifests[(repo, tag)] = (body, media_type)
        self.manifests[(repo, d)] = (body, media_type)
        return d

    def add_image(
        self, repo: str, tag: str, labels: dict[str, str] | None, *, index: bool = False
    ) -> tuple[str, str, str]:
        """An image with its config blob; (top digest, platform manifest digest, config digest).

        With ``index`` the tag names an OCI index over linux/arm64 (another
        config) and the linux/amd64 manifest carrying ``labels``.
        """
        config = config_body(labels)
        self.blobs[(repo, digest(config))] = config
        child = image_manifest_body(config)
        child_digest = self.add(repo, digest(child), child)
        if not index:
            return self.add(repo, tag, child), child_digest, digest(config)
        other_config = config_body({"arch": "arm64"})
        self.blobs[(repo, digest(other_config))] = other_config
        other = image_manifest_body(other_config)
        self.add(repo, digest(other), other)
        body = index_body({"linux/arm64": digest(other), "linux/amd64": child_digest})
        return self.add(repo, tag, body, OCI_INDEX), child_digest, digest(config)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    # -- what the client sent --------------------------------------------------------------
    def token_requests(self) -> list[httpx.Request]:
        realm = urlsplit(self.realm)
        return [
            r for r in self.requests if r.url.host == realm.hostname and r.url.path == realm.path
        ]

    def manifest_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if "/manifests/" in r.url.path]

    def blob_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if "/blobs/" in r.url.path]

    def authorizations(self) -> list[str | None]:
        return [r.headers.get("authorization") for r in self.requests]

    # -- serving -----------------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        for fault in self.faults:
            answer = fault(request)
            if answer is not None:
                return answer
        realm = urlsplit(self.realm)
        if request.url.host == realm.hostname and request.url.path == realm.path:
            return self._token(request)
        if request.url.host != self.host.split(":")[0]:
            raise httpx.ConnectError(f"unknown host {request.url.host}", request=request)
        path = request.url.path
        if path.startswith("/v2/") and "/blobs/" in path:
            return self._blob(request, *path[len("/v2/") :].split("/blobs/", 1))
        if not path.startswith("/v2/") or "/manifests/" not in path:
            return httpx.Response(404, content=b"404 page not found\n")
        repo, ref = path[len("/v2/") :].split("/manifests/", 1)
        denied = self._authorize(request, repo)
        if denied is not None:
            return denied
        stored = self.manifests.get((repo, ref))
        if stored is None:
            return httpx.Response(404, content=errors("MANIFEST_UNKNOWN", "manifest unknown"))
        body, media_type = stored
        return httpx.Response(
            200,
            content=body,
            headers={"Content-Type": media_type, "Docker-Content-Digest": digest(body)},
        )

    def _blob(self, request: httpx.Request, repo: str, blob: str) -> httpx.Response:
        denied = self._authorize(request, repo)
        if denied is not None:
            return denied
        data = self.blobs.get((repo, blob))
        if data is None:
            return httpx.Response(404, content=errors("BLOB_UNKNOWN", "blob unknown to registry"))
        return httpx.Response(
            200,
            content=data,
            headers={"Content-Type": "application/octet-stream", "Docker-Content-Digest": blob},
        )

    def _subject(self, authorization: str | None) -> tuple[bool, str | None]:
        """(credentials valid, user); no header is (True, None): anonymous."""
        if not authorization:
            return True, None
        if not authorization.startswith("Basic "):
            return False, None
        user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        return (self.users.get(user) == password, user)

    def _allowed(self, user: str | None, repo: str) -> bool:
        return repo in self.public or (user is not None and repo in self.grants.get(user, set()))

    def _token(self, request: httpx.Request) -> httpx.Response:
        ok, user = self._subject(request.headers.get("authorization"))
        if not ok:
            return httpx.Response(401, content=errors("UNAUTHORIZED", "bad credentials"))
        scopes = parse_qs(request.url.query.decode()).get("scope", [])
        repo = scopes[0].split(":")[1] if scopes else ""
        actions = "pull" if self._allowed(user, repo) else "none"
        token = f"tok.{user or 'anon'}.{repo}.{actions}"
        return httpx.Response(200, json={"token": token, "expires_in": 300})

    def _authorize(self, request: httpx.Request, repo: str) -> httpx.Response | None:
        authorization = request.headers.get("authorization")
        if self.auth == "none":
            return None
        if self.auth == "basic":
            return httpx.Response(
                401,
                content=errors("UNAUTHORIZED"),
                headers={"WWW-Authenticate": 'Basic realm="test-basic"'},
            )
        scope = f"repository:{repo}:pull"
        challenge = f'Bearer realm="{self.realm}",service="{self.service}",scope="{scope}"'
        if not authorization:
            return httpx.Response(
                401, content=errors("UNAUTHORIZED"), headers={"WWW-Authenticate": challenge}
            )
        token = authorization.removeprefix("Bearer ")
        if token.endswith(f".{repo}.pull"):
            return None
        return httpx.Response(
            401,
            content=errors("UNAUTHORIZED", "authentication required"),
            headers={"WWW-Authenticate": challenge + ',error="insufficient_scope"'},
        )
