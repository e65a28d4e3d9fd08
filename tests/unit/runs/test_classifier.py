"""The launch-transaction classifier and redaction (runtime-reference.md §1 Classifier)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.runs import classifier
from npa_infra.runs.classifier import ClassifierPhase
from npa_infra.runs.models import Category
from tests.strategies import (
    CLASSIFIER_TERMINAL_PHRASES,
    CLASSIFIER_TRANSIENT_PHRASES,
    classifier_texts,
    terminal_and_transient_texts,
)

TRANSIENT_PHASES = (
    ClassifierPhase.READINESS,
    ClassifierPhase.CONTROLLER,
    ClassifierPhase.LAUNCH,
    ClassifierPhase.RECONCILIATION,
)


def _wrapped(phrase: str) -> str:
    """A realistic line: upper-cased, coloured, with harmless words around it."""
    return f"E0101 12:00:00.000 \x1b[31m{phrase.upper()}\x1b[0m at step 3"


# -- classify: tables ------------------------------------------------------------------
@pytest.mark.parametrize("phase", list(ClassifierPhase), ids=str)
@pytest.mark.parametrize(
    ("phrase", "category"),
    CLASSIFIER_TERMINAL_PHRASES,
    ids=[phrase for phrase, _ in CLASSIFIER_TERMINAL_PHRASES],
)
def test_classify_terminal_phrase_terminal_in_every_phase(
    phrase: str, category: str, phase: ClassifierPhase
) -> None:
    assert classifier.classify(_wrapped(phrase), phase) is Category(category)


@pytest.mark.parametrize("phase", TRANSIENT_PHASES, ids=str)
@pytest.mark.parametrize(
    ("phrase", "category"),
    CLASSIFIER_TRANSIENT_PHRASES,
    ids=[phrase for phrase, _ in CLASSIFIER_TRANSIENT_PHRASES],
)
def test_classify_transient_phrase_before_supervision_transient(
    phrase: str, category: str, phase: ClassifierPhase
) -> None:
    assert classifier.classify(_wrapped(phrase), phase) is Category(category)


@pytest.mark.parametrize(
    "phrase",
    [phrase for phrase, _ in CLASSIFIER_TRANSIENT_PHRASES],
    ids=[phrase for phrase, _ in CLASSIFIER_TRANSIENT_PHRASES],
)
def test_classify_transient_phrase_in_supervision_unknown(phrase: str) -> None:
    assert classifier.classify(_wrapped(phrase), ClassifierPhase.SUPERVISION) is Category.UNKNOWN


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("wrong context: context not found", Category.IDENTITY),
        ("context not found; forbidden", Category.CONTEXT),
        ("forbidden: unauthorized", Category.RBAC),
        ("unauthorized: x509: certificate has expired", Category.AUTH),
        ("x509: no such file or directory", Category.CERTIFICATE),
        ("invalid kubeconfig: schema", Category.CONFIG),
        ("validation error: insufficient cpu", Category.SCHEMA),
        ("quota exceeded; errimagepull", Category.CAPACITY),
        ("could not connect to SkyPilot API server: connection refused", Category.API_WARMUP),
        ("ApiServerConnectionError: dial tcp 10.0.0.1:46580", Category.API_WARMUP),
        ("429 Too Many Requests then status code 503", Category.KUBERNETES_RATE_LIMIT),
        ("503 Server Error: connection reset by peer", Category.KUBERNETES_SERVER),
        ("status code 502, then EOF", Category.KUBERNETES_SERVER),
    ],
    ids=[
        "identity-beats-context",
        "context-beats-rbac",
        "rbac-beats-auth",
        "auth-beats-certificate",
        "certificate-beats-config",
        "config-beats-schema",
        "schema-beats-capacity",
        "capacity-beats-workload",
        "warmup-beats-transport",
        "warmup-beats-dial-tcp",
        "rate-limit-beats-server",
        "server-beats-transport",
        "server-beats-eof",
    ],
)
def test_classify_overlapping_phrases_first_rule_wins(text: str, expected: Category) -> None:
    assert classifier.classify(text, ClassifierPhase.LAUNCH) is expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t",
        "\x1b[0m\x1b[31m",
        "Traceback: KeyError 'job_id'",
        "EOFError raised by the reader",
        "geofence out of range",
        "status code 501",
        "501 Server Error: Not Implemented",
        "http 4290",
    ],
    ids=[
        "empty",
        "whitespace",
        "ansi-only",
        "unmatched",
        "eoferror-not-a-word",
        "eof-inside-word",
        "501-status",
        "501-server-error",
        "4290-not-429",
    ],
)
def test_classify_unmatched_text_unknown(text: str) -> None:
    assert classifier.classify(text, ClassifierPhase.LAUNCH) is Category.UNKNOWN


def test_classify_ansi_inside_phrase_stripped_before_matching() -> None:
    text = "Connection \x1b[1;31mrefused\x1b[0m"
    assert classifier.classify(text, ClassifierPhase.LAUNCH) is Category.KUBERNETES_TRANSPORT


# -- classify: properties ----------------------------------------------------------------
@given(text=st.one_of(st.text(), classifier_texts()), phase=st.sampled_from(ClassifierPhase))
@example(text="", phase=ClassifierPhase.LAUNCH)
@example(text="\x1b[", phase=ClassifierPhase.SUPERVISION)
def test_classify_any_text_total_and_deterministic(text: str, phase: ClassifierPhase) -> None:
    first = classifier.classify(text, phase)
    assert isinstance(first, Category)
    assert first is not Category.NONE and first is not Category.INTERRUPTED
    assert classifier.classify(text, phase) is first
    if phase is ClassifierPhase.SUPERVISION:
        assert not first.transient


@given(text=terminal_and_transient_texts(), phase=st.sampled_from(ClassifierPhase))
@example(text=" connection refused  forbidden ", phase=ClassifierPhase.LAUNCH)
def test_classify_terminal_and_transient_terminal_wins(text: str, phase: ClassifierPhase) -> None:
    assert classifier.classify(text, phase).terminal


# -- redact ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kubectl --kubeconfig /home/u/.kube/cfg get", "kubectl --kubeconfig *** get"),
        ("kubectl --kubeconfig=/home/u/.kube/cfg get", "kubectl --kubeconfig=*** get"),
        ("x --token abc.def.ghi y", "x --token *** y"),
        ("x --token=abc.def.ghi y", "x --token=*** y"),
        ("x --certificate-authority /ca.pem y", "x --certificate-authority *** y"),
        ("x --client-key=/k.pem y", "x --client-key=*** y"),
        ('x --token "two words" y', "x --token *** y"),
        ("Authorization: Bearer eyJhbGciOi.J9x-_y== end", "Authorization: Bearer *** end"),
        ("url?token=s3cr3t&x=1", "url?token=***&x=1"),
        ("password: hunter2", "password: ***"),
        ('{"access_token": "abc123"}', '{"access_token": "***"}'),
        ("AWS_SECRET_ACCESS_KEY=wJalr x", "AWS_SECRET_ACCESS_KEY=*** x"),
        ("error: invalid bearer token", "error: invalid bearer token"),
        ("no secrets here", "no secrets here"),
    ],
    ids=[
        "kubeconfig-space",
        "kubeconfig-equals",
        "token-space",
        "token-equals",
        "certificate-authority",
        "client-key",
        "quoted-value",
        "bearer",
        "query-token",
        "password-colon",
        "json-access-token",
        "env-secret",
        "auth-phrase-kept",
        "clean",
    ],
)
def test_redact_secret_forms_masked(text: str, expected: str) -> None:
    assert classifier.redact(text) == expected


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (5, "abcde"),
        (26, "abcdefghijklmnopqrstuvwxyz"),
        (100, "abcdefghijklmnopqrstuvwxyz"),
        (0, ""),
    ],
    ids=["cut", "exact", "short", "zero"],
)
def test_redact_long_text_keeps_first_limit_chars(limit: int, expected: str) -> None:
    assert classifier.redact("abcdefghijklmnopqrstuvwxyz", limit) == expected


def test_redact_secret_at_cap_boundary_no_prefix_leaks() -> None:
    text = "x --token supersecretvalue"
    assert classifier.redact(text, limit=14) == "x --token ***"[:14]
    assert "super" not in classifier.redact(text, limit=14)


@pytest.mark.parametrize(
    ("phrase", "category"),
    CLASSIFIER_TERMINAL_PHRASES + CLASSIFIER_TRANSIENT_PHRASES,
    ids=[phrase for phrase, _ in CLASSIFIER_TERMINAL_PHRASES + CLASSIFIER_TRANSIENT_PHRASES],
)
def test_redact_table_phrase_still_classifies(phrase: str, category: str) -> None:
    redacted = classifier.redact(_wrapped(phrase))
    assert classifier.classify(redacted, ClassifierPhase.LAUNCH) is Category(category)


@given(text=st.text(), limit=st.integers(min_value=-5, max_value=2000))
def test_redact_any_text_bounded_by_limit(text: str, limit: int) -> None:
    assert len(classifier.redact(text, limit)) <= max(limit, 0)
