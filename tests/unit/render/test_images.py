"""Image resolution (dsl.md §6.2) and the immutable-reference check.

The first matching rule wins: an exact ``--image-override``, the longest
prefix override, ``--image`` (``none``/``default``/``-`` mean no image), the
profile's ``image`` (``tool://X`` is tool X's catalog image), then the catalog
image of the longest matching toolRef prefix. A digest pin replaces the tag.
"""

from __future__ import annotations

import pytest

from npa_infra.catalog import images as pins
from npa_infra.render.images import ImageSelection, is_immutable_qualified, resolve_image

REG = pins.DEFAULT_REGISTRY
TAG = pins.IMAGE_PINS["npa-workbench"].tag
DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER_DIGEST = "sha256:" + "fedcba9876543210" * 4


def _catalog(name: str, registry: str = REG) -> str:
    return f"{registry}/{name}:{pins.IMAGE_PINS[name].tag}"


# -- precedence ------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_ref", "profile_image", "selection", "expected"),
    [
        (
            "workbench.cosmos.check",
            "prof.example.com/p:1",
            ImageSelection(
                overrides=(
                    ("workbench.cosmos", "reg.example.com/prefix:1"),
                    ("workbench.cosmos.check", "reg.example.com/exact:1"),
                ),
                global_image="reg.example.com/global:1",
            ),
            "reg.example.com/exact:1",
        ),
        (
            "workbench.cosmos.check",
            None,
            ImageSelection(
                overrides=(
                    ("workbench.cosmos.check", "reg.example.com/exact:1"),
                    ("workbench.cosmos", "reg.example.com/prefix:1"),
                ),
            ),
            "reg.example.com/exact:1",
        ),
        (
            "workbench.cosmos.check",
            "prof.example.com/p:1",
            ImageSelection(
                overrides=(("workbench.cosmos", "reg.example.com/prefix:1"),),
                global_image="reg.example.com/global:1",
            ),
            "reg.example.com/prefix:1",
        ),
        (
            "workbench.cosmos.check",
            None,
            ImageSelection(
                overrides=(
                    ("workbench.cosmos", "reg.example.com/longer:1"),
                    ("workbench", "reg.example.com/shorter:1"),
                ),
            ),
            "reg.example.com/longer:1",
        ),
        (
            "workbench.cosmos.check",
            None,
            ImageSelection(
                overrides=(
                    ("workbench", "reg.example.com/shorter:1"),
                    ("workbench.cosmos", "reg.example.com/longer:1"),
                ),
            ),
            "reg.example.com/longer:1",
        ),
        (
            "workbench.cosmos.check",
            "prof.example.com/p:1",
            ImageSelection(global_image="reg.example.com/global:1"),
            "reg.example.com/global:1",
        ),
        (
            "workbench.cosmos.check",
            "prof.example.com/p:1",
            ImageSelection(),
            "prof.example.com/p:1",
        ),
        (
            "workbench.cosmos.check",
            None,
            ImageSelection(),
            _catalog("npa-cosmos"),
        ),
        (
            "workbench.cosmos.check",
            "   ",
            ImageSelection(),
            _catalog("npa-cosmos"),
        ),
    ],
    ids=[
        "exact-override-beats-prefix-global-and-profile",
        "exact-override-beats-prefix-listed-first",
        "prefix-override-beats-global-image",
        "longest-prefix-wins-listed-first",
        "longest-prefix-wins-listed-last",
        "global-image-beats-profile",
        "profile-beats-catalog",
        "catalog-when-nothing-else",
        "blank-profile-image-falls-to-catalog",
    ],
)
def test_resolve_image_precedence_first_matching_rule_wins(
    tool_ref: str, profile_image: object, selection: ImageSelection, expected: str
) -> None:
    assert resolve_image(tool_ref, profile_image, selection) == expected


def test_resolve_image_prefix_override_matches_only_at_dot_boundary_catalog_used() -> None:
    sel = ImageSelection(overrides=(("workbench.cosmos", "reg.example.com/prefix:1"),))

    assert resolve_image("workbench.cosmos3.generate", None, sel) == _catalog("npa-cosmos3")


def test_resolve_image_override_for_other_tool_ignored_catalog_used() -> None:
    sel = ImageSelection(overrides=(("workbench.sonic.train", "reg.example.com/sonic:9"),))

    assert resolve_image("workbench.rl.train", None, sel) == _catalog("npa-isaac-lab")


def test_resolve_image_override_without_tool_ref_ignored_profile_used() -> None:
    sel = ImageSelection(overrides=(("workbench", "reg.example.com/any:1"),))

    assert resolve_image("", "prof.example.com/p:1", sel) == "prof.example.com/p:1"


