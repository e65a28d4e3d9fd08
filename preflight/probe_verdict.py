"""When to stop watching a pull-probe pod, and what it proved (kubernetes.md §9.4, §9.5); pure.

``stop_reason`` is the watch's stop condition: ``Succeeded``, ``Failed``, a
permanent waiting reason of the §6.3 table (``kube.pending``: an image pull
refused for authentication or a missing manifest, an invalid reference, a
missing Secret or ConfigMap, a rejected container config), the pod gone, or
an identity that drifted from the request.

``decide`` is the verdict over everything the runner observed, one ordered
chain:

1. no pod was created → indeterminate (nothing ran, nothing is proven);
2. the create response or an observed state drifted from the requested
   identity, or the ServiceAccount whose secrets the pod inherited changed
   → indeterminate (§9.3: the proof would be about another identity);
3. ``Failed``, or a permanent waiting reason → incompatible (§9.5);
4. cleanup not verified → indeterminate, and the labelled pod is left for
   inspection (§9.5: it blocks submission);
5. not ``Succeeded`` (the deadline passed, the pod vanished, the watch
   failed) → indeterminate;
6. ``Succeeded``: the ``imageID``'s ``@sha256:`` digest must be the pinned
   index digest, or the platform digest the fetched index declared
   (§4.4, registry.md §3); an ``imageID`` without one proves no pull, and
   another digest is not the image that was checked → indeterminate;
   otherwise compatible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from npa_infra.kube import pending
from npa_infra.kube.models import ProbePod
from npa_infra.registry.models import ProbeCleanup, ProbeVerdict
from preflight import probe_pod

__all__ = [
    "Observation",
    "Reason",
    "Verdict",
    "decide",
    "image_digest",
    "permanent_blocker",
    "stop_reason",
]

_IMAGE_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")
_DONE = frozenset({"Succeeded", "Failed"})


class Reason(StrEnum):
    """Why a probe ended the way it did; the values are journal and JSON strings."""

    PROVEN = "proven"
    NOT_CREATED = "not_created"
    IDENTITY_DRIFT = "identity_drift"
    ACCOUNT_CHANGED = "service_account_changed"
    CONTAINER_FAILED = "container_failed"
    PERMANENT_WAITING = "permanent_waiting"
    CLEANUP_FAILED = "cleanup_failed"
    DEADLINE = "deadline"
    POD_VANISHED = "pod_vanished"
    OBSERVATION_FAILED = "observation_failed"
    OPAQUE_IMAGE_ID = "opaque_image_id"
    DIGEST_MISMATCH = "digest_mismatch"


@dataclass(frozen=True, slots=True)
class Observation:
    """What one probe saw, from create to verified (or failed) cleanup."""

    created: bool = False
    problem: str = ""  # why no pod was created, or why the watch gave up
    drift: tuple[str, ...] = ()
    account_changed: bool = False
    phase: str = ""
    permanent: str = ""  # "<CODE>: <reason>: <message>" of a permanent waiting reason
    terminated: str = ""  # how the container ended (exit code, message)
    image_id: str = ""
    deadline_expired: bool = False
    vanished: bool = False
    cleanup: ProbeCleanup = ProbeCleanup.NOT_CREATED


@dataclass(frozen=True, slots=True)
class Verdict:
    status: ProbeVerdict
    reason: Reason
    detail: str


def image_digest(image_id: str) -> str | None:
    """The ``sha256:<64 hex>`` an ``imageID`` ends with, or None when it names no digest.

    containerd reports ``repo@sha256:…``, Docker ``docker-pullable://repo@sha256:…``;
    anything else (an image id, ``sha256:`` alone, a tag) proves no pull (§4.4).
    """
    match = _IMAGE_DIGEST.search(image_id.strip())
    return match.group(1) if match else None


def permanent_blocker(pod: ProbePod) -> pending.PendingDiagnosis | None:
    """The pod's §6.3 diagnosis when its class is permanent, else None."""
    if pod.observation is None or pod.phase in _DONE:
        return None
    found = pending.diagnose([pod.observation], job_id=0)
    return found if found.blocker_class is pending.BlockerClass.PERMANENT else None


