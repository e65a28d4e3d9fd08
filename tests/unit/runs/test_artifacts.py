"""Decision artifacts parse to a ``DecisionRead`` and fail closed (dsl.md §3, §5.4)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.plan import decisions
from npa_infra.runs import artifacts
from npa_infra.runs.artifacts import DecisionRead

URI = "s3://bkt/runs/r1/decision.json"


def parse(payload: bytes, **kwargs: int) -> DecisionRead:
    return artifacts.parse_decision(payload, uri=URI, normalize=decisions.normalize, **kwargs)


@pytest.mark.parametrize(
    ("payload", "decision", "source_key"),
    [
        (b'{"decision": "promote_checkpoint"}', "promote_checkpoint", "decision"),
        (b'{"decision": "promote"}', "promote_checkpoint", "decision"),
        (b'{"decision": "loop_back"}', "loop_back_to_inner_loop", "decision"),
        (b'{"decision": " promote "}', "promote_checkpoint", "decision"),
        (b'{"decision": "something_else"}', "something_else", "decision"),
        (b'{"last_decision": "promote"}', "promote_checkpoint", "last_decision"),
        (b'{"action": "loop_back"}', "loop_back_to_inner_loop", "action"),
        (b'{"action": "loop_back", "decision": "promote"}', "promote_checkpoint", "decision"),
        (b'{"action": "a", "last_decision": "promote"}', "promote_checkpoint", "last_decision"),
        (b'{"decision": "promote", "metrics": {"sr": 0.9}}', "promote_checkpoint", "decision"),
        (b'\xef\xbb\xbf{"decision": "promote"}', "promote_checkpoint", "decision"),
        (b'\n  {"decision": "promote"}\n', "promote_checkpoint", "decision"),
    ],
    ids=[
        "canonical",
        "promote-alias",
        "loop-back-alias",
        "padded",
        "unknown-kept",
        "last-decision",
        "action",
        "decision-beats-action",
        "last-decision-beats-action",
        "extra-fields",
        "utf8-bom",
        "whitespace",
    ],
)
def test_parse_decision_valid_payload_normalised(
    payload: bytes, decision: str, source_key: str
) -> None:
    read = parse(payload)

    assert read == DecisionRead(decision=decision, source_key=source_key, error=None)
    assert read.ok


@pytest.mark.parametrize(
    ("payload", "reason", "source_key"),
    [
        (b"", "decision payload is empty", None),
        (b"  \n", "decision payload is empty", None),
        (b"{", "decision payload is not valid JSON", None),
        (b"decision: promote", "decision payload is not valid JSON", None),
        (b"\xff\xfe\xfa", "decision payload is not valid JSON", None),
        (b'"promote"', "decision payload is not a JSON object (found a string)", None),
        (b'["promote"]', "decision payload is not a JSON object (found an array)", None),
        (b"null", "decision payload is not a JSON object (found null)", None),
        (b"1", "decision payload is not a JSON object (found a number)", None),
        (b"{}", "decision payload missing decision field", None),
        (b'{"Decision": "promote"}', "decision payload missing decision field", None),
        (
            b'{"decision": null, "action": "promote"}',
            "decision field 'decision' is not a string (found null)",
            "decision",
        ),
        (
            b'{"decision": 1}',
            "decision field 'decision' is not a string (found a number)",
            "decision",
        ),
        (
            b'{"action": true}',
            "decision field 'action' is not a string (found a boolean)",
            "action",
        ),
        (
            b'{"decision": {"v": "promote"}}',
            "decision field 'decision' is not a string (found an object)",
            "decision",
        ),
        (b'{"decision": ""}', "decision field 'decision' is empty", "decision"),
        (b'{"last_decision": "   "}', "decision field 'last_decision' is empty", "last_decision"),
        (b"[" * 100_000, "decision payload is not valid JSON", None),
    ],
    ids=[
        "empty",
        "blank",
        "truncated",
        "yaml",
        "not-utf8",
        "string",
        "array",
        "null",
        "number",
        "no-field",
        "wrong-case",
        "first-present-null",
        "number-value",
        "boolean-value",
        "object-value",
        "empty-value",
        "blank-value",
        "deep-nesting",
    ],
)
def test_parse_decision_bad_payload_error_names_uri(
    payload: bytes, reason: str, source_key: str | None
) -> None:
    read = parse(payload)

    assert read == DecisionRead(decision=None, source_key=source_key, error=f"{reason}: {URI}")
    assert not read.ok


def test_parse_decision_missing_field_reference_text() -> None:
    read = parse(b'{"status": "done"}')

    assert read.error is not None
    assert read.error.startswith("decision payload missing decision field")


def test_parse_decision_over_cap_refused_before_parsing() -> None:
    payload = json.dumps({"decision": "promote", "pad": "x" * 100}).encode()

    read = parse(payload, max_bytes=64)

    assert read.decision is None
    assert read.error == f"decision payload is larger than 64 bytes: {URI}"


def test_parse_decision_default_cap_one_mebibyte() -> None:
    payload = b'{"decision": "promote", "pad": "' + b"x" * (1024 * 1024) + b'"}'

    assert parse(payload).error == f"decision payload is larger than 1048576 bytes: {URI}"


def test_parse_decision_normaliser_injected() -> None:
    read = artifacts.parse_decision(b'{"action": "Go"}', uri=URI, normalize=str.lower)

    assert read.decision == "go"


def test_decision_read_to_json_plain_values() -> None:
    assert parse(b'{"action": "promote"}').to_json() == {
        "decision": "promote_checkpoint",
        "source_key": "action",
        "error": None,
    }


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
_documents = st.dictionaries(
    st.sampled_from([*artifacts.DECISION_KEYS, "other", "Decision"]) | st.text(max_size=8),
    _json_values | st.sampled_from(["promote", "loop_back", "promote_checkpoint", ""]),
    max_size=5,
)
_payloads = (
    st.binary(max_size=200)
    | _json_values.map(lambda v: json.dumps(v).encode())
    | (_documents.map(lambda d: json.dumps(d).encode()))
)


@given(payload=_payloads)
@example(payload=b'{"decision": "\\ud800"}')
@example(payload=b"9" * 5000)
@example(payload=b"[" * 50_000)
def test_parse_decision_any_bytes_exactly_one_outcome(payload: bytes) -> None:
    read = parse(payload)

    assert (read.decision is None) != (read.error is None)
    if read.error is not None:
        assert read.error.endswith(URI)
    else:
        assert read.source_key in artifacts.DECISION_KEYS
        assert read.decision == decisions.normalize(read.decision or "")


@given(document=_documents)
def test_parse_decision_first_present_key_wins(document: dict[str, object]) -> None:
    read = parse(json.dumps(document).encode())

    present = [key for key in artifacts.DECISION_KEYS if key in document]
    assert read.source_key == (present[0] if present else None)
