"""The checks a verified relaunch needs (runtime-reference.md §3, issue 9).

A new attempt of a wave is created only after **all** of these hold, each
proven here from fresh evidence:

- the old attempt's cancellation is verified terminal (or absent) by exact id:
  an acknowledgement alone never suffices (``cancels.settle`` proves it);
- the identity of the wave, recomputed from the current spec, plan, source
  selection and image pins, equals the identity of the attempt being replaced
  (never copied from it);
- the wave's declared S3 outputs are proven absent; an unreadable store is
  indeterminate and blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_infra.storage.base import ObjectStore
    from npa_infra.storage.models import ObjectProbe

__all__ = [
    "Check",
    "Recomputed",
    "identity_unchanged",
    "outputs_absent",
    "probe_outputs",
]


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    reason: str
    indeterminate: bool = False  # unknown evidence: blocks, and is not a definite failure


@dataclass(frozen=True, slots=True)
class Recomputed:
    """A wave's identity recomputed from the current inputs: its task-YAML sha256, or
    (``digest`` None) why it could not be recomputed, e.g. the spec no longer validates."""

    digest: str | None
    reason: str = "the wave's identity could not be recomputed"


def identity_unchanged(
    expected_digest: str | None, recompute: Callable[[], str | Recomputed | None]
) -> Check:
    """The wave's task YAML digest, recomputed now, equals the attempt's recorded one.

    ``recompute`` returns the digest, or a ``Recomputed`` carrying the reason when
    there is none; no digest on either side is unknown evidence and blocks (§3).
    """
    answer = recompute()
    fresh = answer if isinstance(answer, Recomputed) else Recomputed(answer)
    current = fresh.digest
    if current is None:
        return Check(False, fresh.reason, indeterminate=True)
    if expected_digest is None:
        return Check(False, "the attempt being replaced recorded no identity", indeterminate=True)
    if current != expected_digest:
        return Check(
            False,
            f"the wave changed since it was launched (task YAML sha256 {expected_digest[:12]} "
            f"→ {current[:12]}): spec, plan, source or image pins drifted",
        )
    return Check(True, "identity unchanged")


def probe_outputs(
    store: Callable[[], ObjectStore], uris: Sequence[str]
) -> list[tuple[str, ObjectProbe]]:
    """Each declared output's probe: a ``/``-ending URI is a prefix, anything else a key.

    Raises:
        StorageError, ValueError: the store could not be opened, or a URI is malformed.
    """
    from npa_infra.storage.models import S3Uri

    adapter = store()
    probes = []
    for uri in uris:
        target = S3Uri.parse(uri)
        probe = adapter.probe_prefix(target) if uri.endswith("/") else adapter.probe_key(target)
        probes.append((uri, probe))
    return probes


def outputs_absent(store: Callable[[], ObjectStore], uris: Sequence[str]) -> Check:
    """Every declared output of the wave is proven absent (a prefix: no object > 0 bytes)."""
    from npa_infra.errors import StorageError
    from npa_infra.storage.models import ProbeState

    if not uris:
        return Check(True, "the wave declares no outputs")
    try:
        probes = probe_outputs(store, uris)
    except (StorageError, ValueError) as exc:
        return Check(False, f"cannot check the declared outputs: {exc}", indeterminate=True)
    for uri, probe in probes:
        if probe.state is ProbeState.PRESENT:
            return Check(False, f"declared output {uri} already exists")
        if probe.state is ProbeState.UNAVAILABLE:
            return Check(False, f"cannot check {uri}: {probe.detail}", indeterminate=True)
    return Check(True, f"{len(uris)} declared output(s) proven absent")
