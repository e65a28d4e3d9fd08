"""Which image a step runs in (dsl.md §6.2), and the baked-image rule.

Order: exact ``--image-override TOOLREF=IMG``; the longest prefix override;
``--image`` (``none``/``default``/``-`` mean no image); the profile's
``image`` (``tool://X`` maps to tool X's catalog image); the catalog image
of the longest matching toolRef prefix. A digest found by preflight replaces
the tag so the renderer emits exactly what was checked: ``pins`` maps an
image to the ``<registry>/<repo>@sha256:…`` reference preflight resolved
(registry.md §3), ``digests`` an image to a bare digest; a mutable tag is
never emitted for a pinned image.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from npa_infra.catalog import images as pins

__all__ = ["ImageSelection", "is_immutable_qualified", "resolve_image"]

NO_IMAGE = frozenset({"none", "default", "-"})
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class ImageSelection:
    overrides: Sequence[tuple[str, str]] = ()
    global_image: str | None = None
    registry: str = pins.DEFAULT_REGISTRY
    digests: Mapping[str, str] = field(default_factory=dict)
    pins: Mapping[str, str] = field(default_factory=dict)


def _override(tool_ref: str, overrides: Sequence[tuple[str, str]]) -> str | None:
    if not tool_ref:
        return None
    for ref, image in overrides:
        if ref == tool_ref:
            return image
    best: tuple[int, str] | None = None
    for ref, image in overrides:
        if tool_ref.startswith(ref.rstrip(".") + ".") and (best is None or len(ref) > best[0]):
            best = (len(ref), image)
    return best[1] if best else None


def _pin(image: str, sel: ImageSelection) -> str:
    pinned = sel.pins.get(image)
    if pinned:
        return pinned
    digest = sel.digests.get(image)
    if not digest or "@" in image:
        return image
    repo = image
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo = image[: len(image) - len(last)] + last.split(":", 1)[0]
    return f"{repo}@{digest}"


def resolve_image(tool_ref: str, profile_image: object, sel: ImageSelection) -> str | None:
    """The image for one step, or None for an image-less step."""
    chosen = _override(tool_ref, sel.overrides)
    if chosen is None and sel.global_image is not None:
        if sel.global_image.strip().lower() in NO_IMAGE:
            return None
        chosen = sel.global_image
    if chosen is None and isinstance(profile_image, str) and profile_image.strip():
        text = profile_image.strip()
        if text.startswith("tool://"):
            short = text.removeprefix("tool://")
            name = pins.TOOL_URI_IMAGES.get(short) or f"npa-{short}"
            chosen = pins.catalog_image(name, sel.registry)
        else:
            chosen = text
    if chosen is None and tool_ref:
        served_by = pins.image_name_for_tool(tool_ref)
        chosen = pins.catalog_image(served_by, sel.registry) if served_by else None
    return _pin(chosen, sel) if chosen else None


def is_immutable_qualified(image: str) -> bool:
    """Registry-qualified (host with a dot, a port or localhost) and pinned by sha256 digest."""
    if not _DIGEST.search(image):
        return False
    host = image.split("/", 1)[0]
    return "/" in image and ("." in host or ":" in host or host == "localhost")
