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


# -- the config the cluster pulls: its digest and labels ---------------------------------------


def test_config_digest_of_platform_manifest_fetched_by_digest() -> None:
    config = mock.config_body({"a": "b"})
    body = mock.image_manifest_body(config)

    found = manifest.config_digest(body, digest=mock.digest(body), header_digest=mock.digest(body))

    assert found == mock.digest(config)


@pytest.mark.parametrize(
    ("body", "digest", "header", "code"),
    [
        (b"{}", A, "", "DIGEST_MISMATCH"),
        (b"{}", mock.digest(b"{}"), A, "DIGEST_MISMATCH"),
        (b"not json", mock.digest(b"not json"), "", None),
        (b'{"config": {}}', mock.digest(b'{"config": {}}'), "", None),
        (
            b'{"config": {"digest": "md5:x"}}',
            mock.digest(b'{"config": {"digest": "md5:x"}}'),
            "",
            None,
        ),
        (b'{"config": []}', mock.digest(b'{"config": []}'), "", None),
    ],
    ids=[
        "body-mismatch",
        "header-mismatch",
        "not-json",
        "no-config-digest",
        "not-sha256",
        "config-list",
    ],
)
def test_config_digest_bad_answers_error(
    body: bytes, digest: str, header: str, code: str | None
) -> None:
    check = manifest.config_digest(body, digest=digest, header_digest=header)

    assert not isinstance(check, str)
    assert (check.status, check.error_code) == (CheckStatus.ERROR, code)


@pytest.mark.parametrize(
    ("body", "labels"),
    [
        (mock.config_body({"k": "v", "org.x": "1"}), {"k": "v", "org.x": "1"}),
        (mock.config_body(None), {}),
        (b'{"architecture": "amd64"}', {}),
        (b'{"config": null}', {}),
        (b'{"config": {"Labels": null}}', {}),
        (b'{"config": {"Labels": {"n": 1, "b": true}}}', {"n": "1", "b": "true"}),
    ],
    ids=["labels", "no-labels-key", "no-config", "null-config", "null-labels", "non-string-values"],
)
def test_config_labels_read(body: bytes, labels: dict[str, str]) -> None:
    assert manifest.config_labels(body, digest=mock.digest(body)) == labels


@pytest.mark.parametrize(
    ("body", "digest", "code"),
    [
        (b"{}", A, "DIGEST_MISMATCH"),
        (b"[]", mock.digest(b"[]"), None),
        (b"\xff", mock.digest(b"\xff"), None),
        (b'{"config": {"Labels": []}}', mock.digest(b'{"config": {"Labels": []}}'), None),
        (b'{"config": "x"}', mock.digest(b'{"config": "x"}'), None),
    ],
    ids=["blob-mismatch", "json-list", "not-utf8", "labels-list", "config-string"],
)
def test_config_labels_bad_answers_error(body: bytes, digest: str, code: str | None) -> None:
    check = manifest.config_labels(body, digest=digest)

    assert not isinstance(check, dict)
    assert (check.status, check.error_code) == (CheckStatus.ERROR, code)
    if code:
        assert "the config blob hashes to" in check.detail
