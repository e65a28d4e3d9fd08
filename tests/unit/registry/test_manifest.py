"""Manifest verification and platform resolution (registry.md §3), without HTTP."""

from __future__ import annotations

import pytest

from npa_infra.registry import manifest, reference
from npa_infra.registry.models import LINUX_AMD64, CheckStatus, ImageRef, Platform
from tests.unit.registry import mockregistry as mock

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64


def _ref(text: str = "r.io/a:1") -> ImageRef:
    parsed = reference.parse(text)
    assert isinstance(parsed, ImageRef)
    return parsed


def test_verify_single_manifest_ok_digest_of_bytes() -> None:
    body = mock.manifest_body("x")

    check = manifest.verify(body, ref=_ref(), platform=LINUX_AMD64, header_digest=mock.digest(body))

    assert (check.status, check.digest, check.platform_digest) == (
        CheckStatus.OK,
        mock.digest(body),
        None,
    )


def test_verify_without_header_uses_computed_digest() -> None:
    body = mock.manifest_body("x")

    assert manifest.verify(body, ref=_ref(), platform=LINUX_AMD64).digest == mock.digest(body)


@pytest.mark.parametrize(
    ("platforms", "wanted", "child"),
    [
        ({"linux/amd64": A, "linux/arm64": B}, LINUX_AMD64, A),
        ({"linux/arm64/v8": B, "linux/amd64": A}, Platform("linux", "arm64", "v8"), B),
        ({"linux/arm64": B, "linux/amd64": A}, Platform("linux", "arm64"), B),
        ({"unknown/unknown": B, "linux/amd64": A}, LINUX_AMD64, A),
    ],
    ids=["amd64", "arm64-v8", "arm64-any-variant", "skips-attestation"],
)
def test_verify_index_resolves_platform_child(
    platforms: dict[str, str], wanted: Platform, child: str
) -> None:
    body = mock.index_body(platforms)

    check = manifest.verify(body, ref=_ref(), platform=wanted)

    assert (check.status, check.platform_digest, check.digest) == (
        CheckStatus.OK,
        child,
        mock.digest(body),
    )


def test_verify_index_without_platform_not_found_lists_offered() -> None:
    check = manifest.verify(
        mock.index_body({"linux/arm64": B, "unknown/unknown": A}), ref=_ref(), platform=LINUX_AMD64
    )

    assert check.status is CheckStatus.NOT_FOUND
    assert check.detail == "the index declares no linux/amd64 manifest (it has: linux/arm64)"


@pytest.mark.parametrize(
    ("body", "kwargs"),
    [
        (b"{}", {"header_digest": A}),
        (b"{}", {"ref_text": f"r.io/a@{A}"}),
        (b"not json", {}),
        (b'{"mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws"}', {}),
        (b'{"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": {}}', {}),
    ],
    ids=["header-mismatch", "reference-mismatch", "not-json", "schema1", "index-not-list"],
)
def test_verify_bad_answers_error(body: bytes, kwargs: dict[str, str]) -> None:
    ref = _ref(kwargs.pop("ref_text", "r.io/a:1"))

    check = manifest.verify(body, ref=ref, platform=LINUX_AMD64, **kwargs)

    assert check.status is CheckStatus.ERROR
    assert check.digest is None
