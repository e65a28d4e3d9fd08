"""The image bootstrap-contract rule (runtime-reference.md §8, registry.md §3); pure.

SkyPilot 0.12.2 bootstraps a Kubernetes worker inside the task image (sshd,
rsync, ``service``, a writable ``$HOME``, passwordless sudo, argument
forwarding). An image built for that declares it in its config:
``config.Labels["org.nebius.npa.skypilot-bootstrap-contract"] ==
"skypilot-0.12.2-v1"``.

``is_trusted`` decides which images are held to the label: a repository whose
basename starts with ``npa-`` and which lives under one of the trusted
registries (``ghcr.io/nebius/nebius-physical-ai``, ``$NPA_PUBLIC_REGISTRY``,
``$NPA_REGISTRY``; the caller reads the environment and passes them in). Only
those images pay for reading their config (two requests); any other image is
left to the in-cluster probe.

``decide`` turns what was read (``LabelsResult``) into a ``Verdict``: the
contract value is ``ok``; a missing or different label is
``probe_incompatible`` (a trusted image without the label fails unprobed, so
the failure is definite); labels that could not be read prove nothing and are
``probe_indeterminate``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from npa_infra.registry.models import DOCKER_HUB, CheckStatus, ImageRef, ManifestCheck

__all__ = [
    "CONTRACT",
    "LABEL",
    "LabelsResult",
    "Reason",
    "Verdict",
    "decide",
    "is_trusted",
]

LABEL = "org.nebius.npa.skypilot-bootstrap-contract"
CONTRACT = "skypilot-0.12.2-v1"
PREFIX = "npa-"
RERUN = "npa workbench workflow preflight-images SPEC"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})
_SCHEMES = ("https://", "http://")


@dataclass(frozen=True, slots=True)
class LabelsResult:
    """``config.Labels`` of the image config the cluster pulls, or the classified reason it is unknown.

    Exactly one of ``labels`` (with ``config_digest``) and ``failure`` is
    meaningful: ``failure`` is set when the labels could not be read (``error``
    for a digest mismatch or malformed JSON, ``unreachable`` for transport).
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    config_digest: str | None = None
    failure: ManifestCheck | None = None


class Reason(StrEnum):
    ATTESTED = "attested"
    MISSING = "missing"
    MISMATCH = "mismatch"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the row becomes: ``ok`` keeps the manifest check's row as it is.

    ``http_status`` is the status of the answer that decided: 200 for the
    config read, the failed answer's (None without one) when unreadable.
    """

    reason: Reason
    status: CheckStatus
    detail: str = ""
    remedy: str = ""
    error_code: str | None = None
    http_status: int | None = None


def _location(text: str) -> tuple[str, str] | None:
    """A trusted registry as (API host with port, repository path prefix); None when empty."""
    value = text.strip()
    for scheme in _SCHEMES:
        value = value.removeprefix(scheme)
    value = value.strip("/")
    if not value:
        return None
    first, _, rest = value.partition("/")
    if "." in first or ":" in first or first == "localhost":
        host, path = first.lower(), rest
    else:
        host, path = DOCKER_HUB, value  # reference.parse: a bare path lives on Docker Hub
    if host in _HUB_ALIASES:
        host = DOCKER_HUB
    return host, path.lower().strip("/")


def is_trusted(ref: ImageRef, registries: Iterable[str]) -> bool:
    """An ``npa-*`` repository under one of ``registries`` (runtime-reference.md §8)."""
    directory, _, basename = ref.repository.rpartition("/")
    if not basename.startswith(PREFIX):
        return False
    for text in registries:
        where = _location(text)
        if where is None or ref.registry.lower() != where[0]:
            continue
        prefix = where[1]
        if not prefix or directory == prefix or directory.startswith(prefix + "/"):
            return True
    return False


def _remedy(build: str | None) -> str:
    if build:
        return f"rebuild and push the pinned tag with LABEL {LABEL}={CONTRACT}: {build}"
    return f"rebuild the image with LABEL {LABEL}={CONTRACT}, push it, then rerun {RERUN}"


def decide(read: LabelsResult, *, build: str | None = None) -> Verdict:
    """The contract verdict for a trusted image's labels; ``build`` is the pinned tag's build command."""
    failure = read.failure
    if failure is not None:
        # runtime-reference.md §8: unread labels prove neither compliance nor its absence.
        return Verdict(
            Reason.UNREADABLE,
            CheckStatus.PROBE_INDETERMINATE,
            f"could not read the image config for label {LABEL} "
            f"({failure.status.value}): {failure.detail}"[:500],
            failure.remedy or f"rerun {RERUN}",
            failure.error_code,
            failure.http_status,
        )
    found = read.labels.get(LABEL)
    where = f"image config {read.config_digest}" if read.config_digest else "the image config"
    if found == CONTRACT:
        return Verdict(Reason.ATTESTED, CheckStatus.OK)  # registry.md §3: the contract value
    if found is None:
        # runtime-reference.md §8: a trusted image without the label fails unprobed.
        return Verdict(
            Reason.MISSING,
            CheckStatus.PROBE_INCOMPATIBLE,
            f"label {LABEL} is missing from {where}; expected {CONTRACT} "
            "(a trusted npa-* image must declare the SkyPilot bootstrap contract)",
            _remedy(build),
            "BOOTSTRAP_LABEL_MISSING",
            200,
        )
    # runtime-reference.md §8: another contract version is not this one.
    return Verdict(
        Reason.MISMATCH,
        CheckStatus.PROBE_INCOMPATIBLE,
        f"label {LABEL} is {found[:100]!r} in {where}; expected {CONTRACT} "
        "(a trusted npa-* image must declare the SkyPilot bootstrap contract)",
        _remedy(build),
        "BOOTSTRAP_LABEL_MISMATCH",
        200,
    )
