"""A bad token is located at its own column, in every scalar style (issue 18)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.spec import scalarpos
from npa_infra.spec.source import LoadedDocument, Position, load_text
from npa_infra.workflow.planning.loading import load_validated

HEAD = (
    "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
    "config: {bucket: b}\nstates:\n  a:\n    run:\n"
)
TAIL = "    terminal: true\n"

# (shell field as written, the text the caret must point at, message part)
STYLE_CASES = [
    ("      shell: echo {{config.qa}}\n", "{{config.qa}}", "'qa'"),
    ("      shell: 'echo ''q'' {{config.qa}}'\n", "{{config.qa}}", "'qa'"),
    ('      shell: "echo \\"q\\" \\x41 {{config.qa}}"\n', "{{config.qa}}", "'qa'"),
    ("      shell: |\n        echo one\n        echo {{config.qa}}\n", "{{config.qa}}", "'qa'"),
    ("      shell: >-\n        echo one\n        echo {{config.qa}}\n", "{{config.qa}}", "'qa'"),
    ("      shell: echo one\n        two {{config.qa}}\n", "{{config.qa}}", "'qa'"),
    ('      shell: "echo one\n        two {{config.qa}}"\n', "{{config.qa}}", "'qa'"),
    ("      shell: echo {{config.bucket x\n", "{{config.bucket", "unclosed"),
    ("      shell: echo config.bucket}} x\n", "}} x", "stray"),
    ("      shell: echo {{config.bucket|gzip}}\n", "{{config.bucket|", "unknown transform"),
]


def _errors(text: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecError) as err:
        load_validated("t.yaml", BUILTIN, text=text)
    return [(i.line, i.column, i.message) for i in err.value.issues]


@pytest.mark.parametrize(
    ("field", "target", "part"),
    STYLE_CASES,
    ids=[
        "plain",
        "single-quoted",
        "double-quoted-escapes",
        "literal-block",
        "folded-block",
        "plain-multiline",
        "double-quoted-multiline",
        "unclosed",
        "stray",
        "transform",
    ],
)
def test_load_validated_bad_token_located_at_its_column(field: str, target: str, part: str) -> None:
    text = HEAD + field + TAIL
    lines = text.splitlines()

    found = [(line, col) for line, col, message in _errors(text) if part in message]

    assert len(found) == 1
    line, col = found[0]
    assert lines[line - 1][col - 1 :].startswith(target), (line, col, lines[line - 1])


def test_load_validated_two_bad_tokens_each_at_its_own_column() -> None:
    text = HEAD + "      shell: echo {{config.qa}} x {{config.qb}}\n" + TAIL

    found = sorted((line, col) for line, col, m in _errors(text) if "config has no key" in m)

    assert found == [(8, 19), (8, 35)]


def test_load_validated_anchored_value_falls_back_to_value_start() -> None:
    text = HEAD + "      shell: &sh echo {{config.qa}}\n" + TAIL

    found = [(line, col) for line, col, m in _errors(text) if "'qa'" in m]

    assert found == [(8, 14)]  # the value's start: the anchor is not the value's text


def test_locate_text_not_from_this_source_is_none() -> None:
    lines = ["shell: echo hello"]
    # a catalog's argv template is checked under the toolRef's path: it is not this text
    assert scalarpos.locate(lines, Position(1, 8), "python {{config.x}}", 7) is None


def test_locate_offset_on_whitespace_moves_to_next_character() -> None:
    lines = ["shell: echo   {{x}}"]
    assert scalarpos.locate(lines, Position(1, 8), "echo   {{x}}", 4) == Position(1, 15)


def test_locate_out_of_range_start_is_none() -> None:
    assert scalarpos.locate(["a: b"], Position(3, 1), "b", 0) is None
    assert scalarpos.locate(["a: b"], Position(1, 4), "b", 5) is None


_STYLES = (None, '"', "'", "|", ">")
_VALUE_TEXT = st.text(alphabet=st.sampled_from("ab {}'\"\\\t\n#:-x\u00e9"), min_size=1, max_size=40)


@given(_VALUE_TEXT, st.sampled_from(_STYLES), st.integers(0, 39), st.integers(5, 30))
def test_locate_any_style_points_at_the_same_character_or_none(
    value: str, style: str | None, offset: int, width: int
) -> None:
    text = yaml.safe_dump({"k": {"v": value}}, default_style=style, width=width)
    doc = load_text(text, "t.yaml")
    assert isinstance(doc, LoadedDocument)
    start = doc.source_map.values[("k", "v")]
    offset = min(offset, len(value) - 1)

    found = scalarpos.locate(doc.lines, start, value, offset)

    if found is None:
        return
    wanted = next((ch for ch in value[offset:] if not ch.isspace()), None)
    source = doc.lines[found.line - 1][found.column - 1 :]
    # a plain character is itself in the source; an escaped one starts its escape
    assert source.startswith(wanted or "") or source.startswith(("\\", "''"))


@given(
    st.text(alphabet=st.sampled_from("abcxyz {}."), min_size=1, max_size=40),
    st.sampled_from(('"', "'", "|", ">", None)),
)
def test_locate_simple_text_always_found(value: str, style: str | None) -> None:
    value = value.strip() or "a"
    text = yaml.safe_dump({"k": {"v": value}}, default_style=style, width=1000)
    doc = load_text(text, "t.yaml")
    assert isinstance(doc, LoadedDocument)
    start = doc.source_map.values[("k", "v")]

    found = scalarpos.locate(doc.lines, start, value, len(value) - 1)

    assert found is not None
    assert doc.lines[found.line - 1][found.column - 1] == value[-1]