# -- "no image" spellings ----------------------------------------------------


@pytest.mark.parametrize("spelling", ["none", "default", "-", "NONE", " none "], ids=str)
def test_resolve_image_global_no_image_spelling_returns_none(spelling: str) -> None:
    sel = ImageSelection(global_image=spelling)

    assert resolve_image("workbench.cosmos.check", "prof.example.com/p:1", sel) is None


def test_resolve_image_exact_override_beats_global_none_image_kept() -> None:
    sel = ImageSelection(
        overrides=(("workbench.cosmos.check", "reg.example.com/exact:1"),), global_image="none"
    )

    assert resolve_image("workbench.cosmos.check", None, sel) == "reg.example.com/exact:1"


def test_resolve_image_no_tool_no_profile_no_global_returns_none() -> None:
    assert resolve_image("", None, ImageSelection()) is None


# -- catalog images by toolRef prefix -----------------------------------------


@pytest.mark.parametrize(
    ("tool_ref", "image_name"),
    [
        ("workbench.vlm_eval.run", "npa-cosmos"),
        ("workbench.cosmos.check", "npa-cosmos"),
        ("workbench.cosmos2.transfer_execute", "npa-cosmos2-transfer"),
        ("workbench.cosmos3.generate", "npa-cosmos3"),
        ("workbench.rl.train", "npa-isaac-lab"),
        ("workbench.isaac_lab.envgen", "npa-isaac-lab"),
        ("workbench.sonic.train", "npa-sonic"),
        ("workbench.mjlab.eval", "npa-sonic"),
        ("workbench.rerun.report", "npa-viewer"),
        ("workbench.somethingnew.run", "npa-workbench"),
    ],
    ids=lambda v: v,
)
def test_resolve_image_catalog_longest_tool_prefix_names_image(
    tool_ref: str, image_name: str
) -> None:
    assert resolve_image(tool_ref, None, ImageSelection()) == _catalog(image_name)


@pytest.mark.parametrize(
    "tool_ref",
    ["workbench.token_factory.caption", "workbench.insights.aggregate", "workbench.dataset.ingest"],
    ids=lambda v: v,
)
def test_resolve_image_image_less_tool_returns_none(tool_ref: str) -> None:
    assert resolve_image(tool_ref, None, ImageSelection()) is None


@pytest.mark.parametrize(
    "registry", ["registry.example.com/team", "registry.example.com/team/"], ids=["bare", "slash"]
)
def test_resolve_image_registry_option_replaces_default_registry(registry: str) -> None:
    sel = ImageSelection(registry=registry)

    assert resolve_image("workbench.cosmos.check", None, sel) == (
        f"registry.example.com/team/npa-cosmos:{pins.IMAGE_PINS['npa-cosmos'].tag}"
    )


# -- tool://X -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "image_name"),
    [
        ("tool://workbench", "npa-workbench"),
        ("tool://cosmos", "npa-cosmos"),
        ("tool://cosmos2", "npa-cosmos2-transfer"),
        ("tool://cosmos3", "npa-cosmos3"),
        ("tool://isaac_lab", "npa-isaac-lab"),
        ("tool://sonic", "npa-sonic"),
    ],
    ids=lambda v: v,
)
def test_resolve_image_tool_uri_profile_maps_to_catalog_image(uri: str, image_name: str) -> None:
    assert resolve_image("", uri, ImageSelection()) == _catalog(image_name)


def test_resolve_image_tool_uri_unknown_short_name_uses_npa_prefixed_name() -> None:
    image = resolve_image("", "tool://ltx2", ImageSelection())

    assert image is not None
    assert image.startswith(f"{REG}/npa-ltx2:")


def test_resolve_image_tool_uri_uses_selected_registry() -> None:
    sel = ImageSelection(registry="registry.example.com/team")

    assert resolve_image("", "tool://cosmos3", sel) == _catalog(
        "npa-cosmos3", "registry.example.com/team"
    )


def test_resolve_image_tool_uri_profile_beats_tool_catalog_image() -> None:
    assert resolve_image("workbench.rerun.report", "tool://cosmos3", ImageSelection()) == (
        _catalog("npa-cosmos3")
    )


# -- digest pins ------------------------------------------------------------------


def test_resolve_image_preflight_digest_replaces_catalog_tag() -> None:
    sel = ImageSelection(digests={_catalog("npa-cosmos"): DIGEST})

    assert resolve_image("workbench.cosmos.check", None, sel) == f"{REG}/npa-cosmos@{DIGEST}"


