"""The JSON Schema of the format (``npa_infra.spec.schema``), checked with ``jsonschema``.

It must be a valid draft 2020-12 schema, be built from the validator's own
constants, accept every shipped spec, every generated valid spec and every
corpus spec that validates, and reject each defect kind it can express.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.catalog.loader import select_catalog
from npa_infra.errors import SpecError
from npa_infra.spec import model, parse, validate
from npa_infra.spec.schema import workflow_schema
from npa_infra.workflow.planning.loading import load_validated
from tests.strategies import random_spec_texts, valid_spec_texts

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted(
    p
    for p in (REPO / "workflows").rglob("*.yaml")
    if "apiVersion" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {})
)
SCHEMA = workflow_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
LINEAR = yaml.safe_load((REPO / "workflows/testing/linear-chain.yaml").read_text(encoding="utf-8"))


def _errors(data: object) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(data)]


def test_workflow_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_workflow_schema_keys_and_enums_equal_validator_constants() -> None:
    props = SCHEMA["properties"]
    state = SCHEMA["$defs"]["state"]["properties"]
    profile = SCHEMA["$defs"]["profile"]["properties"]
    assert set(state) == set(parse.STATE_FIELDS)
    assert list(props["metadata"]["properties"]) == list(parse.METADATA_FIELDS)
    assert set(profile) == set(validate.PROFILE_KEYS)
    deploy = profile["deployIfAbsent"]["oneOf"][1]["properties"]
    assert set(deploy) == set(validate.DEPLOY_KEYS)
    assert props["apiVersion"]["enum"] == list(model.API_VERSIONS)
    assert props["metadata"]["properties"]["executionMode"]["enum"] == [
        m.value for m in model.ExecutionMode
    ]
    assert state["loop"]["properties"]["until"]["enum"] == list(model.PREDICATES)
    assert state["transitions"]["items"]["properties"]["when"]["enum"] == list(model.PREDICATES)
    assumed = props["config"]["properties"]["plan_assume_decision"]["anyOf"][0]["enum"]
    assert set(assumed) == {*validate.ALLOWED_ASSUMPTIONS, ""}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_workflow_schema_shipped_spec_accepted(path: Path) -> None:
    assert _errors(yaml.safe_load(path.read_text(encoding="utf-8"))) == []


@given(text=valid_spec_texts())
def test_workflow_schema_generated_valid_spec_accepted(text: str) -> None:
    assert _errors(yaml.safe_load(text)) == []


@given(text=random_spec_texts())
def test_workflow_schema_accepts_what_validates_without_warnings(text: str) -> None:
    try:
        validated = load_validated("r.yaml", BUILTIN, text=text)
    except SpecError:
        return
    if not validated.warnings:
        assert _errors(yaml.safe_load(text)) == []


def _corpus() -> list[Path]:
    root = os.environ.get("NPA_SPEC_CORPUS", "")
    return sorted(Path(root).glob("*.yaml")) if root else []


@pytest.mark.corpus
@pytest.mark.parametrize("path", _corpus() or [None], ids=lambda p: p.name if p else "unset")
def test_workflow_schema_corpus_spec_that_validates_accepted(path: Path | None) -> None:
    # the corpus is found as tests/integration/test_corpus.py finds it
    if path is None or not os.environ.get("NPA_TOOL_CATALOG"):
        message = "set NPA_SPEC_CORPUS and NPA_TOOL_CATALOG to run the corpus tests"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    load_validated(path, select_catalog(None, os.environ))  # raises if it does not validate
    assert _errors(yaml.safe_load(path.read_text(encoding="utf-8"))) == []


def _set(*keys: str | int, value: object) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return edit


S = ("states", "split")
DEFECTS: dict[str, Callable[[dict[str, Any]], None]] = {
    # unknown keys
    "unknown-top-level-key": _set("statse", value={}),
    "unknown-state-key": _set(*S, "nxt", value="report"),
    "unknown-metadata-key": _set("metadata", "owner", value="me"),
    "unknown-profile-key": _set("resources", "cpu", "gpus", value=1),
    "unknown-run-key": _set(*S, "run", value={"argv": ["true"], "cmd": "x"}),
    "unknown-transition-key": _set(*S, "transitions", value=[{"goto": "report", "whne": "x"}]),
    "unknown-loop-key": _set(*S, "loop", value={"max": 2, "untill": "loop_back"}),
    # wrong types
    "terminal-not-bool": _set(*S, "terminal", value="yes"),
    "sequence-is-string": _set(*S, "sequence", value="report"),
    "cpus-word": _set("resources", "cpu", "cpus", value="two"),
    "memory-word": _set("resources", "cpu", "memory", value="lots"),
    "params-nested": _set(*S, "params", value={"a": {"b": 1}}),
    "states-list": _set("states", value=["split"]),
    "loop-max-word": _set(*S, "loop", value={"max": "many"}),
    # ranges
    "max-concurrency-65": _set(*S, "maxConcurrency", value=65),
    "num-nodes-33": _set("resources", "cpu", "num_nodes", value=33),
    "accelerator-count-0": _set("resources", "cpu", "accelerators", value={"H100": 0}),
    "empty-states": _set("states", value={}),
    # missing required fields
    "missing-states": _drop("states"),
    "missing-api-version": _drop("apiVersion"),
    "missing-metadata-name": _drop("metadata", "name"),
    "transition-without-goto": _set(*S, "transitions", value=[{"when": "loop_back"}]),
    "output-without-uri": _set(*S, "outputs", value=[{"schema": "x"}]),
    "trigger-without-uri": _set(*S, "trigger", value={"pollSeconds": 5}),
    "state-without-work-or-edge": _set("states", "split", value={"description": "nothing"}),
    # bad enum values
    "bad-api-version": _set("apiVersion", value="npa.workflow/v9"),
    "bad-kind": _set("kind", value="Job"),
    "bad-execution-mode": _set("metadata", "executionMode", value="eager"),
    "bad-until": _set(*S, "loop", value={"max": 2, "until": "promote_always"}),
    "bad-when": _set(*S, "transitions", value=[{"goto": "report", "when": "maybe"}]),
    "bad-multi-node-mode": _set(*S, "multiNodeMode", value="replicated"),
    "bad-assumed-decision": _set("config", "plan_assume_decision", value="ship_it"),
    # mutually exclusive fields
    "tool-ref-with-run": _set(*S, "run", value={"shell": "echo dropped"}),
    "argv-with-shell": _set(*S, value={"run": {"argv": ["a"], "shell": "b"}, "next": "report"}),
    "sequence-with-parallel": _set(*S, value={"sequence": ["report"], "parallel": ["report"]}),
}


def test_defect_base_spec_accepted() -> None:
    assert _errors(LINEAR) == []


@pytest.mark.parametrize("edit", DEFECTS.values(), ids=DEFECTS.keys())
def test_workflow_schema_defect_rejected(edit: Callable[[dict[str, Any]], None]) -> None:
    data = copy.deepcopy(LINEAR)
    edit(data)
    assert _errors(data) != []