def stop_reason(
    pod: ProbePod, requested: Mapping[str, Any], *, expected_pull_secrets: Sequence[str]
) -> str:
    """Why to stop watching ``pod`` now, or "" to keep watching (kubernetes.md §9.4 step 4)."""
    if pod.deleted:
        return "deleted"
    if pod.phase in _DONE:
        return pod.phase
    if probe_pod.identity_drift(requested, pod, expected_pull_secrets=expected_pull_secrets):
        return "identity drift"
    blocker = permanent_blocker(pod)
    return blocker.code.value if blocker is not None else ""


def _indeterminate(reason: Reason, detail: str) -> Verdict:
    return Verdict(ProbeVerdict.INDETERMINATE, reason, detail)


def decide(obs: Observation, *, digest: str, platform_digest: str | None) -> Verdict:
    """The probe's verdict (kubernetes.md §9.5); total, never raises."""
    if not obs.created:  # §9.4 step 1: nothing ran
        return _indeterminate(Reason.NOT_CREATED, obs.problem or "the probe pod was not created")
    if obs.drift:  # §9.3: the cluster changed the identity; the proof is about another pod
        return _indeterminate(
            Reason.IDENTITY_DRIFT, "the pod's identity changed: " + "; ".join(obs.drift)
        )
    if obs.account_changed:  # §9.3: the inherited pull secrets are no longer the SA's
        return _indeterminate(
            Reason.ACCOUNT_CHANGED, "the ServiceAccount changed or vanished during the probe"
        )
    if obs.phase == "Failed":  # §9.5: the image ran and failed its checks, or could not start
        detail = obs.terminated or "the probe container failed"
        return Verdict(ProbeVerdict.INCOMPATIBLE, Reason.CONTAINER_FAILED, detail)
    if obs.permanent:  # §9.5 with §6.3: a permanent waiting reason
        return Verdict(ProbeVerdict.INCOMPATIBLE, Reason.PERMANENT_WAITING, obs.permanent)
    if obs.cleanup is not ProbeCleanup.VERIFIED:  # §9.5: a failed cleanup blocks submission
        return _indeterminate(
            Reason.CLEANUP_FAILED,
            "the probe pod could not be verified deleted; it is left labelled "
            f"{probe_pod.LABEL_PURPOSE}={probe_pod.PURPOSE} for inspection",
        )
    if obs.phase != "Succeeded":  # §9.4 step 4: no stop condition was reached
        if obs.deadline_expired:
            return _indeterminate(
                Reason.DEADLINE,
                f"the pod was still {obs.phase or 'Pending'} when the observation window ended",
            )
        if obs.vanished:
            return _indeterminate(Reason.POD_VANISHED, "the pod was deleted by someone else")
        return _indeterminate(
            Reason.OBSERVATION_FAILED, obs.problem or f"the pod ended the watch {obs.phase}"
        )
    seen = image_digest(obs.image_id)
    if seen is None:  # §4.4: an imageID without an immutable digest is not proof of a pull
        return _indeterminate(
            Reason.OPAQUE_IMAGE_ID,
            f"the runtime reported imageID {obs.image_id or '(none)'!r}, which names no digest",
        )
    if seen == digest:
        return Verdict(ProbeVerdict.COMPATIBLE, Reason.PROVEN, f"pulled {digest} and passed")
    if platform_digest and seen == platform_digest:  # registry.md §3: declared by the index
        return Verdict(
            ProbeVerdict.COMPATIBLE,
            Reason.PROVEN,
            f"pulled platform manifest {seen} of index {digest} and passed",
        )
    return _indeterminate(
        Reason.DIGEST_MISMATCH, f"the runtime pulled {seen}, not the checked {digest}"
    )