def test_resolve_image_preflight_digest_replaces_tag_after_registry_port() -> None:
    image = "registry.example.com:5000/team/trainer:1.2"
    sel = ImageSelection(global_image=image, digests={image: DIGEST})

    assert resolve_image("", None, sel) == f"registry.example.com:5000/team/trainer@{DIGEST}"


def test_resolve_image_preflight_digest_for_untagged_image_appended() -> None:
    image = "registry.example.com:5000/team/trainer"
    sel = ImageSelection(global_image=image, digests={image: DIGEST})

    assert resolve_image("", None, sel) == f"{image}@{DIGEST}"


def test_resolve_image_already_digest_pinned_image_unchanged() -> None:
    image = f"registry.example.com/team/trainer@{DIGEST}"
    sel = ImageSelection(global_image=image, digests={image: OTHER_DIGEST})

    assert resolve_image("", None, sel) == image


def test_resolve_image_digest_for_other_image_ignored_tag_kept() -> None:
    sel = ImageSelection(digests={"registry.example.com/unrelated:1": DIGEST})

    assert resolve_image("workbench.cosmos.check", None, sel) == _catalog("npa-cosmos")


def test_resolve_image_configured_catalog_digest_pin_replaces_tag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        pins.IMAGE_PINS,
        "npa-cosmos",
        pins.ImagePin("npa-cosmos", pins.IMAGE_PINS["npa-cosmos"].tag, digest=DIGEST),
    )

    assert resolve_image("workbench.cosmos.check", None, ImageSelection()) == (
        f"{REG}/npa-cosmos@{DIGEST}"
    )


# -- is_immutable_qualified ---------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (f"ghcr.io/nebius/nebius-physical-ai/npa-cosmos@{DIGEST}", True),
        (f"cr.eu-north1.nebius.cloud/team/img@{DIGEST}", True),
        (f"localhost:5000/img@{DIGEST}", True),
        (f"localhost/img@{DIGEST}", True),
        (f"registry.example.com/team/img:1.0@{DIGEST}", True),
        ("ghcr.io/nebius/nebius-physical-ai/npa-cosmos:0.12.4", False),
        (f"img@{DIGEST}", False),
        (f"library/img@{DIGEST}", False),
        ("ghcr.io/team/img@sha256:" + "a" * 63, False),
        ("ghcr.io/team/img@sha256:" + "a" * 65, False),
        ("ghcr.io/team/img@sha256:" + "A" * 64, False),
        ("ghcr.io/team/img@sha512:" + "a" * 128, False),
        ("", False),
    ],
    ids=[
        "ghcr-digest",
        "nebius-registry-digest",
        "localhost-port-digest",
        "localhost-digest",
        "tag-and-digest",
        "tag-only",
        "unqualified-digest",
        "docker-hub-implicit-host",
        "digest-63-hex",
        "digest-65-hex",
        "digest-uppercase-hex",
        "sha512-digest",
        "empty",
    ],
)
def test_is_immutable_qualified_image_reference_classified(image: str, expected: bool) -> None:
    assert is_immutable_qualified(image) is expected


# -- preflight pins ------------------------------------------------------------------


def test_resolve_image_preflight_pin_replaces_catalog_tag_exactly() -> None:
    image = _catalog("npa-cosmos")
    pinned = f"{REG}/npa-cosmos@{DIGEST}"

    resolved = resolve_image("workbench.cosmos.check", None, ImageSelection(pins={image: pinned}))

    assert resolved == pinned
    assert f":{pins.IMAGE_PINS['npa-cosmos'].tag}" not in resolved


def test_resolve_image_pin_wins_over_digest_for_same_image() -> None:
    image = "registry.example.com/team/trainer:1.2"
    sel = ImageSelection(
        global_image=image,
        pins={image: f"registry.example.com/team/trainer@{DIGEST}"},
        digests={image: OTHER_DIGEST},
    )

    assert resolve_image("", None, sel) == f"registry.example.com/team/trainer@{DIGEST}"


def test_resolve_image_pins_keep_overrides_distinct_per_tool() -> None:
    first, second = "registry.example.com/a:1", "registry.example.com/b:1"
    sel = ImageSelection(
        overrides=(("workbench.cosmos", first), ("workbench.rerun", second)),
        global_image="registry.example.com/global:1",
        pins={
            first: f"registry.example.com/a@{DIGEST}",
            second: f"registry.example.com/b@{OTHER_DIGEST}",
        },
    )

    assert resolve_image("workbench.cosmos.check", None, sel) == f"registry.example.com/a@{DIGEST}"
    assert resolve_image("workbench.rerun.report", None, sel) == (
        f"registry.example.com/b@{OTHER_DIGEST}"
    )
    assert resolve_image("workbench.sonic.x", None, sel) == "registry.example.com/global:1"
