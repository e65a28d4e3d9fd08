"""The preflight report (cli.md §1.3): one check per distinct image, concurrent, exit codes."""

from __future__ import annotations

import contextlib
import threading

import pytest

from npa_infra.catalog import images as pins
from npa_infra.registry import models
from npa_infra.registry.contract import LabelsResult
from npa_infra.registry.models import CheckResult, CheckStatus, ImageRef, ManifestCheck
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
    "probe",
]


def _targets(*names: str) -> list[ImageTarget]:
    return [ImageTarget(f"{REG}/{n}:1", (f"s-{n}",)) for n in names]


def test_check_images_each_target_once_rows_in_order_json_shape() -> None:
    fake = FakeRegistry()

    report = images.check_images(_targets("a", "b", "c"), fake)

    assert sorted(fake.calls) == [f"{REG}/a:1", f"{REG}/b:1", f"{REG}/c:1"]
    assert [r.image for r in report.rows] == [f"{REG}/a:1", f"{REG}/b:1", f"{REG}/c:1"]
    payload = report.to_json()
    assert (payload["status"], payload["platform"]) == ("passed", "linux/amd64")
    rows = payload["rows"]
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


class _Rendezvous(FakeRegistry):
    """Each check waits until ``parties`` checks are in flight at once (or the barrier breaks)."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(parties, timeout=10)

    def check_manifest(self, ref: ImageRef, platform: models.Platform) -> ManifestCheck:
        # asserted by the test: a broken barrier means the checks were not concurrent
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait()
        return super().check_manifest(ref, platform)


def test_check_images_twenty_all_in_flight_at_once() -> None:
    # The speed budget (20 images < 2x one) is measured by bench/preflight_bench.py;
    # here: all twenty checks are in flight together, so none waits for another.
    fake = _Rendezvous(parties=20)

    report = images.check_images(_targets(*(f"i{n}" for n in range(20))), fake)

    assert not fake.barrier.broken
    assert len(report.rows) == len(fake.calls) == 20
    assert report.exit_code == 0


def test_summary_json_for_submit() -> None:
    report = images.check_images(_targets("a"), FakeRegistry())

    summary = report.summary_json()

    assert summary["decision"] == "passed"
    assert summary["platform"] == "linux/amd64"
    assert summary["checks"] == report.to_json()["rows"]


# -- the bootstrap-contract label rule (runtime-reference.md §8) ---------------------------------

TRUSTED = (pins.DEFAULT_REGISTRY, "cr.example.net/proj")
PINNED = pins.catalog_image("npa-workbench", pins.DEFAULT_REGISTRY)
LABEL = "org.nebius.npa.skypilot-bootstrap-contract"


def _one(image: str, fake: FakeRegistry, trusted: tuple[str, ...] = TRUSTED) -> CheckResult:
    (row,) = images.check_images(
        [ImageTarget(image, ("s",))], fake, trusted_registries=trusted
    ).rows
    return row


@pytest.mark.parametrize(
    ("image", "labels", "status", "code"),
    [
        (PINNED, None, CheckStatus.OK, 0),
        (PINNED, {}, CheckStatus.PROBE_INCOMPATIBLE, 1),
        (PINNED, {LABEL: "skypilot-0.11.0-v1"}, CheckStatus.PROBE_INCOMPATIBLE, 1),
        ("cr.example.net/proj/npa-x:1", {"other": "x"}, CheckStatus.PROBE_INCOMPATIBLE, 1),
        ("cr.example.net/proj/x:1", {}, CheckStatus.OK, 0),
        ("cr.example.net/other/npa-x:1", {}, CheckStatus.OK, 0),
        (
            PINNED,
            LabelsResult(failure=ManifestCheck(CheckStatus.UNREACHABLE, "timeout")),
            CheckStatus.PROBE_INDETERMINATE,
            2,
        ),
    ],
    ids=[
        "attested",
        "missing",
        "wrong-value",
        "npa-registry-missing",
        "untrusted-basename",
        "untrusted-registry",
        "unreadable",
    ],
)
def test_label_rule_row_status_and_exit_code(
    image: str, labels: dict[str, str] | LabelsResult | None, status: CheckStatus, code: int
) -> None:
    fake = FakeRegistry(labels={image: labels} if labels is not None else None)

    report = images.check_images([ImageTarget(image, ("s",))], fake, trusted_registries=TRUSTED)

    assert [r.status for r in report.rows] == [status]
    assert report.exit_code == code


def test_label_rule_missing_names_label_and_pinned_build_command_keeps_digest() -> None:
    fake = FakeRegistry(labels={PINNED: {}})

    row = _one(PINNED, fake)

    assert row.status is CheckStatus.PROBE_INCOMPATIBLE
    assert (row.error_code, row.http_status) == ("BOOTSTRAP_LABEL_MISSING", 200)
    assert f"label {LABEL} is missing" in row.detail and "skypilot-0.12.2-v1" in row.detail
    assert row.remedy.endswith(pins.build_command("npa-workbench", pins.DEFAULT_REGISTRY))
    assert row.digest == fake_digest(PINNED)
    assert images.ImagePreflightReport(rows=(row,)).pins() == {}


def test_label_rule_unpinned_tag_remedy_is_the_label_instruction() -> None:
    image = f"{pins.DEFAULT_REGISTRY}/npa-workbench:dev"
    fake = FakeRegistry(labels={image: {LABEL: "old"}})

    row = _one(image, fake)

    assert "'old'" in row.detail
    assert row.remedy.startswith(f"rebuild the image with LABEL {LABEL}=skypilot-0.12.2-v1")


def test_label_rule_untrusted_or_failed_images_never_read_labels() -> None:
    missing = f"{pins.DEFAULT_REGISTRY}/npa-gone:1"
    fake = FakeRegistry(
        {missing: ManifestCheck(CheckStatus.NOT_FOUND, "404", "push it", 404)},
        labels={f"{REG}/a:1": {}},
    )
    targets = [ImageTarget(missing, ("m",)), *_targets("a"), ImageTarget(PINNED, ("p",))]

    report = images.check_images(targets, fake, trusted_registries=TRUSTED)

    assert fake.label_calls == [PINNED]
    assert [r.status for r in report.rows] == [
        CheckStatus.NOT_FOUND,
        CheckStatus.OK,
        CheckStatus.OK,
    ]


def test_label_rule_off_without_trusted_registries() -> None:
    fake = FakeRegistry(labels={PINNED: {}})

    row = _one(PINNED, fake, trusted=())

    assert row.status is CheckStatus.OK
    assert fake.label_calls == []
