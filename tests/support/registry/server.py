"""A started test registry in one of the modes of registry.md §5, as the fixtures expose it.

- ``start_plain``: mode A, plain HTTP, no auth.
- ``start_token``: mode B, TLS plus token auth against an in-process
  ``TokenIssuer``. The realm's scheme and host name are parameters: the
  default is HTTPS on ``127.0.0.1`` (the registry's own host: a trusted realm
  under registry.md §2.1); ``localhost`` names a foreign host; a plain-HTTP
  realm is the hostile case. The registry never calls its realm, so any of
  them works with the real registry.
- ``start_htpasswd``: mode C, plain HTTP with bcrypt htpasswd (Basic auth).

The registry is addressed as ``127.0.0.1:<port>``; its TLS certificate is
also valid for ``localhost``.
"""

from __future__ import annotations

import base64
import functools
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tests.support.registry.issuer import SERVICE, USERS, AccessEntry, IssuerSwitches, TokenIssuer
from tests.support.registry.listener import server_tls_context
from tests.support.registry.pki import Pki
from tests.support.registry.process import RegistryProcess, htpasswd_file
from tests.support.registry.push import ImageKind, PushedImage, push_image

if TYPE_CHECKING:
    import httpx

__all__ = ["MD5_USERS", "Mode", "Registry", "start_htpasswd", "start_plain", "start_token"]

Mode = Literal["plain", "token", "htpasswd"]
HTPASSWD_REALM = "npa-test-basic"
# registry.md §5.4: only bcrypt entries work; this $apr1$ user gets 401.
MD5_USERS: dict[str, str] = {"legacy": "legacypw"}


@dataclass
class Registry:
    """A running registry; ``reset()`` runs before each test (issuer records and switches)."""

    mode: Mode
    process: RegistryProcess
    ca_path: Path | None
    issuer: TokenIssuer | None = None
    users: dict[str, str] = field(default_factory=lambda: dict(USERS))
    basic_realm: str | None = None  # htpasswd mode's ``Basic realm``

    @property
    def scheme(self) -> str:
        return "https" if self.ca_path is not None else "http"

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def service(self) -> str | None:
        return self.issuer.service if self.issuer is not None else None

    @property
    def realm(self) -> str | None:
        """The challenge's ``realm`` (token mode), query included."""
        return self.issuer.realm if self.issuer is not None else None

    def ref(self, repository: str, tag: str | None = None, digest: str | None = None) -> str:
        """An image reference on this registry: ``127.0.0.1:<port>/<repo>[:tag][@digest]``."""
        return (
            f"{self.host}/{repository}"
            + (f":{tag}" if tag else "")
            + (f"@{digest}" if digest else "")
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context trusting only the test CA (None in plain-HTTP modes)."""
        if self.ca_path is None:
            return None
        return ssl.create_default_context(cafile=str(self.ca_path))

    @functools.cached_property
    def _client_context(self) -> ssl.SSLContext:
        # Built once: httpx's own default context loads the system CAs (~40 ms per client).
        return self.ssl_context() or ssl.create_default_context()

    def client(self, **kwargs: Any) -> httpx.Client:
        """An ``httpx.Client`` on ``base_url`` that trusts the test CA; kwargs go to httpx."""
        import httpx

        kwargs.setdefault("verify", self._client_context)
        kwargs.setdefault("timeout", 10)
        return httpx.Client(base_url=self.base_url, **kwargs)

    def admin_headers(
        self, repository: str, actions: tuple[str, ...] = ("pull", "push")
    ) -> dict[str, str]:
        """Headers with alice's authority on ``repository``, bypassing the realm (not recorded).

        Token mode mints a token in-process with the default switches; htpasswd
        mode uses Basic alice; plain mode needs nothing.
        """
        if self.issuer is not None:
            entry = AccessEntry("repository", repository, actions)
            switches = IssuerSwitches(header=self.issuer.default_header)
            return {"Authorization": f"Bearer {self.issuer.mint('alice', [entry], switches)}"}
        if self.mode == "htpasswd":
            basic = base64.b64encode(f"alice:{self.users['alice']}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        return {}

    def push(
        self,
        repository: str,
        tag: str | None = "latest",
        *,
        kind: ImageKind = "oci-index",
        platforms: tuple[str, ...] = ("linux/amd64",),
        labels: dict[str, str] | None = None,
    ) -> PushedImage:
        """Push a fixture image as alice (``push.push_image``); returns its exact bytes and digests."""
        with self.client(headers=self.admin_headers(repository)) as client:
            return push_image(
                client, repository, tag, kind=kind, platforms=platforms, labels=labels
            )

    def reset(self) -> None:
        if self.issuer is not None:
            self.issuer.reset()

    def stop(self) -> None:
        self.process.stop()
        if self.issuer is not None:
            self.issuer.stop()


def start_plain(root: Path) -> Registry:
    """Mode A (registry.md §5.2)."""
    return Registry(mode="plain", process=RegistryProcess.start(root), ca_path=None)


def start_token(
    root: Path,
    pki: Pki,
    *,
    header: Literal["x5c", "kid"] = "x5c",
    realm_scheme: Literal["https", "http"] = "https",
    realm_host: str = "127.0.0.1",
    realm_query: str = "",
    realm_port: int | None = None,
) -> Registry:
    """Mode B (registry.md §5.3): TLS registry, token auth, an issuer on ``realm_scheme``."""
    tls = server_tls_context(pki.server_cert_path, pki.server_key_path)
    issuer = TokenIssuer.start(
        signer=pki.signer,
        rogue=pki.rogue,
        tls=tls if realm_scheme == "https" else None,
        header=header,
        realm_host=realm_host,
        realm_query=realm_query,
        realm_port=realm_port,
    )
    auth = {
        "token": {
            "realm": issuer.realm,
            "service": SERVICE,
            "issuer": issuer.issuer_name,
            "rootcertbundle": str(pki.signer.cert_path),
        }
    }
    try:
        process = RegistryProcess.start(
            root,
            auth=auth,
            tls_files=(pki.server_cert_path, pki.server_key_path),
            ca_path=pki.ca_path,
        )
    except BaseException:
        issuer.stop()
        raise
    return Registry(mode="token", process=process, ca_path=pki.ca_path, issuer=issuer)


def start_htpasswd(root: Path) -> Registry:
    """Mode C (registry.md §5.4): plain HTTP, bcrypt htpasswd; ``legacy`` is an $apr1$ entry."""
    root.mkdir(parents=True, exist_ok=True)
    path = htpasswd_file(root / "htpasswd", USERS, MD5_USERS)
    auth = {"htpasswd": {"realm": HTPASSWD_REALM, "path": str(path)}}
    return Registry(
        mode="htpasswd",
        process=RegistryProcess.start(root, auth=auth),
        ca_path=None,
        basic_realm=HTPASSWD_REALM,
    )
