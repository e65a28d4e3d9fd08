"""SkyPilot 0.12's GPU label priority and canonicalisation (skypilot-0.12.md §9.4)."""

from __future__ import annotations

import pytest

from npa_infra.gpus import labels


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("nvidia.com/gpu.product", "NVIDIA-H100-SXM5-80GB", "H100-80GB"),
        ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB", "A100"),
        ("nvidia.com/gpu.product", "Tesla-T4", "T4"),
        ("nvidia.com/gpu.product", "NVIDIA-L40S", "L40S"),
        ("nvidia.com/gpu.product", "NVIDIA-L4", "L4"),
        ("nvidia.com/gpu.product", "NVIDIA-B200", "B200"),
        (
            "nvidia.com/gpu.product",
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            "RTXPRO-6000-BLACKWELL-SERVER-EDITION",
        ),
        ("nvidia.com/gpu.product", "NVIDIA-GeForce-RTX-4090", "RTX4090"),
        ("nvidia.com/gpu.product", "NVIDIA-RTX-A6000", "A6000"),
        ("nebius.com/gpu-name", "RTX6000", "RTX6000"),
        ("skypilot.co/accelerator", "rtxpro6000", "RTXPRO6000"),
        ("karpenter.k8s.aws/instance-gpu-name", "a10g", "A10G"),
        ("cloud.google.com/gke-accelerator", "nvidia-tesla-t4", "T4"),
        ("cloud.google.com/gke-accelerator", "nvidia-h100-80gb", "H100"),
        ("cloud.google.com/gke-accelerator", "nvidia-h200-141gb", "H200"),
        ("cloud.google.com/gke-accelerator", "nvidia-l4", "L4"),
        ("gpu.nvidia.com/class", "H100_NVLINK_80GB", "H100"),
        ("gpu.nvidia.com/class", "A40", "A40"),
    ],
    ids=lambda v: str(v),
)
def test_accelerator_name_skypilot_canonicalisation_matches(
    key: str, value: str, expected: str
) -> None:
    assert labels.accelerator_name(key, value) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("RTXPRO-6000-BLACKWELL-SERVER-EDITION", "rtxpro6000blackwellserveredition"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "nvidiartxpro6000blackwellserveredition"),
        ("h100_80gb", "h10080gb"),
        ("H100-80GB", "h10080gb"),
        ("", ""),
    ],
    ids=["rtxpro", "spaces", "underscore", "dash", "empty"],
)
def test_normalise_casefold_strip_non_alnum_expected(raw: str, expected: str) -> None:
    assert labels.normalise(raw) == expected


def test_skypilot_label_key_gfd_on_one_node_wins_over_nebius_everywhere() -> None:
    nodes = [
        {"nebius.com/gpu-name": "RTX6000"},
        {"nebius.com/gpu-name": "RTX6000", "nvidia.com/gpu.product": "NVIDIA-B200"},
    ]

    assert labels.skypilot_label_key(nodes) == "nvidia.com/gpu.product"


def test_skypilot_label_key_skypilot_label_first_in_priority() -> None:
    nodes = [{"nvidia.com/gpu.product": "NVIDIA-B200", "skypilot.co/accelerator": "b200"}]

    assert labels.skypilot_label_key(nodes) == "skypilot.co/accelerator"


def test_skypilot_label_key_empty_values_skipped() -> None:
    nodes = [{"nvidia.com/gpu.product": " "}, {"nebius.com/gpu-name": "H100"}]

    assert labels.skypilot_label_key(nodes) == "nebius.com/gpu-name"


def test_skypilot_label_key_invalid_first_value_disqualifies_key() -> None:
    # SkyPilot requires lowercase values under skypilot.co/accelerator.
    nodes = [
        {"skypilot.co/accelerator": "B200", "nvidia.com/gpu.product": "NVIDIA-B200"},
        {"skypilot.co/accelerator": "b200"},
    ]

    assert labels.skypilot_label_key(nodes) == "nvidia.com/gpu.product"


def test_skypilot_label_key_no_gpu_labels_none() -> None:
    assert labels.skypilot_label_key([{"nebius.com/gpu": "gpu-h100"}, {}]) is None
