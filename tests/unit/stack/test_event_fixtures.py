"""The replayed engine event logs keep to the engine's wire schema (pulumi.md §5.2).

``tests/fixtures/pulumi/*.jsonl`` were written by hand, not recorded, because no
engine can run here (pulumi.md §1). The SDK's parser reads keys with ``.get`` and
ignores the rest, so a misspelt or invented key would replay without complaint
and the fixtures could drift into a shape no engine emits. This module holds
every line to the JSON field names of the engine's ``apitype`` event structs
(``sdk/go/common/apitype/events.go``; ``OpType`` is in the same package), to the
ordering the SDK's event-log watcher relies on, and to the SDK's own parser.

The tables below are facts transcribed from the struct tags, not code: a field's
name is its JSON tag, and the struct a nested key holds is named beside it.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from pulumi.automation import events as auto_events

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "pulumi"

# JSON field names of each apitype struct (the struct tags). Every key of a
# fixture at a level the schema defines must be one of these.
FIELDS: dict[str, frozenset[str]] = {
    "EngineEvent": frozenset({"sequence", "timestamp"}),  # plus exactly one of PAYLOADS
    "CancelEvent": frozenset(),
    "StdoutEngineEvent": frozenset({"message", "color"}),
    # The Go tag is "streamID"; the Python SDK reads "streamId" (never sent).
    "DiagnosticEvent": frozenset(
        {"urn", "prefix", "message", "color", "severity", "streamID", "ephemeral"}
    ),
    "PreludeEvent": frozenset({"config"}),
    # "PolicyPacks" is PascalCase on the wire: the tag was added late and kept.
    "SummaryEvent": frozenset(
        {"maybeCorrupt", "durationSeconds", "resourceChanges", "PolicyPacks", "isPreview"}
    ),
    "ResourcePreEvent": frozenset({"metadata", "planning"}),
    "ResOutputsEvent": frozenset({"metadata", "planning"}),
    "ResOpFailedEvent": frozenset({"metadata", "status", "steps"}),
    "StepEventMetadata": frozenset(
        {"op", "urn", "type", "old", "new", "keys", "diffs", "detailedDiff", "logical", "provider"}
    ),
    "StepEventStateMetadata": frozenset(
        {
            "type",
            "urn",
            "custom",
            "delete",
            "id",
            "parent",
            "protect",
            "taint",
            "retainOnDelete",
            "inputs",
            "outputs",
            "provider",
            "initErrors",
        }
    ),
    "PropertyDiff": frozenset({"diffKind", "inputDiff"}),
    "PolicyEvent": frozenset(
        {
            "resourceUrn",
            "message",
            "color",
            "policyName",
            "policyPackName",
            "policyPackVersion",
            "policyPackVersionTag",
            "enforcementLevel",
        }
    ),
    "PolicyRemediationEvent": frozenset(
        {
            "resourceUrn",
            "color",
            "policyName",
            "policyPackName",
            "policyPackVersion",
            "policyPackVersionTag",
            "before",
            "after",
        }
    ),
    "PolicyLoadEvent": frozenset(),
    "PolicyAnalyzeSummaryEvent": frozenset(
        {
            "resourceUrn",
            "policyPackName",
            "policyPackVersion",
            "policyPackVersionTag",
            "passed",
            "failed",
        }
    ),
    "PolicyRemediateSummaryEvent": frozenset(
        {
            "resourceUrn",
            "policyPackName",
            "policyPackVersion",
            "policyPackVersionTag",
            "passed",
            "failed",
        }
    ),
    "PolicyAnalyzeStackSummaryEvent": frozenset(
        {"policyPackName", "policyPackVersion", "policyPackVersionTag", "passed", "failed"}
    ),
    "StartDebuggingEvent": frozenset({"config"}),
    # The completed count is tagged "received".
    "ProgressEvent": frozenset({"type", "id", "message", "received", "total", "done"}),
    "ErrorEvent": frozenset({"error"}),
}

# The fields tagged ``omitempty``: Go's encoder leaves them out when they hold their
# zero value (false, "", 0, null, an empty list or map) and writes them otherwise.
# Every other field of a struct is always written, null or empty included.
OMITEMPTY: dict[str, frozenset[str]] = {
    "DiagnosticEvent": frozenset({"urn", "prefix", "streamID", "ephemeral"}),
    "StartDebuggingEvent": frozenset({"config"}),
    "PolicyEvent": frozenset({"resourceUrn"}),
    "PolicyRemediationEvent": frozenset({"resourceUrn", "before", "after"}),
    "PolicyAnalyzeSummaryEvent": frozenset({"passed", "failed"}),
    "PolicyRemediateSummaryEvent": frozenset({"passed", "failed"}),
    "PolicyAnalyzeStackSummaryEvent": frozenset({"passed", "failed"}),
    "ResourcePreEvent": frozenset({"planning"}),
    "ResOutputsEvent": frozenset({"planning"}),
    "StepEventMetadata": frozenset({"keys", "diffs", "logical"}),
    "StepEventStateMetadata": frozenset(
        {"custom", "delete", "protect", "taint", "retainOnDelete", "initErrors"}
    ),
}
_ZERO: tuple[object, ...] = (False, "", 0, None, [], {})


def _is_zero(value: object) -> bool:
    return type(value) in (bool, str, int, list, dict, type(None)) and value in _ZERO


# EngineEvent's payload keys and the struct each holds; exactly one per event.
PAYLOADS: dict[str, str] = {
    "cancelEvent": "CancelEvent",
    "stdoutEvent": "StdoutEngineEvent",
    "diagnosticEvent": "DiagnosticEvent",
    "preludeEvent": "PreludeEvent",
    "summaryEvent": "SummaryEvent",
    "resourcePreEvent": "ResourcePreEvent",
    "resOutputsEvent": "ResOutputsEvent",
    "resOpFailedEvent": "ResOpFailedEvent",
    "policyEvent": "PolicyEvent",
    "policyRemediationEvent": "PolicyRemediationEvent",
    "policyLoadEvent": "PolicyLoadEvent",
    "policyAnalyzeSummaryEvent": "PolicyAnalyzeSummaryEvent",
    "policyRemediateSummaryEvent": "PolicyRemediateSummaryEvent",
    "policyAnalyzeStackSummaryEvent": "PolicyAnalyzeStackSummaryEvent",
    "startDebuggingEvent": "StartDebuggingEvent",
    "progressEvent": "ProgressEvent",
    "errorEvent": "ErrorEvent",
}

# (struct, key) -> the struct that key holds. ``old``/``new`` are pointers: null is legal.
NESTED: dict[tuple[str, str], str] = {
    ("ResourcePreEvent", "metadata"): "StepEventMetadata",
    ("ResOutputsEvent", "metadata"): "StepEventMetadata",
    ("ResOpFailedEvent", "metadata"): "StepEventMetadata",
    ("StepEventMetadata", "old"): "StepEventStateMetadata",
    ("StepEventMetadata", "new"): "StepEventStateMetadata",
}
NULLABLE: frozenset[tuple[str, str]] = frozenset(
    {("StepEventMetadata", "old"), ("StepEventMetadata", "new")}
)

# (struct, key) -> a free-form map whose values are this struct (keys are property paths).
MAP_OF: dict[tuple[str, str], str] = {("StepEventMetadata", "detailedDiff"): "PropertyDiff"}

OP_TYPES = frozenset(
    {
        "same",
        "create",
        "update",
        "delete",
        "replace",
        "create-replacement",
        "delete-replaced",
        "read",
        "read-replacement",
        "refresh",
        "discard",
        "discard-replaced",
        "remove-pending-replace",
        "import",
        "import-replacement",
    }
)
DIFF_KINDS = frozenset(
    {"add", "add-replace", "delete", "delete-replace", "update", "update-replace"}
)
# (struct, key) -> the closed set of string values the schema defines.
ENUMS: dict[tuple[str, str], frozenset[str]] = {
    ("StepEventMetadata", "op"): OP_TYPES,
    ("PropertyDiff", "diffKind"): DIFF_KINDS,
    ("DiagnosticEvent", "severity"): frozenset({"info", "info#err", "warning", "error"}),
    ("ProgressEvent", "type"): frozenset({"plugin-download", "plugin-install"}),
}


def _struct_problems(struct: str, value: object, where: str) -> list[str]:
    """Problems of ``value`` as the apitype ``struct`` found at ``where``."""
    if not isinstance(value, dict):
        return [f"{where} ({struct}) is {type(value).__name__}, not an object"]
    omitted = OMITEMPTY.get(struct, frozenset())
    problems = [
        f"missing key {key!r} at {where} ({struct}): the engine always writes it"
        for key in sorted(FIELDS[struct] - omitted - value.keys())
    ]
    for key, item in value.items():
        at = f"{where}.{key}"
        if key in omitted and _is_zero(item):
            problems.append(f"{at} = {item!r}: the engine omits this field when it is empty")
        if key not in FIELDS[struct]:
            problems.append(f"unknown key {key!r} at {where} ({struct})")
        elif (struct, key) in NESTED:
            if item is not None or (struct, key) not in NULLABLE:
                problems += _struct_problems(NESTED[struct, key], item, at)
        elif (struct, key) in MAP_OF:
            if item is not None and not isinstance(item, dict):
                problems.append(f"{at} is {type(item).__name__}, not an object")
            for path, entry in (item or {}).items():
                problems += _struct_problems(MAP_OF[struct, key], entry, f"{at}[{path!r}]")
        elif (struct, key) in ENUMS and item not in ENUMS[struct, key]:
            problems.append(f"{at} = {item!r} is not one of the schema's values")
    return problems


def event_problems(line: str) -> list[str]:
    """Every way one event-log line departs from apitype.EngineEvent; empty if it conforms."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError as error:
        return [f"not JSON: {error}"]
    if not isinstance(event, dict):
        return [f"the line is {type(event).__name__}, not an object"]
    problems = [
        f"{name!r} is missing or not an int"
        for name in ("sequence", "timestamp")
        if type(event.get(name)) is not int  # bool is an int subclass; exclude it
    ]
    payloads = [key for key in event if key in PAYLOADS]
    if len(payloads) != 1:
        problems.append(f"expected exactly one payload key, found {payloads}")
    for key in event:
        if key not in PAYLOADS and key not in FIELDS["EngineEvent"]:
            problems.append(f"unknown key {key!r} at the top level (EngineEvent)")
    for key in payloads:
        problems += _struct_problems(PAYLOADS[key], event[key], key)
    return problems


