"""The JSON Schema (draft 2020-12) of the ``npa.workflow/v0.0.1`` format, for editors.

Editors (the YAML language server's ``# yaml-language-server: $schema=…``
comment) use it for completion and inline errors. It is built from the
constants the parser and validator use (field names, aliases, predicates,
profile keys), so the two cannot drift; a test pins that. The validator stays
the authority: the schema cannot express cross-field rules (references,
reachability, tokens), and it is stricter in one way: a key the validator
ignores with a warning is an error here, which is where an editor shows a typo.
"""

from __future__ import annotations

from typing import Any

from npa_infra.spec import model, parse, validate

__all__ = ["DOCS", "SCHEMA_URI", "workflow_schema"]

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
DOCS = "docs/spec-format.md"

# The camelCase name of each snake_case alias (parse.STATE_FIELDS maps both to one field).
_CAMEL = {v: k for k, v in parse.STATE_FIELDS.items() if k != v}

_TOKEN = r"\{\{\s*config\.[A-Za-z0-9_.-]+\s*\}\}"
# numbers.resolve_int: an int, a digit string, config.KEY or a whole {{config.KEY}}
_INT_FORM = rf"^\s*(?:[+-]?[0-9]+|config\.[A-Za-z0-9_.-]+|{_TOKEN})\s*$"
_HAS_TOKEN = r"\{\{"


def _doc(text: str, section: str) -> str:
    return f"{text} See {DOCS}#{section}."


def _int_form(minimum: int, maximum: int | None = None) -> dict[str, Any]:
    number: dict[str, Any] = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        number["maximum"] = maximum
    return {"oneOf": [number, {"type": "string", "pattern": _INT_FORM}]}


