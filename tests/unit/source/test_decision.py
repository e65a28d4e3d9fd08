"""The submit-time source decision: one ordered chain, crossed over its inputs (no I/O)."""

from __future__ import annotations

import pytest

from npa_infra.source import decision
from npa_infra.source.decision import (
    SourceAction,
    SourceInputs,
    SourceOrigin,
    SourceReason,
)

LOCAL = "1" * 64
OLD = "0" * 64
STAGED = f"s3://bkt/npa-src/npa/{LOCAL}/"
SAVED_CURRENT = f"s3://other/npa-src/npa/{LOCAL}/"
SAVED_OLD = f"s3://bkt/npa-src/npa/{OLD}/"
ENV = "s3://team/src/custom"
JOURNAL = f"s3://bkt/npa-src/npa/{OLD}/"
STACK_CURRENT = f"s3://stack/npa-src/npa/{LOCAL}/"
STACK_OLD = f"s3://stack/npa-src/npa/{OLD}/"


def inputs(**overrides: object) -> SourceInputs:
    base: dict[str, object] = {"needed": True, "local_fingerprint": LOCAL, "bucket": "bkt"}
    base.update(overrides)
    return SourceInputs(**base)  # type: ignore[arg-type]  # test helper: keyword overrides


CASES = [
    # (overrides, action, reason, origin, uri)
    (
        {"needed": False, "force": True},
        SourceAction.NOT_REQUIRED,
        SourceReason.NOT_REQUIRED,
        SourceOrigin.NONE,
        "",
    ),
    (
        {"journal_uri": JOURNAL, "env_uri": ENV, "force": True},
        SourceAction.KEEP,
        SourceReason.RESUMED,
        SourceOrigin.JOURNAL,
        JOURNAL,
    ),
    (
        {"force": True, "env_uri": ENV, "saved_uri": SAVED_CURRENT},
        SourceAction.STAGE,
        SourceReason.FORCED,
        SourceOrigin.CHECKOUT,
        STAGED,
    ),
    (
        {"env_uri": ENV, "saved_uri": SAVED_OLD},
        SourceAction.KEEP,
        SourceReason.EXPLICIT,
        SourceOrigin.ENVIRONMENT,
        ENV,
    ),
    (
        {"env_uri": ENV, "env_origin": SourceOrigin.E2E_ENVIRONMENT},
        SourceAction.KEEP,
        SourceReason.EXPLICIT,
        SourceOrigin.E2E_ENVIRONMENT,
        ENV,
    ),
    (
        {"env_uri": ENV, "no_stage": True},
        SourceAction.KEEP,
        SourceReason.EXPLICIT,
        SourceOrigin.ENVIRONMENT,
        ENV,
    ),
    (
        {"saved_uri": SAVED_CURRENT},
        SourceAction.REUSE,
        SourceReason.SAVED_CURRENT,
        SourceOrigin.SAVED,
        SAVED_CURRENT,
    ),
    (
        {"saved_uri": SAVED_CURRENT, "no_stage": True},
        SourceAction.KEEP,
        SourceReason.SAVED_CURRENT,
        SourceOrigin.SAVED,
        SAVED_CURRENT,
    ),
    (
        {"saved_uri": SAVED_OLD, "no_stage": True},
        SourceAction.REFUSE,
        SourceReason.NO_STAGE_OUTDATED,
        SourceOrigin.SAVED,
        SAVED_OLD,
    ),
    (
        {"no_stage": True},
        SourceAction.REFUSE,
        SourceReason.NO_STAGE_MISSING,
        SourceOrigin.SAVED,
        "",
    ),
    (
        {"saved_uri": SAVED_OLD, "local_fingerprint": ""},
        SourceAction.KEEP,
        SourceReason.SAVED_UNCHECKED,
        SourceOrigin.SAVED,
        SAVED_OLD,
    ),
    (
        {"local_fingerprint": ""},
        SourceAction.REFUSE,
        SourceReason.NO_CHECKOUT,
        SourceOrigin.NONE,
        "",
    ),
    (
        {"force": True, "local_fingerprint": ""},
        SourceAction.REFUSE,
        SourceReason.NO_CHECKOUT,
        SourceOrigin.NONE,
        "",
    ),
    ({"bucket": ""}, SourceAction.REFUSE, SourceReason.NO_BUCKET, SourceOrigin.NONE, ""),
    (
        {"saved_uri": SAVED_OLD},
        SourceAction.STAGE,
        SourceReason.SAVED_OUTDATED,
        SourceOrigin.CHECKOUT,
        STAGED,
    ),
    (
        {"saved_uri": "s3://bkt/not/a/fingerprint"},
        SourceAction.STAGE,
        SourceReason.SAVED_OUTDATED,
        SourceOrigin.CHECKOUT,
        STAGED,
    ),
    ({}, SourceAction.STAGE, SourceReason.MISSING, SourceOrigin.CHECKOUT, STAGED),
    (
        {"force": True, "saved_uri": SAVED_CURRENT},
        SourceAction.STAGE,
        SourceReason.FORCED,
        SourceOrigin.CHECKOUT,
        STAGED,
    ),
    (
        {"stack_uri": STACK_CURRENT, "saved_uri": SAVED_CURRENT},
        SourceAction.KEEP,
        SourceReason.STACK_CURRENT,
        SourceOrigin.STACK,
        STACK_CURRENT,
    ),
    (
        {"stack_uri": STACK_CURRENT, "no_stage": True},
        SourceAction.KEEP,
        SourceReason.STACK_CURRENT,
        SourceOrigin.STACK,
        STACK_CURRENT,
    ),
    (
        {"stack_uri": STACK_OLD, "local_fingerprint": ""},
        SourceAction.KEEP,
        SourceReason.STACK_UNCHECKED,
        SourceOrigin.STACK,
        STACK_OLD,
    ),
    (
        {"stack_uri": STACK_OLD, "saved_uri": SAVED_CURRENT},
        SourceAction.REFUSE,
        SourceReason.STACK_OUTDATED,
        SourceOrigin.STACK,
        STACK_OLD,
    ),
    (
        {"stack_uri": STACK_OLD, "force": True},
        SourceAction.STAGE,
        SourceReason.FORCED,
        SourceOrigin.CHECKOUT,
        STAGED,
    ),
    (
        {"stack_uri": STACK_OLD, "env_uri": ENV},
        SourceAction.KEEP,
        SourceReason.EXPLICIT,
        SourceOrigin.ENVIRONMENT,
        ENV,
    ),
    (
        {"stack_uri": STACK_OLD, "journal_uri": JOURNAL},
        SourceAction.KEEP,
        SourceReason.RESUMED,
        SourceOrigin.JOURNAL,
        JOURNAL,
    ),
]
IDS = [
    "not-required",
    "resume-keeps-journal",
    "force-beats-env",
    "env-explicit",
    "e2e-env",
    "env-with-no-stage",
    "saved-current-reuse",
    "saved-current-no-stage-verify-only",
    "no-stage-outdated",
    "no-stage-missing",
    "saved-no-checkout",
    "no-checkout",
    "force-no-checkout",
    "no-bucket",
    "saved-outdated",
    "saved-not-fingerprint",
    "missing",
    "force-over-current",
    "stack-current-beats-saved",
    "stack-current-no-stage-verify-only",
    "stack-no-checkout-kept",
    "stack-outdated-refused-not-saved",
    "force-beats-stack",
    "env-beats-stack",
    "resume-beats-stack",
]


