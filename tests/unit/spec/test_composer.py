"""Tests for ``npa_infra.spec.composer``: nodes counted while composing (issue 19).

Refusal must come before the document is composed, so the tests count the
nodes the composer made (an instrumented ``_Composer.node``), never time.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import yaml
from hypothesis import given

from npa_infra.spec import composer, source
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.source import Limits, LoadedDocument, load_text
from tests import strategies


class _Counted:
    """Counts calls of ``_Composer.node`` (one per node or alias composed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = composer._Composer.node

        def node(inner: Any, depth: int) -> Any:
            self.calls += 1
            return real(inner, depth)

        monkeypatch.setattr(composer._Composer, "node", node)


def _big(states: int) -> str:
    body = "".join(
        f"  s{i}:\n    run: {{argv: [echo, '{i}']}}\n    next: s{i + 1}\n" for i in range(states)
    )
    return "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nstates:\n" + body


def _issue(result: LoadedDocument | SpecIssue) -> SpecIssue:
    assert isinstance(result, SpecIssue), result
    return result


def test_compose_over_node_cap_stops_at_the_cap_not_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = _big(2_000)  # about 20,000 nodes
    counted = _Counted(monkeypatch)
    issue = _issue(load_text(text, "t.yaml", limits=Limits(max_nodes=1_000)))
    assert issue.message == "refused: document has more than 1000 nodes"
    assert counted.calls == 1_001
    assert issue.line < len(text.splitlines()) // 10  # stopped near the top


def test_load_text_default_cap_refuses_oversized_spec_while_composing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = _Counted(monkeypatch)
    issue = _issue(load_text(_big(30_000), "t.yaml"))  # about 300,000 nodes, 1.1 MB
    assert issue.message == f"refused: document has more than {source.MAX_NODES} nodes"
    assert counted.calls == source.MAX_NODES + 1


def test_compose_under_node_cap_is_accepted() -> None:
    doc = load_text(_big(50), "t.yaml", limits=Limits(max_nodes=1_000))
    assert isinstance(doc, LoadedDocument)
    assert len(doc.data["states"]) == 50


def test_compose_deep_nesting_stops_at_max_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _Counted(monkeypatch)
    issue = _issue(load_text("[" * 500 + "]" * 500, "t.yaml"))
    assert issue.message == f"refused: document nests deeper than {source.MAX_DEPTH} levels"
    assert counted.calls == source.MAX_DEPTH + 2


def test_compose_extreme_nesting_is_refused_before_max_depth_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # libyaml's scanner runs ahead and refuses 100,000 levels itself; either way
    # no more than MAX_DEPTH + 2 nodes are composed
    counted = _Counted(monkeypatch)
    issue = _issue(load_text("[" * 100_000 + "]" * 100_000, "t.yaml"))
    assert issue.path == "$"
    assert counted.calls <= source.MAX_DEPTH + 2


def _billion_laughs(levels: int) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_load_text_billion_laughs_is_refused_after_cap_nodes_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = _Counted(monkeypatch)
    built = {"n": 0}
    real_build = source._Builder.build

    def build(inner: Any, node: Any, path: Any, depth: int) -> Any:
        built["n"] += 1
        return real_build(inner, node, path, depth)

    monkeypatch.setattr(source._Builder, "build", build)
    issue = _issue(load_text(_billion_laughs(9), "t.yaml"))  # 9**10 nodes expanded
    assert issue.message == f"refused: document expands to more than {source.MAX_NODES} nodes"
    assert counted.calls < 200  # composing shares the anchored nodes
    assert built["n"] == source.MAX_NODES + 1


def test_load_text_small_cap_refuses_alias_expansion_at_that_cap() -> None:
    issue = _issue(load_text(_billion_laughs(3), "t.yaml", limits=Limits(max_nodes=500)))
    assert issue.message == "refused: document expands to more than 500 nodes"


def test_compose_duplicate_anchor_is_invalid_yaml_naming_first_line() -> None:
    issue = _issue(load_text("a: &x 1\nb: &x 2\nc: *x\n", "t.yaml"))
    assert issue.message == "invalid YAML: found duplicate anchor 'x' (first at line 1)"
    assert (issue.line, issue.column) == (2, 4)


def test_compose_undefined_alias_is_invalid_yaml() -> None:
    issue = _issue(load_text("a: *nowhere\n", "t.yaml"))
    assert issue.message == "invalid YAML: found undefined alias 'nowhere'"


def test_compose_two_documents_is_invalid_yaml() -> None:
    issue = _issue(load_text("a: 1\n---\nb: 2\n", "t.yaml"))
    assert issue.message == "invalid YAML: but found another document"


def _shape(node: yaml.Node | None) -> Any:
    if node is None:
        return None
    mark = (node.start_mark.line, node.start_mark.column, node.end_mark.line, node.end_mark.column)
    if isinstance(node, yaml.ScalarNode):
        return (node.tag, node.value, mark)
    if isinstance(node, yaml.SequenceNode):
        return (node.tag, [_shape(item) for item in node.value], mark)
    return (node.tag, [(_shape(k), _shape(v)) for k, v in node.value], mark)


@given(strategies.random_spec_texts())
def test_compose_matches_libyaml_composer_on_spec_texts(text: str) -> None:
    expected = yaml.compose(text, Loader=yaml.CSafeLoader)
    assert _shape(composer.compose(text, max_nodes=10**9, max_depth=10**6)) == _shape(expected)


@given(strategies.mutated_spec_texts())
def test_compose_matches_libyaml_on_mutated_texts_or_both_refuse(text: str) -> None:
    try:
        expected: Any = _shape(yaml.compose(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        expected = "error"
    try:
        got: Any = _shape(composer.compose(text, max_nodes=10**9, max_depth=10**6))
    except yaml.YAMLError:
        got = "error"
    assert got == expected


def test_compose_composer_is_freed_on_return_without_a_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 19: a bound method kept on the composer made it a reference cycle, so it
    # (and the parser's copy of the text) lived until the next collection, which
    # load_validated pauses
    made: list[weakref.ref[Any]] = []
    real = composer._Composer.__init__

    def init(inner: Any, text: str, max_nodes: int, max_depth: int) -> None:
        real(inner, text, max_nodes, max_depth)
        made.append(weakref.ref(inner))

    monkeypatch.setattr(composer._Composer, "__init__", init)
    enabled = gc.isenabled()
    gc.disable()
    try:
        node = composer.compose(_big(20), max_nodes=10_000, max_depth=64)
        alive = [ref for ref in made if ref() is not None]
    finally:
        if enabled:
            gc.enable()
    assert node is not None
    assert len(made) == 1
    assert alive == []
