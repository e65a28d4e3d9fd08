"""Image reference parsing (registry.md §1): Docker Hub rules, syntax decided locally."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from npa_infra.registry import reference
from npa_infra.registry.models import ImageRef, InvalidReference
from tests.strategies import image_reference_texts

D = "sha256:" + "ab" * 32

VALID = {
    "hub-official": (
        "python:3.11-slim",
        "registry-1.docker.io",
        "library/python",
        "3.11-slim",
        None,
    ),
    "hub-org": (
        "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        "registry-1.docker.io",
        "nvidia/cuda",
        "12.4.1-cudnn-devel-ubuntu22.04",
        None,
    ),
    "hub-alias": (
        "docker.io/library/busybox",
        "registry-1.docker.io",
        "library/busybox",
        "latest",
        None,
    ),
    "hub-alias-single": (
        "docker.io/busybox:1",
        "registry-1.docker.io",
        "library/busybox",
        "1",
        None,
    ),
    "ghcr": (
        "ghcr.io/nebius/nebius-physical-ai/npa-workbench:0.12.4",
        "ghcr.io",
        "nebius/nebius-physical-ai/npa-workbench",
        "0.12.4",
        None,
    ),
    "port-no-tag": ("localhost:5000/team/app", "localhost:5000", "team/app", "latest", None),
    "localhost": ("localhost/app:v1", "localhost", "app", "v1", None),
    "ipv4-port": ("127.0.0.1:5001/public/x:t", "127.0.0.1:5001", "public/x", "t", None),
    "ipv6": ("[::1]:5000/a/b:c", "[::1]:5000", "a/b", "c", None),
    "digest-only": (
        f"registry.example.invalid/openpi@{D}",
        "registry.example.invalid",
        "openpi",
        None,
        D,
    ),
    "tag-and-digest": (f"ghcr.io/a/b:1@{D}", "ghcr.io", "a/b", "1", D),
    "separators": ("r.io/a.b_c__d---e/f:x", "r.io", "a.b_c__d---e/f", "x", None),
}


@pytest.mark.parametrize("case", VALID.values(), ids=VALID.keys())
def test_parse_valid_reference_splits_registry_repository_tag_digest(
    case: tuple[str, str, str, str | None, str | None],
) -> None:
    text, registry, repository, tag, digest = case

    ref = reference.parse(text)

    assert isinstance(ref, ImageRef)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        digest,
    )
    assert ref.reference == (digest or tag)


INVALID = {
    "empty": "",
    "uppercase-repo": "ghcr.io/Team/app:1",
    "bad-tag-start": "ghcr.io/a/b:-x",
    "tag-too-long": "ghcr.io/a/b:" + "t" * 129,
    "short-digest": "ghcr.io/a/b@sha256:abc",
    "sha512": "ghcr.io/a/b@sha512:" + "f" * 128,
    "uppercase-digest": "ghcr.io/a/b@sha256:" + "AB" * 32,
    "double-slash": "ghcr.io//b:1",
    "trailing-slash": "ghcr.io/a/:1",
    "whitespace": "ghcr.io/a/b :1",
    "tool-uri": "tool://workbench",
    "registry-only": "ghcr.io/",
    "leading-separator": "ghcr.io/_a:1",
}


@pytest.mark.parametrize("text", INVALID.values(), ids=INVALID.keys())
def test_parse_malformed_reference_invalid_with_reason(text: str) -> None:
    result = reference.parse(text)

    assert isinstance(result, InvalidReference)
    assert result.reason


def test_parse_pinned_keeps_user_spelling_and_drops_tag() -> None:
    ref = reference.parse("python:3.11")
    other = reference.parse("localhost:5000/team/app:1")

    assert isinstance(ref, ImageRef) and isinstance(other, ImageRef)
    assert ref.pinned(D) == f"python@{D}"
    assert other.pinned(D) == f"localhost:5000/team/app@{D}"


@pytest.mark.parametrize(
    ("text", "loopback"),
    [
        ("localhost:5000/a", True),
        ("127.0.0.1:5001/a", True),
        ("127.9.9.9/a", True),
        ("[::1]:5000/a", True),
        ("ghcr.io/a", False),
        ("10.0.0.1:5000/a", False),
    ],
    ids=["localhost", "127.0.0.1", "127/8", "ipv6", "ghcr", "private-ip"],
)
def test_image_ref_is_loopback(text: str, loopback: bool) -> None:
    ref = reference.parse(text)

    assert isinstance(ref, ImageRef)
    assert ref.is_loopback is loopback


@given(image_reference_texts())
@example("a" * 300)
@example("localhost:5000")
@example("[::1/a")
def test_parse_arbitrary_text_never_raises(text: str) -> None:
    result = reference.parse(text)

    assert isinstance(result, ImageRef | InvalidReference)
    if isinstance(result, ImageRef):
        assert result.reference
        assert not any(c.isspace() for c in result.repository)
