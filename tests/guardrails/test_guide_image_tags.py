"""Guardrail: image tags quoted in the operator guides equal the pins in code.

Operators copy image references out of ``workflows/guides/*.md``. When a
guide quotes a tag that ``npa_infra.catalog.images.IMAGE_PINS`` no longer
pins, preflight and the rendered jobs disagree with the docs. This test
extracts every ``ghcr.io/nebius/nebius-physical-ai/npa-<name>:<tag>``
reference from every guide and holds its tag equal to the pin. A separate
test requires at least one reference, so the check cannot pass vacuously.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from npa_infra.catalog.images import IMAGE_PINS

GUIDES_DIR = Path(__file__).resolve().parents[2] / "workflows" / "guides"

# <registry>/npa-<name>:<tag>; an OCI tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
_IMAGE_REF = re.compile(
    r"ghcr\.io/nebius/nebius-physical-ai/(?P<name>npa-[a-z0-9][a-z0-9-]*)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"
)


class GuideImageRef(NamedTuple):
    guide: str
    line: int
    name: str
    tag: str


def extract_refs(text: str, guide: str) -> list[GuideImageRef]:
    """Every pinned-registry image reference in ``text``, with its line number."""
    refs = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for match in _IMAGE_REF.finditer(line):
            # A reference that ends a sentence is followed by '.', which the
            # tag pattern would otherwise swallow.
            tag = match.group("tag").rstrip(".-")
            refs.append(GuideImageRef(guide, lineno, match.group("name"), tag))
    return refs


def _guide_paths() -> list[Path]:
    return sorted(GUIDES_DIR.glob("*.md"))


def _all_refs() -> list[GuideImageRef]:
    refs = []
    for path in _guide_paths():
        refs.extend(extract_refs(path.read_text(encoding="utf-8"), path.name))
    return refs


_REFS = _all_refs()


def test_guides_directory_scanned_has_markdown_guides() -> None:
    assert _guide_paths(), f"no operator guides found under {GUIDES_DIR}"


def test_guide_image_refs_scanned_at_least_one_found() -> None:
    assert _REFS, (
        f"no ghcr.io/nebius/nebius-physical-ai/npa-<name>:<tag> reference in {GUIDES_DIR}/*.md; "
        "the tag guardrail would pass vacuously"
    )


@pytest.mark.parametrize("ref", _REFS, ids=[f"{r.guide}:{r.line}:{r.name}" for r in _REFS])
def test_guide_image_ref_name_is_pinned_in_code(ref: GuideImageRef) -> None:
    assert ref.name in IMAGE_PINS, (
        f"{ref.guide}:{ref.line} quotes {ref.name}, which IMAGE_PINS does not pin "
        f"(pinned: {', '.join(sorted(IMAGE_PINS))})"
    )


@pytest.mark.parametrize("ref", _REFS, ids=[f"{r.guide}:{r.line}:{r.name}" for r in _REFS])
def test_guide_image_ref_tag_equals_pinned_tag(ref: GuideImageRef) -> None:
    pin = IMAGE_PINS.get(ref.name)
    if pin is None:
        pytest.fail(f"{ref.guide}:{ref.line} quotes unpinned image {ref.name}")
    assert ref.tag == pin.tag, (
        f"{ref.guide}:{ref.line} quotes {ref.name}:{ref.tag} but IMAGE_PINS pins "
        f"{ref.name}:{pin.tag}; update the guide"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "pull ghcr.io/nebius/nebius-physical-ai/npa-cosmos3:0.12.4.",
            [("npa-cosmos3", "0.12.4")],
        ),
        (
            "`ghcr.io/nebius/nebius-physical-ai/npa-cosmos2-transfer:1.0.0-rc1` and "
            "`ghcr.io/nebius/nebius-physical-ai/npa-viewer:0.12.4`",
            [("npa-cosmos2-transfer", "1.0.0-rc1"), ("npa-viewer", "0.12.4")],
        ),
        ("registry.example.com/npa-cosmos3:dev has another registry", []),
    ],
    ids=["sentence-end-period", "two-refs-one-line", "other-registry-ignored"],
)
def test_extract_refs_sample_text_yields_name_and_tag(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert [(r.name, r.tag) for r in extract_refs(text, "sample.md")] == expected
