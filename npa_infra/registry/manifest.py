"""Verify a manifest answer and resolve the platform the cluster pulls (registry.md §3); pure.

The digest is ``sha256:`` + sha256 of the exact body bytes, never of
re-serialised JSON. ``Docker-Content-Digest`` and a digest reference must
both equal it, or the answer is an ``error`` (a registry serving content
other than it names). An OCI index or Docker manifest list resolves to its
child for the requested platform; attestation entries (``unknown/unknown``)
are skipped. An index without that platform is ``not_found``: the pull would
fail with "no matching manifest" every time, so it is a definite failure
(the detail names the platforms the index does have).

``config_digest`` and ``config_labels`` read the labels of the manifest the
cluster pulls: the platform manifest fetched by its digest names its config
blob, and the blob's ``config.Labels`` hold the labels; each body must hash to
the digest it was fetched by, or the answer is an ``error``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from npa_infra.registry import classify
from npa_infra.registry.models import (
    INDEX_MEDIA_TYPES,
    MANIFEST_MEDIA_TYPES,
    CheckStatus,
    ImageRef,
    ManifestCheck,
    Platform,
)

__all__ = ["config_digest", "config_labels", "verify"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def verify(
    body: bytes,
    *,
    ref: ImageRef,
    platform: Platform,
    header_digest: str = "",
    content_type: str = "",
) -> ManifestCheck:
    """Classify a 200 manifest answer: ``ok`` with its digest (and platform digest), or why not."""
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    header = header_digest.strip()
    if header and header != computed:
        return classify.digest_mismatch(header, computed, what="Docker-Content-Digest")
    if ref.digest and ref.digest != computed:
        return classify.digest_mismatch(ref.digest, computed, what="the reference")
    try:
        doc: Any = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return classify.malformed("the manifest body is not a JSON object", 200)
    media = str(doc.get("mediaType") or content_type.split(";", 1)[0].strip())
    if media in INDEX_MEDIA_TYPES or (not doc.get("mediaType") and "manifests" in doc):
        return _from_index(doc, media, computed, platform)
    if media in MANIFEST_MEDIA_TYPES or ("config" in doc and "layers" in doc):
        return ManifestCheck(
            CheckStatus.OK, "single-platform manifest", "", 200, None, computed, None, media
        )
    return classify.malformed(f"unsupported manifest media type {media or '(none)'}", 200)


def _from_index(doc: dict[str, Any], media: str, digest: str, platform: Platform) -> ManifestCheck:
    entries = doc.get("manifests")
    if not isinstance(entries, list):
        return classify.malformed("the index has no manifests list", 200)
    offered: list[str] = []
    for entry in entries:
        plat = entry.get("platform") if isinstance(entry, dict) else None
        if not isinstance(plat, dict):
            continue
        here = Platform(
            str(plat.get("os", "")), str(plat.get("architecture", "")), str(plat.get("variant", ""))
        )
        if here.os == "unknown":
            continue  # attestation manifests (buildx provenance) are not runnable
        offered.append(str(here))
        wanted = here.os == platform.os and here.architecture == platform.architecture
        if wanted and (not platform.variant or here.variant == platform.variant):
            child = str(entry.get("digest", ""))
            if not _DIGEST.fullmatch(child):
                return classify.malformed(
                    f"the index entry for {platform} has digest {child!r}", 200
                )
            return ManifestCheck(
                CheckStatus.OK,
                f"index; {platform} manifest {child}",
                "",
                200,
                None,
                digest,
                child,
                media,
            )
    return ManifestCheck(
        CheckStatus.NOT_FOUND,
        f"the index declares no {platform} manifest (it has: {', '.join(offered) or 'none'})",
        f"build and push the image for {platform} (docker buildx build --platform {platform} …)",
        200,
        "PLATFORM_NOT_FOUND",
        digest,
        None,
        media,
    )


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        doc: Any = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def config_digest(body: bytes, *, digest: str, header_digest: str = "") -> str | ManifestCheck:
    """The config blob digest of a platform manifest fetched by ``digest``, or why not."""
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    header = header_digest.strip()
    if header and header != computed:
        return classify.digest_mismatch(header, computed, what="Docker-Content-Digest")
    if computed != digest:
        return classify.digest_mismatch(digest, computed, what="the manifest check")
    doc = _json_object(body)
    if doc is None:
        return classify.malformed("the platform manifest body is not a JSON object", 200)
    config = doc.get("config")
    child = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(child, str) or not _DIGEST.fullmatch(child):
        return classify.malformed(f"the platform manifest {digest} names no sha256 config", 200)
    return child


def config_labels(body: bytes, *, digest: str) -> dict[str, str] | ManifestCheck:
    """``config.Labels`` of an image config blob fetched by ``digest`` (absent or null: none)."""
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    if computed != digest:
        return classify.digest_mismatch(
            digest, computed, what="the manifest", body="the config blob"
        )
    doc = _json_object(body)
    if doc is None:
        return classify.malformed(f"the image config {digest} is not a JSON object", 200)
    config = doc.get("config")
    if config is None:
        return {}
    labels = config.get("Labels") if isinstance(config, dict) else None
    if labels is None and isinstance(config, dict):
        return {}
    if not isinstance(labels, dict):
        return classify.malformed(f"the image config {digest} has malformed config.Labels", 200)
    # OCI labels are strings; another JSON value is kept as its JSON text, never dropped.
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        for k, v in labels.items()
    }