def _payload(line: str) -> str:
    event: dict[str, object] = json.loads(line)
    return next(key for key in event if key in PAYLOADS)


LOGS = sorted(FIXTURES.glob("*.jsonl"))
LINES = [
    (log.name, number, text)
    for log in LOGS
    for number, text in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1)
    if text.strip()
]
LINE_IDS = [f"{name}:{number}" for name, number, _ in LINES]


def test_event_fixtures_present_all_scenarios_found() -> None:
    assert [log.stem for log in LOGS] == [
        "create",
        "delete",
        "drift",
        "failure",
        "noop",
        "replace",
        "update",
    ]


@pytest.mark.parametrize(("name", "number", "text"), LINES, ids=LINE_IDS)
def test_event_line_in_fixture_matches_apitype_schema(name: str, number: int, text: str) -> None:
    problems = event_problems(text)
    assert not problems, "\n".join(f"{name}:{number}: {problem}" for problem in problems)


@pytest.mark.parametrize(("name", "number", "text"), LINES, ids=LINE_IDS)
def test_event_line_in_fixture_parses_with_sdk(name: str, number: int, text: str) -> None:
    parsed = auto_events.EngineEvent.from_json(json.loads(text))
    # The SDK names each payload attribute after the wire key in snake case.
    attribute = re.sub(r"([A-Z])", r"_\1", _payload(text)).lower()
    assert getattr(parsed, attribute) is not None, f"{name}:{number}: {attribute} not set"