def _token_or(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or a string holding a ``{{ … }}`` token (resolved at plan time)."""
    return {"anyOf": [schema, {"type": "string", "pattern": _HAS_TOKEN}]}


def _artifacts() -> dict[str, Any]:
    item = {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["uri"],
                "properties": {
                    "uri": {"type": "string", "description": "An s3:// URI; tokens allowed."},
                    "schema": {"type": "string", "description": "A free label of the payload."},
                },
            },
        ]
    }
    return {"type": "array", "items": item}


def _run() -> dict[str, Any]:
    return {
        "type": "object",
        "description": _doc("The command: argv (an exec list) or shell (a bash string).", "steps"),
        "additionalProperties": False,
        "properties": {
            "argv": {"type": "array", "minItems": 1, "items": {"type": ["string", "number"]}},
            "shell": {"type": "string", "minLength": 1},
        },
        "minProperties": 1,
        "not": {"required": ["argv", "shell"]},
    }


def _state_fields() -> dict[str, dict[str, Any]]:
    predicate = {"enum": list(model.PREDICATES)}
    names = {"type": "array", "items": {"type": "string", "minLength": 1}}
    return {
        "description": {"type": ["string", "number", "boolean", "null"]},
        "run": _run(),
        "tool_ref": {
            "type": "string",
            "minLength": 1,
            "description": _doc("A catalog tool (npa workbench workflow catalog).", "steps"),
        },
        "sequence": {**names, "description": _doc("Child states run in order.", "loops")},
        "parallel": {**names, "description": _doc("Leaf members.", "parallel-groups")},
        "parallel_count": _int_form(1),
        "max_concurrency": _int_form(1, 64),
        "params": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
            "description": _doc("A config overlay for this state only.", "variables"),
        },
        "trigger": {
            "type": "object",
            "additionalProperties": False,
            "required": ["uri"],
            "properties": {
                "uri": {"type": "string", "minLength": 1},
                "pollSeconds": _int_form(1),
                "maxPolls": _int_form(0),
                "minObjects": _int_form(1),
            },
        },
        "loop": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"max": _int_form(1), "until": predicate},
            "description": _doc("Repeat up to max times, stop early on until.", "loops"),
        },
        "transitions": {
            "type": "array",
            "description": _doc("Routes on the decision.", "transitions"),
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["goto"],
                "properties": {
                    "goto": {"type": "string", "minLength": 1},
                    "when": predicate,
                    "if": {"type": "string", "pattern": r"^\s*(config\.)?[A-Za-z0-9_.-]+\s*$"},
                },
            },
        },
        "next": {"type": "string", "minLength": 1},
        "needs": {"oneOf": [{"type": "string", "minLength": 1}, names]},
        "inputs": _artifacts(),
        "outputs": _artifacts(),
        "resources": {"type": "string", "minLength": 1},
        "terminal": {"type": "boolean"},
        "writes_decision": {"type": "boolean"},
        "multi_node_mode": {"const": "sharded"},
    }


def _state() -> dict[str, Any]:
    fields = _state_fields()
    properties = {
        key: {**fields[attr], "description": f"Alias of {_CAMEL[attr]}."}
        if key == attr and attr in _CAMEL  # a snake_case alias
        else fields[attr]
        for key, attr in parse.STATE_FIELDS.items()
    }
    # dsl.md §4.1 phase 5: a state needs work or an edge
    work = ("run", "toolRef", "tool_ref", "sequence", "parallel", "transitions", "next")
    either = [{"required": [k]} for k in work] + [
        {"required": ["terminal"], "properties": {"terminal": {"const": True}}}
    ]
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "anyOf": either,
        "allOf": [
            # mutually exclusive fields: toolRef with run, sequence with parallel
            {"not": {"anyOf": [{"required": [t, "run"]} for t in ("toolRef", "tool_ref")]}},
            {"not": {"required": ["sequence", "parallel"]}},
        ],
    }


def _profile() -> dict[str, Any]:
    number_text = r"^[0-9]+(\.[0-9]+)?\+?$"
    memory_text = r"^[0-9]+(\.[0-9]+)?([KMGTP]i?B?|[kmgtp]i?b?)?\+?$"
    accelerator = r"^[A-Za-z0-9][A-Za-z0-9_.-]*(:[0-9]+)?$"
    fields: dict[str, Any] = {
        "cloud": {"type": "string"},
        "accelerators": {
            "anyOf": [
                {"type": "string", "pattern": accelerator},
                {"type": "string", "pattern": _HAS_TOKEN},
                {
                    "type": "object",
                    "additionalProperties": _token_or({"type": "integer", "minimum": 1}),
                },
            ],
            "description": _doc('"NAME:N" or {NAME: N}, N >= 1.', "resources"),
        },
        "cpus": _token_or(
            {"oneOf": [{"type": "number"}, {"type": "string", "pattern": number_text}]}
        ),
        "memory": _token_or(
            {"oneOf": [{"type": "number"}, {"type": "string", "pattern": memory_text}]}
        ),
        "disk_size": _token_or({"type": "integer", "minimum": 1}),
        "use_spot": _token_or({"type": "boolean"}),
        "region": {"type": "string"},
        "image": {
            "type": "string",
            "description": _doc("An image, a token or tool://X.", "resources"),
        },
        "num_nodes": _token_or({"type": "integer", "minimum": 1, "maximum": 32}),
        "kubernetes": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "pod_config": {"type": "object"},
                "provision_timeout": _token_or({"type": "integer"}),
            },
        },
        "deployIfAbsent": {
            "oneOf": [
                {"const": True},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {k: {} for k in sorted(validate.DEPLOY_KEYS)},
                },
            ]
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {key: fields[key] for key in sorted(validate.PROFILE_KEYS)},
    }


def workflow_schema() -> dict[str, Any]:
    """The JSON Schema document of the format (a new dict on every call)."""
    metadata_fields: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": ["string", "number", "boolean", "null"]},
        "namespace": {"type": ["string", "number", "boolean", "null"]},
        "labels": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
        },
        "executionMode": {
            "enum": [m.value for m in model.ExecutionMode],
            "description": _doc("runtime: one managed job per wave.", "runtime-mode"),
        },
    }
    return {
        "$schema": SCHEMA_URI,
        "$id": "urn:npa-infra:schema:npa.workflow:v0.0.1",
        "title": "npa.workflow/v0.0.1 spec",
        "description": _doc("A workflow spec that npa validates, plans and submits.", "states"),
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "states"],
        "properties": {
            "apiVersion": {"enum": list(model.API_VERSIONS)},
            "kind": {"const": "Workflow"},
            "metadata": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {k: metadata_fields[k] for k in parse.METADATA_FIELDS},
            },
            "config": {
                "type": "object",
                "description": _doc("The config.* token root; --var overrides it.", "variables"),
                "properties": {
                    "plan_assume_decision": _token_or(
                        {"enum": [*validate.ALLOWED_ASSUMPTIONS, ""]}
                    ),
                },
            },
            "run": {"type": "object", "description": _doc("The run.* token root.", "tokens")},
            "resources": {
                "type": "object",
                "additionalProperties": {"$ref": "#/$defs/profile"},
                "description": _doc("Named resource profiles.", "resources"),
            },
            "initial": {"type": "string", "minLength": 1},
            "states": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {"$ref": "#/$defs/state"},
                "description": _doc("The state machine.", "states"),
            },
        },
        "$defs": {"state": _state(), "profile": _profile()},
    }
