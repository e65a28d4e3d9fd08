"""Push image fixtures over the registry API with httpx, no docker (registry.md §5.5).

Per platform: a config blob (``config.Labels`` carries the given labels) and
one gzip layer (a deterministic one-file tar), then the manifest by digest;
then the top level by tag: an OCI index or a Docker manifest list over the
platform manifests, or a single OCI / Docker v2 manifest. Content depends only
on (repository, tag, platforms, labels, kind), so pushing again gives the same
digests; a push whose top level is already stored with that digest is one
``HEAD`` (session-scoped registries see the same pushes in many tests).
``build_image`` computes an image without pushing it.

Manifests are serialised with ``indent=2`` and a trailing newline: a client
that re-serialises JSON before hashing gets a different digest (registry.md
§3). Every digest is computed locally from the exact bytes and checked against
the registry's ``Docker-Content-Digest``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import httpx

__all__ = [
    "BOOTSTRAP_LABEL",
    "DOCKER_CONFIG",
    "DOCKER_LAYER",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "MANIFEST_ACCEPT",
    "OCI_CONFIG",
    "OCI_INDEX",
    "OCI_LAYER",
    "OCI_MANIFEST",
    "Blob",
    "ImageKind",
    "PushError",
    "PushedImage",
    "PushedManifest",
    "build_image",
    "digest_of",
    "push_image",
]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
# registry.md §3: always all four.
MANIFEST_ACCEPT = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST])
BOOTSTRAP_LABEL = ("org.nebius.npa.skypilot-bootstrap-contract", "skypilot-0.12.2-v1")

ImageKind = Literal["oci-index", "docker-list", "oci-manifest", "docker-manifest"]


class PushError(RuntimeError):
    """The registry refused a push step, or answered another digest than computed."""


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of the exact bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return digest_of(self.data)

    @property
    def size(self) -> int:
        return len(self.data)

    def descriptor(self) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class PushedManifest:
    """A single-platform manifest as pushed: its exact bytes, config and layers."""

    media_type: str
    body: bytes
    platform: str  # "linux/amd64"
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def digest(self) -> str:
        return digest_of(self.body)


@dataclass(frozen=True)
class PushedImage:
    """What ``push_image`` stored: the top-level manifest (``digest``, ``body``) and its children.

    For a single manifest (``oci-manifest``/``docker-manifest``) ``children``
    holds that manifest itself, so ``child("linux/amd64")`` works for every kind.
    """

    repository: str
    tag: str | None
    kind: ImageKind
    media_type: str
    body: bytes
    children: tuple[PushedManifest, ...]

    @property
    def digest(self) -> str:
        return digest_of(self.body)

    def child(self, platform: str = "linux/amd64") -> PushedManifest:
        for manifest in self.children:
            if manifest.platform == platform:
                return manifest
        raise KeyError(platform)


def push_image(
    client: httpx.Client,
    repository: str,
    tag: str | None = "latest",
    *,
    kind: ImageKind = "oci-index",
    platforms: tuple[str, ...] = ("linux/amd64",),
    labels: dict[str, str] | None = None,
) -> PushedImage:
    """Push an image through ``client`` (base URL, TLS and auth already set).

    ``tag=None`` pushes the top level by digest only (untagged). Single-manifest
    kinds use ``platforms[0]``.

    Raises:
        PushError: a step was refused, or a digest differs from the local one.
    """
    image = build_image(repository, tag, kind=kind, platforms=platforms, labels=labels)
    reference = tag or image.digest
    if _stored_digest(client, repository, reference) == image.digest:
        return image  # deterministic content: already pushed, identical bytes
    for child in image.children:
        for blob in (child.config, *child.layers):
            _push_blob(client, repository, blob)
        if image.kind in ("oci-index", "docker-list"):
            _put_manifest(client, repository, child.digest, child.media_type, child.body)
    _put_manifest(client, repository, reference, image.media_type, image.body)
    return image


def build_image(
    repository: str,
    tag: str | None = "latest",
    *,
    kind: ImageKind = "oci-index",
    platforms: tuple[str, ...] = ("linux/amd64",),
    labels: dict[str, str] | None = None,
) -> PushedImage:
    """The image ``push_image`` would push, computed locally (no I/O)."""
    docker = kind.startswith("docker")
    single = kind in ("oci-manifest", "docker-manifest")
    children = tuple(
        _platform_manifest(repository, tag, platform, labels or {}, docker=docker)
        for platform in (platforms[:1] if single else platforms)
    )
    if single:
        media_type, body = children[0].media_type, children[0].body
    else:
        media_type = DOCKER_LIST if docker else OCI_INDEX
        body = _serialise(
            {
                "schemaVersion": 2,
                "mediaType": media_type,
                "manifests": [
                    {
                        "mediaType": child.media_type,
                        "digest": child.digest,
                        "size": len(child.body),
                        "platform": _platform(child.platform),
                    }
                    for child in children
                ],
            }
        )
    return PushedImage(
        repository=repository,
        tag=tag,
        kind=kind,
        media_type=media_type,
        body=body,
        children=children,
    )


def _stored_digest(client: httpx.Client, repository: str, reference: str) -> str | None:
    response = client.head(
        f"/v2/{repository}/manifests/{reference}", headers={"Accept": MANIFEST_ACCEPT}
    )
    return response.headers.get("Docker-Content-Digest") if response.status_code == 200 else None


def _platform(value: str) -> dict[str, str]:
    os_name, architecture, *variant = value.split("/")
    platform = {"architecture": architecture, "os": os_name}
    if variant:
        platform["variant"] = variant[0]
    return platform


def _serialise(document: dict[str, object]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def _layer_tar(text: str) -> bytes:
    data = text.encode("utf-8")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("npa-fixture.txt")
        info.size, info.mtime, info.mode = len(data), 0, 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _platform_manifest(
    repository: str, tag: str | None, platform: str, labels: dict[str, str], *, docker: bool
) -> PushedManifest:
    tar = _layer_tar(f"{repository}:{tag} {platform}\n")
    layer = Blob(DOCKER_LAYER if docker else OCI_LAYER, gzip.compress(tar, mtime=0))
    spec = _platform(platform)
    config_document: dict[str, object] = {
        **spec,
        "config": {"Labels": dict(labels)},
        "rootfs": {"type": "layers", "diff_ids": [digest_of(tar)]},
    }
    config = Blob(DOCKER_CONFIG if docker else OCI_CONFIG, _serialise(config_document))
    media_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
    body = _serialise(
        {
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": config.descriptor(),
            "layers": [layer.descriptor()],
        }
    )
    return PushedManifest(
        media_type=media_type, body=body, platform=platform, config=config, layers=(layer,)
    )


def _push_blob(client: httpx.Client, repository: str, blob: Blob) -> None:
    started = client.post(f"/v2/{repository}/blobs/uploads/")
    _expect(started, 202, f"start upload to {repository}")
    location = started.headers["Location"]
    # registry.md §5.5: append the digest by hand; params= would replace the _state query.
    separator = "&" if "?" in location else "?"
    done = client.put(
        f"{location}{separator}digest={blob.digest}",
        content=blob.data,
        headers={"Content-Type": "application/octet-stream"},
    )
    _expect(done, 201, f"upload {blob.digest} to {repository}")
    _check_digest(done, blob.digest)


def _put_manifest(
    client: httpx.Client, repository: str, reference: str, media_type: str, body: bytes
) -> None:
    response = client.put(
        f"/v2/{repository}/manifests/{reference}",
        content=body,
        headers={"Content-Type": media_type},
    )
    _expect(response, 201, f"put manifest {repository}:{reference}")
    _check_digest(response, digest_of(body))


def _expect(response: httpx.Response, status: int, what: str) -> None:
    if response.status_code != status:
        raise PushError(f"{what}: HTTP {response.status_code} {response.text[:500]}")


def _check_digest(response: httpx.Response, expected: str) -> None:
    answered = response.headers.get("Docker-Content-Digest")
    if answered != expected:
        raise PushError(f"registry answered digest {answered}, computed {expected}")
