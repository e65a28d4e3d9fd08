"""Which GPU node label SkyPilot 0.12 reads, and the name it derives from it.

SkyPilot picks one label key per cluster (skypilot-0.12.md §9.4): the first
key of its priority list that carries a non-empty, valid value on any node.
Every other GPU label is invisible to it, which is why a node that so far
carries only ``nebius.com/gpu-name`` drops out of SkyPilot's view as soon as
another node gains ``nvidia.com/gpu.product`` (the labelling race,
kubernetes.md §8.3). The accelerator name SkyPilot matches is the label value
canonicalised per key, e.g. GPU Feature Discovery's ``NVIDIA-H100-80GB-HBM3``
becomes ``H100-80GB``. This module reproduces those rules; it reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "ALIAS_GROUP",
    "CANONICAL_GPU_NAMES",
    "GFD_KEY",
    "NEBIUS_KEY",
    "PRODUCT_KEYS",
    "SKYPILOT_KEYS",
    "accelerator_name",
    "normalise",
    "skypilot_label_key",
    "valid_value",
]

SKYPILOT_ACCELERATOR_KEY = "skypilot.co/accelerator"
GKE_KEY = "cloud.google.com/gke-accelerator"
KARPENTER_KEY = "karpenter.k8s.aws/instance-gpu-name"
GFD_KEY = "nvidia.com/gpu.product"
COREWEAVE_KEY = "gpu.nvidia.com/class"
NEBIUS_KEY = "nebius.com/gpu-name"

# SkyPilot's LABEL_FORMATTER_REGISTRY order: the first key present on any node wins.
SKYPILOT_KEYS: tuple[str, ...] = (
    SKYPILOT_ACCELERATOR_KEY,
    GKE_KEY,
    KARPENTER_KEY,
    GFD_KEY,
    COREWEAVE_KEY,
    NEBIUS_KEY,
)

# GPU product keys npa-infra recognises on a node (kubernetes.md §8.1), beyond SkyPilot's.
PRODUCT_KEYS: tuple[str, ...] = (
    GFD_KEY,
    "nebius.com/gpu",
    NEBIUS_KEY,
    SKYPILOT_ACCELERATOR_KEY,
    GKE_KEY,
    KARPENTER_KEY,
    COREWEAVE_KEY,
)

# SkyPilot 0.12's canonical GPU names, most specific first: the first whole-word
# hit in a GFD value is the accelerator name.
CANONICAL_GPU_NAMES: tuple[str, ...] = (
    "GB300",
    "GB200",
    "B300",
    "B200",
    "B100",
    "GH200",
    "H200",
    "H100-80GB",
    "H100-MEGA",
    "H100",
    "A100-80GB",
    "A100",
    "A10G",
    "A10",
    "A16",
    "A30",
    "A40",
    "RTX6000-Ada",
    "L40S",
    "L40",
    "L4",
    "A6000",
    "A5000",
    "A4000",
    "V100-32GB",
    "V100",
    "P100",
    "P40",
    "P4000",
    "P4",
    "T4g",
    "T4",
    "K80",
    "M60",
)
# Memory variants GFD spells with the form factor in between: H100-SXM5-80GB.
_MEMORY_VARIANTS = {
    "A100-80GB": re.compile(r"A100.*-80GB"),
    "H100-80GB": re.compile(r"H100.*-80GB"),
}
_COREWEAVE_NAMES = {"H100_NVLINK_80GB": "H100"}

# kubernetes.md §8.3: normalised names that denote the same RTX PRO 6000 GPU.
ALIAS_GROUP: frozenset[str] = frozenset(
    {
        "rtx6000",
        "rtxpro6000",
        "rtxpro6000blackwellserveredition",
        "nvidiartxpro6000blackwellserveredition",
    }
)
_NON_ALNUM = re.compile(r"[^0-9a-z]")


def normalise(name: str) -> str:
    """Casefold and drop every non-alphanumeric character (kubernetes.md §8.3)."""
    return _NON_ALNUM.sub("", name.casefold())


def valid_value(key: str, value: str) -> bool:
    """Whether SkyPilot accepts ``value`` under ``key``; an invalid value disqualifies the key."""
    if key in (SKYPILOT_ACCELERATOR_KEY, KARPENTER_KEY):
        return value == value.lower()
    if key == NEBIUS_KEY:
        return value == value.upper()
    if key == GKE_KEY:
        return value.startswith(("nvidia-", "tpu-"))
    return True


def _gfd_name(value: str) -> str:
    for canonical in CANONICAL_GPU_NAMES:
        variant = _MEMORY_VARIANTS.get(canonical)
        if variant is not None and variant.search(value):
            return canonical
        if re.search(rf"\b{re.escape(canonical)}\b", value):
            return canonical
    # No canonical hit: the labeler's spelling (upper case, vendor prefixes dropped, RTX- joined).
    return value.upper().replace("NVIDIA-", "").replace("GEFORCE-", "").replace("RTX-", "RTX")


def _gke_name(value: str) -> str:
    if value.startswith("nvidia-tesla-"):
        return value.removeprefix("nvidia-tesla-").upper()
    if value.startswith("nvidia-"):
        name = value.removeprefix("nvidia-").upper()
        return {"H100-80GB": "H100", "H200-141GB": "H200"}.get(name, name)
    return value


def accelerator_name(key: str, value: str) -> str:
    """The accelerator name SkyPilot derives from ``key: value`` (the name it matches on)."""
    if key == GFD_KEY:
        return _gfd_name(value)
    if key == GKE_KEY:
        return _gke_name(value)
    if key == COREWEAVE_KEY:
        return _COREWEAVE_NAMES.get(value, value)
    return value.upper()


def skypilot_label_key(node_labels: Iterable[Mapping[str, str]]) -> str | None:
    """The one GPU label key SkyPilot reads on this cluster, or None when it sees no GPU label.

    Keys are tried in priority order; nodes in the order given (the API's
    order). Empty values are skipped; the first non-empty value decides: a
    valid one selects the key, an invalid one disqualifies it.
    """
    labels = [dict(n) for n in node_labels]
    for key in SKYPILOT_KEYS:
        for node in labels:
            value = node.get(key, "")
            if not value.strip():
                continue
            if valid_value(key, value):
                return key
            break
    return None
