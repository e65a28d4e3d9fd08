"""Tests for ``npa_infra.spec.source``: positions and hostile input (dsl.md §4.2).

Every input, however broken, must come back as a ``LoadedDocument`` or one
file-level ``SpecIssue``; nothing may raise. Expected positions are computed
from the YAML text itself, so a test names the snippet it expects the
position to point at instead of a magic column number.
"""

from __future__ import annotations

import gc
import itertools
import os
import socket
import textwrap
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given

from npa_infra.spec import composer, source
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.source import (
    Limits,
    LoadedDocument,
    Position,
    json_path,
    load_file,
    load_text,
)
from tests import strategies


def _where(text: str, line_snippet: str, at: str | None = None) -> Position:
    """1-based position of ``at`` (default: ``line_snippet``) on the unique line holding ``line_snippet``."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line_snippet in line]
    assert len(hits) == 1, f"snippet {line_snippet!r} must be on exactly one line"
    line = lines[hits[0]]
    return Position(hits[0] + 1, line.index(at if at is not None else line_snippet) + 1)


def _doc(text: str) -> LoadedDocument:
    result = load_text(text, "t.yaml")
    assert isinstance(result, LoadedDocument), result
    return result


def _issue(result: LoadedDocument | SpecIssue) -> SpecIssue:
    assert isinstance(result, SpecIssue), result
    return result


NESTED = textwrap.dedent(
    """\
    apiVersion: npa.workflow/v0.0.1
    states:
      first:
        run:
          argv: [echo, "hello", world]
        next: second
      second:
        outputs:
          - uri: s3://b/out
            schema: npa.test.v1
        terminal: true
    """
)


# -- positions -----------------------------------------------------------


def test_load_text_nested_scalar_value_position_points_at_value() -> None:
    doc = _doc(NESTED)
    assert doc.source_map.values[("states", "first", "next")] == _where(
        NESTED, "next: second", "second"
    )


def test_load_text_nested_key_position_points_at_key() -> None:
    doc = _doc(NESTED)
    assert doc.source_map.keys[("states", "first", "next")] == _where(NESTED, "next: second")


def test_load_text_flow_list_item_position_points_at_item() -> None:
    doc = _doc(NESTED)
    assert doc.source_map.values[("states", "first", "run", "argv", 1)] == _where(
        NESTED, "argv: [", '"hello"'
    )
    assert doc.source_map.values[("states", "first", "run", "argv", 2)] == _where(
        NESTED, "argv: [", "world"
    )


def test_load_text_block_list_mapping_positions_point_at_item_fields() -> None:
    doc = _doc(NESTED)
    assert doc.source_map.values[("states", "second", "outputs", 0, "schema")] == _where(
        NESTED, "schema: npa.test.v1", "npa.test.v1"
    )
    assert doc.source_map.keys[("states", "second", "outputs", 0, "uri")] == _where(
        NESTED, "- uri: s3://b/out", "uri"
    )


def test_load_text_crlf_line_endings_positions_count_lines_once() -> None:
    text = NESTED.replace("\n", "\r\n")
    doc = _doc(text)
    assert doc.source_map.values[("states", "first", "next")] == _where(
        NESTED, "next: second", "second"
    )
    assert len(doc.lines) == len(NESTED.splitlines())


def test_load_text_lines_keep_source_text_for_reported_line() -> None:
    doc = _doc(NESTED)
    pos = doc.source_map.values[("states", "second", "terminal")]
    assert doc.lines[pos.line - 1].strip() == "terminal: true"
    assert doc.label == "t.yaml"


def test_source_map_locate_missing_path_falls_back_to_nearest_ancestor() -> None:
    doc = _doc(NESTED)
    assert (
        doc.source_map.locate(("states", "first", "nope", "deeper"))
        == (doc.source_map.values[("states", "first")])
    )


def test_source_map_locate_key_prefers_key_position() -> None:
    doc = _doc(NESTED)
    assert doc.source_map.locate(("states", "first", "next"), key=True) == _where(
        NESTED, "next: second"
    )


def test_source_map_locate_empty_map_returns_origin() -> None:
    assert source.SourceMap().locate(("a", "b")) == Position(0, 0)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), "$"),
        (("states",), "$.states"),
        (("states", "a", "transitions", 0, "goto"), "$.states.a.transitions[0].goto"),
        (("states", "a", "needs", 2), "$.states.a.needs[2]"),
    ],
    ids=["root", "one-key", "index-then-key", "trailing-index"],
)
def test_json_path_parts_render_dotted_and_indexed(
    path: tuple[str | int, ...], expected: str
) -> None:
    assert json_path(path) == expected


# -- hostile text: always a document or one issue -------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [\n", "invalid YAML"),
        ("a: b: c\n", "invalid YAML"),
        ("a:\n  - x\n  y: 1\n", "invalid YAML"),
        ("\ta: 1\n", "invalid YAML"),
        ('a: "unterminated\n', "invalid YAML"),
        ("--- a\n--- b\n", "invalid YAML"),
        ("a: \x07\n", "invalid YAML"),
        ("a: !!python/object:os.system x\n", "invalid YAML value"),
        ("a: !custom x\n", "invalid YAML value"),
        ("a: !!binary not*base64\n", "invalid YAML value"),
        ("a: !!float abc\n", "invalid YAML value"),
        ("a: 2020-13-45\n", "invalid YAML value"),
        ("a: *undefined\n", "invalid YAML"),
    ],
    ids=[
        "unclosed-flow",
        "mapping-in-scalar",
        "mixed-block",
        "tab-indent",
        "unterminated-quote",
        "two-documents",
        "control-char",
        "python-tag",
        "unknown-tag",
        "bad-binary",
        "bad-float-tag",
        "bad-timestamp",
        "undefined-alias",
    ],
)
def test_load_text_non_yaml_returns_located_file_issue(text: str, message: str) -> None:
    issue = _issue(load_text(text, "t.yaml"))
    assert issue.path == "$"
    assert issue.message.startswith(message)
    assert issue.line >= 0
    assert issue.hint


def test_load_text_syntax_error_points_at_offending_line() -> None:
    text = "apiVersion: v\nkind: Workflow\nstates:\n  a: [1, 2\n  b: 3\n"
    issue = _issue(load_text(text, "t.yaml"))
    assert issue.line >= 4
    assert issue.column >= 1


def test_load_text_nul_character_returns_issue() -> None:
    issue = _issue(load_text("a: 1\x00\n", "t.yaml"))
    assert issue.message.startswith("invalid YAML")


def test_load_text_lone_surrogate_returns_issue_not_exception() -> None:
    # Product bug: libyaml encodes the text to UTF-8 and raises UnicodeEncodeError.
    result = load_text("a: \ud800\n", "t.yaml")
    assert isinstance(result, SpecIssue)


def test_load_text_byte_order_mark_is_ignored() -> None:
    assert _doc("\ufeffa: 1\n").data == {"a": 1}


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "# only a comment\n", "---\n"],
    ids=["empty", "blank-lines", "comment-only", "bare-document-marker"],
)
def test_load_text_empty_document_returns_null_data(text: str) -> None:
    doc = _doc(text)
    assert doc.data is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- a\n- b\n", ["a", "b"]),
        ("just a string\n", "just a string"),
        ("42\n", 42),
    ],
    ids=["list", "string", "int"],
)
def test_load_text_non_mapping_top_level_returns_document(text: str, expected: object) -> None:
    assert _doc(text).data == expected


# -- depth and alias guards --------------------------------------------------


def test_load_text_flow_nesting_over_max_depth_is_refused() -> None:
    depth = source.MAX_DEPTH + 10
    issue = _issue(load_text("a: " + "[" * depth + "]" * depth + "\n", "t.yaml"))
    assert issue.message == f"refused: document nests deeper than {source.MAX_DEPTH} levels"
    assert issue.line == 1
    assert issue.column > 1


def test_load_text_block_nesting_over_max_depth_is_refused() -> None:
    depth = source.MAX_DEPTH + 5
    text = "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "leaf\n"
    issue = _issue(load_text(text, "t.yaml"))
    assert "nests deeper" in issue.message


def test_load_text_nesting_under_max_depth_is_accepted() -> None:
    depth = source.MAX_DEPTH - 4
    doc = _doc("[" * depth + "]" * depth + "\n")
    node = doc.data
    for _ in range(depth - 1):
        assert isinstance(node, list)
        node = node[0]
    assert node == []


def test_load_text_extreme_nesting_returns_issue_not_recursion_error() -> None:
    depth = 100_000
    issue = _issue(load_text("[" * depth + "]" * depth, "t.yaml"))
    assert issue.path == "$"


def _billion_laughs(levels: int) -> str:
    names = [f"l{i}" for i in range(levels + 1)]
    out = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in itertools.pairwise(names):
        out.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(out) + "\n"


def test_load_text_alias_bomb_is_refused() -> None:
    issue = _issue(load_text(_billion_laughs(8), "t.yaml"))
    assert issue.message == f"refused: document expands to more than {source.MAX_NODES} nodes"
    assert issue.line >= 1


def test_load_text_small_alias_reuse_is_expanded() -> None:
    doc = _doc("base: &b {cpus: 2}\nprofile: *b\nother: *b\n")
    assert doc.data["profile"] == {"cpus": 2}
    assert doc.data["other"] == {"cpus": 2}


def test_load_text_recursive_alias_returns_issue() -> None:
    issue = _issue(load_text("a: &x [*x]\n", "t.yaml"))
    assert issue.message.startswith("refused")


# -- merge keys and duplicates ---------------------------------------------

MERGE = textwrap.dedent(
    """\
    defaults: &defaults
      cpus: 2
      memory: 8Gi
    extra: &extra
      memory: 16Gi
      region: eu
    profile:
      <<: *defaults
      memory: 32Gi
    multi:
      <<: [*defaults, *extra]
    """
)


def test_load_text_merge_key_copies_anchor_fields() -> None:
    doc = _doc(MERGE)
    assert doc.data["profile"]["cpus"] == 2
    assert "<<" not in doc.data["profile"]


def test_load_text_merge_key_explicit_field_overrides_merged() -> None:
    assert _doc(MERGE).data["profile"]["memory"] == "32Gi"


def test_load_text_merge_key_list_earlier_source_wins() -> None:
    multi = _doc(MERGE).data["multi"]
    assert multi == {"cpus": 2, "memory": "8Gi", "region": "eu"}


def test_load_text_merged_value_position_points_at_anchor_source() -> None:
    doc = _doc(MERGE)
    assert doc.source_map.values[("profile", "cpus")] == _where(MERGE, "cpus: 2", "2")


def test_load_text_merge_override_position_points_at_override() -> None:
    # Product bug: the position of the merged anchor value is kept (setdefault),
    # so an error in the override is reported at the anchor's line.
    doc = _doc(MERGE)
    assert doc.source_map.values[("profile", "memory")] == _where(MERGE, "memory: 32Gi", "32Gi")


DUPLICATE = textwrap.dedent(
    """\
    states:
      a:
        next: first
        next: second
    """
)


def test_load_text_duplicate_key_returns_document_with_last_value() -> None:
    doc = _doc(DUPLICATE)
    assert doc.data["states"]["a"]["next"] == "second"


def test_load_text_duplicate_key_in_step_is_issue_at_second_key_naming_first() -> None:
    (issue,) = _doc(DUPLICATE).issues
    assert issue.path == "$.states.a.next"
    assert issue.state == "a"
    assert issue.message == "duplicate key 'next': already defined at line 3"
    assert (issue.line, issue.column) == _where(DUPLICATE, "next: second", "next")
    assert issue.hint


def test_load_text_duplicate_top_level_key_is_issue() -> None:
    text = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\napiVersion: v2\n"
    (issue,) = _doc(text).issues
    assert issue.path == "$.apiVersion"
    assert issue.state is None
    assert issue.message == "duplicate key 'apiVersion': already defined at line 1"
    assert (issue.line, issue.column) == (3, 1)


STATE_TWICE = textwrap.dedent(
    """\
    states:
      train:
        run: {shell: echo one}
        next: done
      done:
        terminal: true
      train:
        run: {shell: echo two}
    """
)


def test_load_text_state_defined_twice_is_issue_at_second_state_key() -> None:
    doc = _doc(STATE_TWICE)
    (issue,) = doc.issues
    assert issue.path == "$.states.train"
    assert issue.state == "train"
    assert issue.message == "duplicate key 'train': already defined at line 2"
    assert (issue.line, issue.column) == (7, 3)
    assert doc.data["states"]["train"] == {"run": {"shell": "echo two"}}


def test_load_text_duplicate_keys_at_several_levels_are_all_reported() -> None:
    text = textwrap.dedent(
        """\
        states:
          a:
            run:
              argv: [x]
              argv: [y]
            outputs:
              - uri: s3://b/1
                uri: s3://b/2
          a: {}
        kind: Workflow
        kind: Workflow
        """
    )
    found = [(i.path, i.line, i.column) for i in _doc(text).issues]
    assert found == [
        ("$.states.a.run.argv", 5, 7),
        ("$.states.a.outputs[0].uri", 8, 9),
        ("$.states.a", 9, 3),
        ("$.kind", 11, 1),
    ]


def test_load_text_duplicate_in_anchored_mapping_is_reported_once() -> None:
    text = "base: &b\n  cpus: 1\n  cpus: 2\none: *b\ntwo: *b\n"
    (issue,) = _doc(text).issues
    assert (issue.path, issue.line) == ("$.base.cpus", 3)


def test_load_text_merge_override_is_not_a_duplicate() -> None:
    assert _doc(MERGE).issues == ()


def test_load_text_equal_keys_of_other_spellings_are_duplicates() -> None:
    # 1 and 0x1 construct the same key: the mapping would keep only one
    (issue,) = _doc("1: a\n0x1: b\n").issues
    assert issue.message == "duplicate key 1: already defined at line 1"


@given(strategies.duplicate_key_documents())
def test_load_text_one_duplicated_key_is_the_only_issue_at_its_second_line(
    case: tuple[str, tuple[str, ...], int, int, int],
) -> None:
    text, path, first, second, column = case
    doc = _doc(text)
    (issue,) = doc.issues
    assert issue.path == json_path(path)
    assert (issue.line, issue.column) == (second, column)
    assert issue.message == f"duplicate key {path[-1]!r}: already defined at line {first}"
    value = doc.data
    for part in path:
        value = value[part]
    assert value == "repeated"  # YAML keeps the last definition


def test_load_text_duplicate_key_position_matches_kept_value() -> None:
    # Product bug: the value keeps the *last* duplicate but its position is the
    # *first* one, so errors about the value point at a line holding another value.
    doc = _doc(DUPLICATE)
    assert doc.source_map.values[("states", "a", "next")] == _where(
        DUPLICATE, "next: second", "second"
    )


def test_load_text_non_string_keys_are_kept_and_located() -> None:
    doc = _doc("1: one\n? [a, b]\n: pair\nnull: none\n")
    assert doc.data[1] == "one"
    assert doc.data["['a', 'b']"] == "pair"
    assert doc.data[None] == "none"


# -- files ---------------------------------------------------------------------


def test_load_file_valid_spec_returns_document_labelled_by_path(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(NESTED, encoding="utf-8")
    doc = load_file(path)
    assert isinstance(doc, LoadedDocument)
    assert doc.label == str(path)
    assert doc.data["states"]["first"]["next"] == "second"


def test_load_file_missing_file_returns_not_found_issue(tmp_path: Path) -> None:
    issue = _issue(load_file(tmp_path / "absent.yaml"))
    assert issue.message.startswith("spec file not found")
    assert issue.line == 0


def test_load_file_directory_returns_issue(tmp_path: Path) -> None:
    issue = _issue(load_file(tmp_path))
    assert issue.message == f"{tmp_path} is a directory, not a regular file"


def test_load_file_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    # refused by stat before open, so no writer is needed and nothing blocks
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    issue = _issue(load_file(path))
    assert issue.message == f"{path} is a FIFO (named pipe), not a regular file"
    assert issue.hint


def test_load_file_symlink_to_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    link = tmp_path / "spec.yaml"
    link.symlink_to(tmp_path / "pipe")
    assert _issue(load_file(link)).message == f"{link} is a FIFO (named pipe), not a regular file"


def test_load_file_symlink_to_spec_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.yaml").write_text(NESTED, encoding="utf-8")
    link = tmp_path / "spec.yaml"
    link.symlink_to(tmp_path / "real.yaml")
    doc = load_file(link)
    assert isinstance(doc, LoadedDocument)
    assert doc.label == str(link)


def test_load_file_dev_zero_is_refused_as_device() -> None:
    issue = _issue(load_file(Path("/dev/zero")))
    assert issue.message == "/dev/zero is a character device, not a regular file"


def test_load_file_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        assert _issue(load_file(path)).message == f"{path} is a socket, not a regular file"
    finally:
        server.close()


def test_load_file_over_injected_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(NESTED, encoding="utf-8")
    issue = _issue(load_file(path, limits=Limits(max_bytes=64)))
    assert issue.message == f"file is {len(NESTED)} bytes; the limit is 64 bytes"


@pytest.mark.parametrize(
    "payload",
    [b"\x00\x01\x02\x03", b"PK\x03\x04\x00\x00zipfile", b"apiVersion: x\n\x00\x00"],
    ids=["raw-bytes", "zip-header", "yaml-then-nul"],
)
def test_load_file_binary_bytes_returns_binary_issue(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(payload)
    issue = _issue(load_file(path))
    assert issue.message == "file is binary, not YAML"


def test_load_file_non_utf8_returns_issue_naming_byte(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    issue = _issue(load_file(path))
    assert issue.message == "file is not valid UTF-8 (byte 9)"


def test_load_file_utf8_with_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes("\ufeffname: café\n".encode())
    doc = load_file(path)
    assert isinstance(doc, LoadedDocument)
    assert doc.data == {"name": "café"}


def test_load_file_empty_file_returns_document_without_data(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"")
    doc = load_file(path)
    assert isinstance(doc, LoadedDocument)
    assert doc.data is None
    assert doc.lines == []


def test_load_file_over_max_bytes_is_refused_without_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(source.MAX_BYTES + 1)
    issue = _issue(load_file(path))
    assert issue.message == (
        f"file is {source.MAX_BYTES + 1} bytes; the limit is {source.MAX_BYTES} bytes"
    )


def test_load_file_at_max_bytes_is_read(tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    with path.open("wb") as handle:
        handle.truncate(source.MAX_BYTES)
    issue = _issue(load_file(path))
    # read (and found to be NUL bytes), not refused for its size
    assert issue.message == "file is binary, not YAML"


# -- memory: nothing of a document outlives its load (issue 19) ------------------

SCALARS = textwrap.dedent(
    """\
    plain: word
    quoted: "two words"
    tagged: !!str 12
    block: |
      line one
      line two
    number: 7
    real: 1.5
    flag: true
    empty: null
    when: 2024-01-02
    anchored: &a shared
    again: *a
    base: &b {cpus: 2, note: x}
    merged:
      <<: *b
      cpus: 4
    """
)


@pytest.fixture
def collection_paused() -> Iterator[None]:
    """Automatic collection off, so only reference counting frees objects in the test."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def _composed_nodes(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[yaml.Node]]:
    """Weak references to every node ``load_text`` composes, filled as it loads."""
    refs: list[weakref.ref[yaml.Node]] = []
    real = composer.compose

    def walk(node: yaml.Node) -> None:
        refs.append(weakref.ref(node))
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(key)
                walk(value)

    def compose(text: str, *, max_nodes: int, max_depth: int) -> yaml.Node | None:
        node: yaml.Node | None = real(text, max_nodes=max_nodes, max_depth=max_depth)
        if node is not None:
            walk(node)
        return node

    monkeypatch.setattr(composer, "compose", compose)
    return refs