@pytest.mark.parametrize(("overrides", "action", "reason", "origin", "uri"), CASES, ids=IDS)
def test_decide_matrix(
    overrides: dict[str, object],
    action: SourceAction,
    reason: SourceReason,
    origin: SourceOrigin,
    uri: str,
) -> None:
    chosen = decision.decide(inputs(**overrides))

    assert (chosen.action, chosen.reason, chosen.origin, chosen.uri) == (
        action,
        reason,
        origin,
        uri,
    )


def test_decide_stage_uri_known_before_upload_and_would_stage() -> None:
    chosen = decision.decide(inputs(prefix="/teams/npa/"))

    assert chosen.uri == f"s3://bkt/teams/npa/{LOCAL}/"
    assert chosen.fingerprint == LOCAL
    assert chosen.would_stage and not chosen.verify


@pytest.mark.parametrize(
    ("uri", "verify"),
    [(ENV, False), (f"s3://b/p/{OLD}", True), (f"s3://b/p/{OLD}/", True)],
    ids=["custom", "fingerprint", "fingerprint-slash"],
)
def test_decide_keep_verifies_only_fingerprint_uris(uri: str, verify: bool) -> None:
    chosen = decision.decide(inputs(env_uri=uri))

    assert chosen.verify is verify


def test_requirement_image_less_states_sorted_unique() -> None:
    steps = [("b", None), ("a", "img"), ("b", None), ("c", None)]

    assert decision.requirement(steps, overlay=False) == ("b", "c")
    assert decision.requirement(steps, overlay=True) == ("a", "b", "c")
    assert decision.requirement([("a", "img")], overlay=False) == ()


@pytest.mark.parametrize(
    ("bucket", "prefix", "expected"),
    [
        ("b", "npa-src/npa", f"s3://b/npa-src/npa/{LOCAL}/"),
        ("b", "/x/", f"s3://b/x/{LOCAL}/"),
        ("b", "", f"s3://b/{LOCAL}/"),
    ],
    ids=["default", "slashes", "root"],
)
def test_prefix_uri(bucket: str, prefix: str, expected: str) -> None:
    assert decision.prefix_uri(bucket, prefix, LOCAL) == expected
    assert decision.uri_fingerprint(expected) == LOCAL
