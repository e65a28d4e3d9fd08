"""The preflight report (cli.md §1.3): one check per distinct image, concurrent, exit codes."""

from __future__ import annotations

import time

import pytest

from npa_infra.catalog import images as pins
from npa_infra.registry import models
from npa_infra.registry.models import CheckStatus, ManifestCheck
from npa_infra.testing.registry import FakeRegistry, fake_digest
from preflight import images
from preflight.targets import ImageTarget

REG = "registry.example.com/team"
ROW_KEYS = [
    "image",
    "status",
    "http_status",
    "error_code",
    "detail",
    "remedy",
    "digest",
    "platform_digest",
    "steps",
]


def _targets(*names: str) -> list[ImageTarget]:
    return [ImageTarget(f"{REG}/{n}:1", (f"s-{n}",)) for n in names]


def test_check_images_each_target_once_rows_in_order_json_shape() -> None:
    fake = FakeRegistry()

    report = images.check_images(_targets("a", "b", "c"), fake)

    assert sorted(fake.calls) == [f"{REG}/a:1", f"{REG}/b:1", f"{REG}/c:1"]
    assert [r.image for r in report.rows] == [f"{REG}/a:1", f"{REG}/b:1", f"{REG}/c:1"]
    rows = report.to_json()
    assert [list(r) for r in rows] == [ROW_KEYS] * 3
    assert rows[0]["status"] == "ok"
    assert rows[0]["steps"] == ["s-a"]
    assert rows[0]["digest"] == fake_digest(f"{REG}/a:1")
    assert fake.platforms == [models.LINUX_AMD64] * 3
    assert (report.exit_code, report.decision) == (0, "passed")


def test_check_images_invalid_reference_never_sent() -> None:
    fake = FakeRegistry()

    report = images.check_images([ImageTarget("ghcr.io/Bad/Name:1", ("x",))], fake)

    assert fake.calls == []
    (row,) = report.rows
    assert row.status is CheckStatus.INVALID
    assert "lowercase" in row.detail
    assert report.exit_code == 1


@pytest.mark.parametrize(
    ("statuses", "code", "decision"),
    [
        ((), 0, "passed"),
        ((CheckStatus.OK,), 0, "passed"),
        ((CheckStatus.OK, CheckStatus.UNREACHABLE), 2, "unproven"),
        ((CheckStatus.ERROR,), 2, "unproven"),
        ((CheckStatus.TARGET_PULL_UNVERIFIED,), 2, "unproven"),
        ((CheckStatus.UNREACHABLE, CheckStatus.NOT_FOUND), 1, "failed"),
        ((CheckStatus.FORBIDDEN,), 1, "failed"),
        ((CheckStatus.UNAUTHORIZED,), 1, "failed"),
        ((CheckStatus.NO_CREDENTIALS,), 1, "failed"),
        ((CheckStatus.UNTRUSTED_REALM,), 1, "failed"),
        ((CheckStatus.INVALID,), 1, "failed"),
    ],
    ids=[
        "none",
        "ok",
        "ok-unreachable",
        "error",
        "pull-unverified",
        "unreachable-not-found",
        "forbidden",
        "unauthorized",
        "no-credentials",
        "untrusted-realm",
        "invalid",
    ],
)
def test_report_exit_code_and_decision(
    statuses: tuple[CheckStatus, ...], code: int, decision: str
) -> None:
    answers = {f"{REG}/i{n}:1": ManifestCheck(s, "d", "r") for n, s in enumerate(statuses)}
    targets = [ImageTarget(image, ("s",)) for image in answers]

    report = images.check_images(targets, FakeRegistry(answers))

    assert (report.exit_code, report.decision) == (code, decision)


def test_every_status_is_definite_or_unproven_except_ok() -> None:
    assert models.DEFINITE | models.UNPROVEN | {CheckStatus.OK} == set(CheckStatus)
    assert not models.DEFINITE & models.UNPROVEN


def test_not_found_first_party_pinned_tag_remedy_is_build_command() -> None:
    image = pins.catalog_image("npa-cosmos", pins.DEFAULT_REGISTRY)
    fake = FakeRegistry({image: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)})

    (row,) = images.check_images([ImageTarget(image, ("c",))], fake).rows

    assert row.remedy == "build and push the pinned tag: " + pins.build_command(
        "npa-cosmos", pins.DEFAULT_REGISTRY
    )
    assert "docker buildx build --platform linux/amd64" in row.remedy


@pytest.mark.parametrize(
    "image",
    [
        f"{pins.DEFAULT_REGISTRY}/npa-cosmos:0.0.1",
        f"{REG}/custom:1",
    ],
    ids=["other-tag", "not-first-party"],
)
def test_not_found_other_images_keep_registry_remedy(image: str) -> None:
    fake = FakeRegistry({image: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)})

    (row,) = images.check_images([ImageTarget(image, ("c",))], fake).rows

    assert row.remedy == "push it"


def test_first_party_build_uses_the_images_own_registry() -> None:
    from npa_infra.registry import reference

    ref = reference.parse(f"{REG}/npa-workbench:{pins.IMAGE_PINS['npa-workbench'].tag}")
    assert isinstance(ref, models.ImageRef)

    assert images.first_party_build(ref) == pins.build_command("npa-workbench", REG)


def test_pins_only_ok_rows_pinned_by_index_digest() -> None:
    bad = f"{REG}/b:1"
    fake = FakeRegistry({bad: ManifestCheck(CheckStatus.NOT_FOUND, "404", "r", 404)})

    report = images.check_images(_targets("a", "b"), fake)

    assert report.pins() == {f"{REG}/a:1": f"{REG}/a@{fake_digest(f'{REG}/a:1')}"}


def test_check_images_twenty_concurrently_under_twice_one() -> None:
    delay = 0.2
    start = time.perf_counter()
    images.check_images(_targets("one"), FakeRegistry(delay=delay))
    one = time.perf_counter() - start
    fake = FakeRegistry(delay=delay)

    start = time.perf_counter()
    report = images.check_images(_targets(*(f"i{n}" for n in range(20))), fake)
    twenty = time.perf_counter() - start

    assert len(report.rows) == len(fake.calls) == 20
    assert twenty < 2 * one


def test_summary_json_for_submit() -> None:
    report = images.check_images(_targets("a"), FakeRegistry())

    summary = report.summary_json()

    assert summary["decision"] == "passed"
    assert summary["platform"] == "linux/amd64"
    assert summary["checks"] == report.to_json()