def test_load_text_scalars_equal_safe_load() -> None:
    assert _doc(SCALARS).data == yaml.safe_load(SCALARS)


@given(strategies.random_spec_texts())
def test_load_text_data_equals_safe_load_on_spec_texts(text: str) -> None:
    doc = load_text(text, "t.yaml")
    if isinstance(doc, LoadedDocument):
        assert doc.data == yaml.safe_load(text)


def test_load_text_returned_document_holds_no_composed_node(
    monkeypatch: pytest.MonkeyPatch, collection_paused: None
) -> None:
    # a constructor shared by every load kept each document's scalar nodes (and
    # their marks) alive for good: 36 objects per state on every load of a chain
    refs = _composed_nodes(monkeypatch)
    doc = _doc(SCALARS)
    assert len(refs) > 30
    assert [ref for ref in refs if ref() is not None] == []
    assert doc.data["merged"] == {"cpus": 4, "note": "x"}


def test_load_text_repeated_loads_keep_no_node_of_earlier_loads(
    monkeypatch: pytest.MonkeyPatch, collection_paused: None
) -> None:
    refs = _composed_nodes(monkeypatch)
    for _ in range(3):
        _doc(SCALARS)
    assert len(refs) > 90
    assert sum(ref() is not None for ref in refs) == 0
