"""Image pins: which workbench image serves which tools, at which tag.

The tags here are the single source of truth for the project's own images;
the operator guides in ``workflows/guides/`` quote them and a guardrail test
keeps the two equal. A digest pin, when set, replaces the tag.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "DEFAULT_REGISTRY",
    "IMAGE_PINS",
    "TOOL_IMAGE_PREFIXES",
    "ImagePin",
    "build_command",
    "catalog_image",
    "image_name_for_tool",
]

DEFAULT_REGISTRY = "ghcr.io/nebius/nebius-physical-ai"


class ImagePin(NamedTuple):
    name: str
    tag: str
    digest: str = ""
    context: str = ""


IMAGE_PINS: dict[str, ImagePin] = {
    pin.name: pin
    for pin in (
        ImagePin("npa-workbench", "0.12.4", context="images/workbench"),
        ImagePin("npa-cosmos", "0.12.4", context="images/cosmos"),
        ImagePin("npa-cosmos2-transfer", "0.12.4", context="images/cosmos2-transfer"),
        ImagePin("npa-cosmos3", "0.12.4", context="images/cosmos3"),
        ImagePin("npa-cosmos-curator", "0.12.4", context="images/cosmos-curator"),
        ImagePin("npa-isaac-lab", "0.12.4", context="images/isaac-lab"),
        ImagePin("npa-sonic", "0.12.4", context="images/sonic"),
        ImagePin("npa-viewer", "0.12.4", context="images/viewer"),
        ImagePin("npa-fiftyone", "0.12.4", context="images/fiftyone"),
    )
}

# toolRef prefix → image name; the longest matching prefix wins (dsl.md §6.2).
# ``None`` marks image-less tools: they run from staged source (NPA_SRC_S3_URI).
TOOL_IMAGE_PREFIXES: dict[str, str | None] = {
    "workbench": "npa-workbench",
    "workflow": "npa-workbench",
    "infra": "npa-workbench",
    "workbench.vlm_eval": "npa-cosmos",
    "workbench.cosmos": "npa-cosmos",
    "workbench.cosmos2": "npa-cosmos2-transfer",
    "workbench.cosmos3": "npa-cosmos3",
    "workbench.cosmos_curate": "npa-cosmos-curator",
    "workbench.rl": "npa-isaac-lab",
    "workbench.isaac_lab": "npa-isaac-lab",
    "workbench.sonic": "npa-sonic",
    "workbench.mjlab": "npa-sonic",
    "workbench.nurec": "npa-viewer",
    "workbench.rerun": "npa-viewer",
    "workbench.fiftyone": "npa-fiftyone",
    "workbench.token_factory": None,
    "workbench.insights": None,
    "workbench.dataset": None,
}

# ``tool://X`` short names (dsl.md §6.2) → image name.
TOOL_URI_IMAGES: dict[str, str] = {
    "workbench": "npa-workbench",
    "cosmos": "npa-cosmos",
    "cosmos2": "npa-cosmos2-transfer",
    "cosmos3": "npa-cosmos3",
    "curator": "npa-cosmos-curator",
    "isaac_lab": "npa-isaac-lab",
    "rl": "npa-isaac-lab",
    "sonic": "npa-sonic",
    "mjlab": "npa-sonic",
    "viewer": "npa-viewer",
    "fiftyone": "npa-fiftyone",
}


def image_name_for_tool(tool_ref: str) -> str | None:
    """The image name for the longest matching toolRef prefix, or None when image-less."""
    best: str | None = None
    best_len = -1
    for prefix, image in TOOL_IMAGE_PREFIXES.items():
        matches = tool_ref == prefix or tool_ref.startswith(prefix + ".")
        if matches and len(prefix) > best_len:
            best, best_len = image, len(prefix)
    return best


def catalog_image(name: str, registry: str) -> str:
    """``<registry>/<name>:<tag>``, or ``@<digest>`` when a digest is pinned."""
    pin = IMAGE_PINS.get(name) or ImagePin(name, IMAGE_PINS["npa-workbench"].tag)
    ref = f"{registry.rstrip('/')}/{pin.name}"
    return f"{ref}@{pin.digest}" if pin.digest else f"{ref}:{pin.tag}"


def build_command(name: str, registry: str = DEFAULT_REGISTRY) -> str:
    """The command that builds and pushes the pinned tag of a first-party image."""
    pin = IMAGE_PINS[name]
    ref = f"{registry.rstrip('/')}/{pin.name}:{pin.tag}"
    return f"docker buildx build --platform linux/amd64 -t {ref} --push {pin.context}"
