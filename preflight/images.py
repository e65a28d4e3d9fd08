"""Check every image a spec can run, concurrently, and report per image (cli.md §1.3).

Each distinct image is parsed locally (a syntax error is ``invalid`` and
never sent), then checked once through the injected ``Registry`` in a
bounded thread pool; one client serves every thread, so connections and
tokens are shared. Rows keep the order of the targets. A ``not_found`` image
whose tag is one the project pins gets the build command for that tag as
its remedy.

The bootstrap-contract label rule (runtime-reference.md §8): an image that
is ``ok`` and trusted (``registry.contract.is_trusted``: an ``npa-*``
repository under one of ``trusted_registries``) has its image config read
through ``Registry.image_labels``, for an index the linux/amd64 child's. The
label ``org.nebius.npa.skypilot-bootstrap-contract=skypilot-0.12.2-v1`` keeps
the row ``ok``; a missing or different value makes it ``probe_incompatible``
(definite; the remedy is the pinned tag's build command when there is one);
labels that cannot be read make it ``probe_indeterminate`` (unproven). Other
images never pay for the two extra requests. Without trusted registries
(the default) no labels are read.

Decisions where the contract leaves room:
- an index without the cluster's platform is ``not_found`` (definite): the
  pull would fail the same way every time (``registry.manifest``);
- the platform is linux/amd64: the spec model has no platform field;
- the in-cluster pull probe is not run here, so no row is
  ``target_pull_unverified``; a manifest ``ok`` (for a trusted image, with
  the contract label) is reported as ``ok``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from npa_infra.catalog import images as pins
from npa_infra.registry import contract, models, reference
from npa_infra.registry.base import Registry
from npa_infra.registry.models import CheckResult, CheckStatus, ImageRef, Platform
from preflight.targets import ImageTarget

__all__ = ["ImagePreflightReport", "check_images", "first_party_build"]

MAX_WORKERS = 32  # issue 6: 20 distinct images must cost less than twice one
Decision = Literal["passed", "failed", "unproven"]
_DECISIONS: dict[int, Decision] = {0: "passed", 1: "failed", 2: "unproven"}


class ImagePreflightReport(BaseModel):
    """The rows of one preflight; ``exit_code`` and ``decision`` follow cli.md §1.3."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: tuple[CheckResult, ...] = ()
    platform: str = str(models.LINUX_AMD64)

    @property
    def exit_code(self) -> int:
        return models.exit_code(row.status for row in self.rows)

    @property
    def decision(self) -> Decision:
        return _DECISIONS[self.exit_code]

    def failures(self) -> list[CheckResult]:
        return [row for row in self.rows if row.status is not CheckStatus.OK]

    def pins(self) -> dict[str, str]:
        """image → ``<registry>/<repo>@<digest>`` for every image preflight resolved."""
        out: dict[str, str] = {}
        for row in self.rows:
            parsed = reference.parse(row.image)
            if row.status is CheckStatus.OK and row.digest and isinstance(parsed, ImageRef):
                out[row.image] = parsed.pinned(row.digest)
        return out

    def to_json(self) -> dict[str, Any]:
        """``preflight-images --json``: ``{status, platform, rows[]}``, ``status`` the decision.

        One object with a ``status`` like every command's (issue 17; cli.md §0
        had a bare list of rows). Each row keeps its shape.
        """
        return {"status": self.decision, "platform": self.platform, "rows": self._rows_json()}

    def summary_json(self) -> dict[str, Any]:
        """``submit``'s ``preflight{decision, checks[]}``."""
        return {"decision": self.decision, "platform": self.platform, "checks": self._rows_json()}

    def _rows_json(self) -> list[dict[str, Any]]:
        return [row.to_json() for row in self.rows]


def first_party_build(ref: ImageRef) -> str | None:
    """The build command when ``ref`` names a project image at the tag the project pins."""
    name = ref.repository.rsplit("/", 1)[-1]
    pin = pins.IMAGE_PINS.get(name)
    if pin is None or ref.digest or ref.tag != pin.tag or "/" not in ref.name:
        return None
    return pins.build_command(name, ref.name.rsplit("/", 1)[0])


def _row(
    target: ImageTarget,
    registry: Registry,
    platform: Platform,
    build: Callable[[ImageRef], str | None],
    trusted: Sequence[str],
) -> CheckResult:
    parsed = reference.parse(target.image)
    if isinstance(parsed, models.InvalidReference):
        return CheckResult(
            image=target.image,
            status=CheckStatus.INVALID,
            detail=parsed.reason,
            remedy="fix the image reference: [registry/]repository[:tag][@sha256:<64 hex>], "
            "lowercase repository; then rerun npa workbench workflow preflight-images SPEC",
            steps=target.steps,
        )
    check = registry.check_manifest(parsed, platform)
    if check.status is CheckStatus.OK and contract.is_trusted(parsed, trusted):
        verdict = contract.decide(registry.image_labels(parsed, check), build=build(parsed))
        if verdict.status is not CheckStatus.OK:
            return CheckResult(
                image=target.image,
                status=verdict.status,
                http_status=verdict.http_status,
                error_code=verdict.error_code,
                detail=verdict.detail,
                remedy=verdict.remedy,
                digest=check.digest,
                platform_digest=check.platform_digest,
                steps=target.steps,
            )
    remedy = check.remedy
    if check.status is CheckStatus.NOT_FOUND:
        command = build(parsed)
        if command:
            remedy = f"build and push the pinned tag: {command}"
    return CheckResult(
        image=target.image,
        status=check.status,
        http_status=check.http_status,
        error_code=check.error_code,
        detail=check.detail,
        remedy=remedy,
        digest=check.digest,
        platform_digest=check.platform_digest,
        steps=target.steps,
    )


def check_images(
    targets: Sequence[ImageTarget],
    registry: Registry,
    *,
    platform: Platform = models.LINUX_AMD64,
    max_workers: int = MAX_WORKERS,
    build: Callable[[ImageRef], str | None] = first_party_build,
    trusted_registries: Sequence[str] = (),
) -> ImagePreflightReport:
    """Check each target once, at most ``max_workers`` at a time; rows in target order.

    ``trusted_registries`` (``ghcr.io/nebius/nebius-physical-ai``,
    ``$NPA_PUBLIC_REGISTRY``, ``$NPA_REGISTRY``) hold their ``npa-*`` images to
    the bootstrap-contract label; none by default.
    """
    if not targets:
        return ImagePreflightReport(rows=(), platform=str(platform))
    workers = max(1, min(max_workers, len(targets)))
    trusted = tuple(trusted_registries)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="npa-preflight") as pool:
        rows = tuple(pool.map(lambda t: _row(t, registry, platform, build, trusted), targets))
    return ImagePreflightReport(rows=rows, platform=str(platform))