@pytest.mark.parametrize("log", LOGS, ids=[log.name for log in LOGS])
def test_event_log_sequence_increasing_ends_summary_then_cancel(log: Path) -> None:
    lines = [text for text in log.read_text(encoding="utf-8").splitlines() if text.strip()]
    sequences = [json.loads(text)["sequence"] for text in lines]
    assert all(a < b for a, b in itertools.pairwise(sequences)), sequences
    payloads = [_payload(text) for text in lines]
    # The engine emits the summary, then the cancel event when the operation ends;
    # the SDK's watcher stops at the first cancelEvent, so nothing may follow it.
    assert payloads[-2:] == ["summaryEvent", "cancelEvent"], payloads[-2:]
    assert payloads.count("summaryEvent") == 1
    assert payloads.count("cancelEvent") == 1


_STEP = {
    "op": "update",
    "urn": "u",
    "type": "t",
    "provider": "",
    "old": None,
    "new": None,
    "detailedDiff": None,
}
_STATE = {
    "type": "t",
    "urn": "u",
    "id": "",
    "parent": "",
    "inputs": {},
    "outputs": {},
    "provider": "",
}
BAD_LINES: list[tuple[str, dict[str, object] | list[int], str]] = [
    ("not-an-object", [1, 2], "not an object"),
    ("no-payload", {"sequence": 1, "timestamp": 1}, "exactly one payload"),
    (
        "two-payloads",
        {"sequence": 1, "timestamp": 1, "cancelEvent": {}, "policyLoadEvent": {}},
        "exactly one payload",
    ),
    ("sequence-as-string", {"sequence": "1", "timestamp": 1, "cancelEvent": {}}, "'sequence'"),
    ("unknown-top-key", {"sequence": 1, "timestamp": 1, "cancelEvent": {}, "seq": 1}, "'seq'"),
    (
        "kind-not-diffKind",
        {
            "sequence": 1,
            "timestamp": 1,
            "resourcePreEvent": {
                "metadata": {**_STEP, "detailedDiff": {"a": {"kind": "update", "inputDiff": True}}}
            },
        },
        "unknown key 'kind'",
    ),
    (
        "diffKind-value",
        {
            "sequence": 1,
            "timestamp": 1,
            "resOutputsEvent": {
                "metadata": {**_STEP, "detailedDiff": {"a": {"diffKind": "modify"}}}
            },
        },
        "'modify'",
    ),
    (
        "op-value",
        {
            "sequence": 1,
            "timestamp": 1,
            "resourcePreEvent": {"metadata": {**_STEP, "op": "upsert"}},
        },
        "'upsert'",
    ),
    (
        "state-key",
        {
            "sequence": 1,
            "timestamp": 1,
            "resOpFailedEvent": {
                "metadata": {**_STEP, "new": {**_STATE, "secret": True}},
                "status": 1,
                "steps": 1,
            },
        },
        "unknown key 'secret'",
    ),
    (
        "streamId-spelling",
        {
            "sequence": 1,
            "timestamp": 1,
            "diagnosticEvent": {
                "message": "m",
                "color": "never",
                "severity": "info",
                "streamId": 1,
            },
        },
        "unknown key 'streamId'",
    ),
    (
        "state-without-id",
        {
            "sequence": 1,
            "timestamp": 1,
            "resourcePreEvent": {
                "metadata": {**_STEP, "new": {k: v for k, v in _STATE.items() if k != "id"}}
            },
        },
        "missing key 'id'",
    ),
    (
        "omitempty-false-written",
        {
            "sequence": 1,
            "timestamp": 1,
            "resourcePreEvent": {"metadata": {**_STEP, "new": {**_STATE, "protect": False}}},
        },
        "omits this field when it is empty",
    ),
    (
        "metadata-without-old",
        {
            "sequence": 1,
            "timestamp": 1,
            "resOutputsEvent": {"metadata": {k: v for k, v in _STEP.items() if k != "old"}},
        },
        "missing key 'old'",
    ),
    (
        "summary-camel-policypacks",
        {"sequence": 1, "timestamp": 1, "summaryEvent": {"policyPacks": {}}},
        "unknown key 'policyPacks'",
    ),
]


@pytest.mark.parametrize(
    ("line", "expected"),
    [(case[1], case[2]) for case in BAD_LINES],
    ids=[case[0] for case in BAD_LINES],
)
def test_event_checker_bad_line_rejected(line: object, expected: str) -> None:
    problems = event_problems(json.dumps(line))
    assert any(expected in problem for problem in problems), problems
