"""Reading the decision artifact that routes a runtime run's next waves (dsl.md §5.4).

A missing or malformed artifact fails closed: the run stops with the reason,
and no assumed decision ever stands in for it in runtime mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_infra.errors import LaunchFailedError, NpaError, UncertainOutcomeError

if TYPE_CHECKING:
    from npa_infra.plan.model import DecisionPoint
    from npa_infra.storage.base import ObjectStore

__all__ = ["read_decision"]


def read_decision(
    store: Callable[[], ObjectStore], point: DecisionPoint, command: str
) -> tuple[str, NpaError | None]:
    """The decision artifact's value; a missing or malformed artifact fails closed (dsl.md §5.4)."""
    from npa_infra.errors import StorageError
    from npa_infra.plan import decisions
    from npa_infra.runs import artifacts
    from npa_infra.storage.models import S3Uri

    where = f"the decision of {point.state} (written by {point.writer_state})"
    if not point.uri:
        return "", LaunchFailedError(
            f"{where} has no decision URI to read",
            remedy="declare an output whose schema contains 'decision', or set config.decision_uri",
        )
    try:
        payload = store().read_bytes(S3Uri.parse(point.uri))
    except StorageError as exc:
        return "", UncertainOutcomeError(
            f"{where} could not be read from {point.uri}: {exc.message}",
            remedy=f"{exc.remedy}; then rerun: {command}",
        )
    except ValueError as exc:
        return "", LaunchFailedError(
            f"{where}: invalid URI {point.uri!r}: {exc}", remedy="fix the spec"
        )
    if payload is None:
        return "", LaunchFailedError(
            f"{where} is missing: no object at {point.uri}",
            remedy='the writer step must upload {"decision": "..."} there; inspect its logs',
        )
    read = artifacts.parse_decision(payload, uri=point.uri, normalize=decisions.normalize)
    if read.error is not None or read.decision is None:
        return "", LaunchFailedError(
            f"{where} is malformed: {read.error}",
            remedy='the artifact must be a JSON object like {"decision": "promote_checkpoint"}',
        )
    return read.decision, None
