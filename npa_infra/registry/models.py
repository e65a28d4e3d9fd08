"""The records of image preflight: references, statuses and the per-image row (registry.md §2.2).

``CheckStatus`` values are the strings of ``preflight-images --json``
(cli.md §1.3). ``DEFINITE`` and ``UNPROVEN`` split them by what the caller
must do, and ``exit_code`` maps a set of statuses to the command's exit code:
0 when every image is ``ok``, 1 on any definite failure, otherwise 2.

``ImageRef`` is a parsed reference (``reference.parse``); ``ManifestCheck`` is
what one registry answered for one reference; ``CheckResult`` is the row the
user sees, with the states that use the image and the next step to take.
``ProbeRecord`` is the in-cluster pull probe's evidence on that row
(kubernetes.md §9): its verdict, the pod it created, where it ran, the
``imageID`` the runtime reported, why, and whether cleanup was verified.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFINITE",
    "DOCKER_HUB",
    "INDEX_MEDIA_TYPES",
    "LINUX_AMD64",
    "MANIFEST_ACCEPT",
    "MANIFEST_MEDIA_TYPES",
    "UNPROVEN",
    "CheckResult",
    "CheckStatus",
    "ImageRef",
    "InvalidReference",
    "ManifestCheck",
    "Platform",
    "ProbeCleanup",
    "ProbeRecord",
    "ProbeVerdict",
    "exit_code",
    "is_loopback_host",
]

DOCKER_HUB = "registry-1.docker.io"

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_MEDIA_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_MEDIA_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
# registry.md §3: always all four; without the list and index types a registry
# silently answers with a child manifest and the wrong digest would be pinned.
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))


class CheckStatus(StrEnum):
    OK = "ok"
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"
    NO_CREDENTIALS = "no_credentials"
    UNTRUSTED_REALM = "untrusted_realm"
    INVALID = "invalid"
    UNREACHABLE = "unreachable"
    ERROR = "error"
    TARGET_PULL_UNVERIFIED = "target_pull_unverified"
    # cli.md §1.3 (add): the in-cluster pull probe's verdicts and the bootstrap-contract rule.
    PROBE_INCOMPATIBLE = "probe_incompatible"
    PROBE_INDETERMINATE = "probe_indeterminate"


# cli.md §1.3 exit codes: a definite failure is proven; an unproven one may pass on retry.
DEFINITE = frozenset(
    {
        CheckStatus.FORBIDDEN,
        CheckStatus.UNAUTHORIZED,
        CheckStatus.NOT_FOUND,
        CheckStatus.INVALID,
        CheckStatus.NO_CREDENTIALS,
        CheckStatus.UNTRUSTED_REALM,
        CheckStatus.PROBE_INCOMPATIBLE,
    }
)
UNPROVEN = frozenset(
    {
        CheckStatus.UNREACHABLE,
        CheckStatus.ERROR,
        CheckStatus.TARGET_PULL_UNVERIFIED,
        CheckStatus.PROBE_INDETERMINATE,
    }
)


def exit_code(statuses: Iterable[CheckStatus]) -> int:
    """0 when every status is ``ok``, 1 on any definite failure, 2 when only unproven ones remain."""
    seen = set(statuses)
    if seen & DEFINITE:
        return 1
    if seen - {CheckStatus.OK}:
        return 2
    return 0


def is_loopback_host(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` or ``::1``: the hosts contacted over plain HTTP (cli.md §0)."""
    text = host.strip().lower().removeprefix("[").removesuffix("]")
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class Platform(NamedTuple):
    """The platform a cluster pulls; Kubernetes nodes here are linux/amd64 (registry.md §3)."""

    os: str = "linux"
    architecture: str = "amd64"
    variant: str = ""

    def __str__(self) -> str:
        base = f"{self.os}/{self.architecture}"
        return f"{base}/{self.variant}" if self.variant else base


LINUX_AMD64 = Platform()


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A parsed ``[registry/]repository[:tag][@sha256:…]`` (registry.md §1).

    ``registry`` is the API host (with its port): Docker Hub references name
    ``registry-1.docker.io``. ``name`` is the reference as written, without
    tag or digest, so a pinned reference keeps the user's spelling.
    """

    text: str
    registry: str
    repository: str
    name: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What the manifest URL names: the digest when there is one, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def host(self) -> str:
        """The registry host without its port (``[::1]`` keeps its brackets off)."""
        text = self.registry
        if text.startswith("["):
            return text[1 : text.find("]")] if "]" in text else text[1:]
        return text.rsplit(":", 1)[0] if ":" in text else text

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)

    def pinned(self, digest: str) -> str:
        """``<registry>/<repo>@<digest>``, spelled as the user wrote the name."""
        return f"{self.name}@{digest}"


@dataclass(frozen=True, slots=True)
class InvalidReference:
    """A reference that fails local syntax; it is never sent to a registry (registry.md §1)."""

    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class ManifestCheck:
    """What one registry answered for one reference, already classified."""

    status: CheckStatus
    detail: str = ""
    remedy: str = ""
    http_status: int | None = None
    error_code: str | None = None
    digest: str | None = None
    platform_digest: str | None = None
    media_type: str | None = None


class ProbeVerdict(StrEnum):
    """kubernetes.md §9.5: what one pull-probe pod proved."""

    COMPATIBLE = "compatible"  # Succeeded, digest proven, cleanup verified
    INCOMPATIBLE = "incompatible"  # Failed, or a permanent waiting reason
    INDETERMINATE = "indeterminate"  # anything else


class ProbeCleanup(StrEnum):
    """What became of the probe pod (kubernetes.md §5.3, §9.4 step 6)."""

    VERIFIED = "verified"  # UID-preconditioned DELETE, then confirmed gone
    FAILED = "failed"  # it may still exist: left labelled for inspection; blocks submission
    NOT_CREATED = "not_created"  # no pod was created


class ProbeRecord(BaseModel):
    """cli.md §1.3's ``probe {status, pod, namespace, node, image_id, reason, cleanup}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ProbeVerdict
    pod: str | None = None
    namespace: str | None = None
    node: str | None = None
    image_id: str | None = None
    reason: str = ""
    cleanup: ProbeCleanup = ProbeCleanup.NOT_CREATED


class CheckResult(BaseModel):
    """One row of ``preflight-images``: cli.md §1.3's keys plus ``error_code``, ``platform_digest``, ``steps``, ``probe``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str
    status: CheckStatus
    http_status: int | None = None
    error_code: str | None = None
    detail: str = ""
    remedy: str = ""
    digest: str | None = None
    platform_digest: str | None = None
    steps: tuple[str, ...] = ()
    probe: ProbeRecord | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = self.model_dump(mode="json")
        return out
