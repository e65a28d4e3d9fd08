"""Each rule sentence of ``docs/spec-format.md`` is true of the code (issue 18).

A case quotes the sentence (it must still be on the page, whitespace aside) and
validates a small spec that shows the documented behaviour: an error or a
warning, at the line a person would fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.spec.issues import SpecIssue
from npa_infra.workflow.planning.loading import load_validated

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec-format.md"
PAGE = re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8"))
HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\nconfig: {bucket: b}\n"
ONE_STATE = "states:\n  a:\n    run: {shell: echo a}\n    terminal: true\n"


def _on_page(sentence: str) -> None:
    assert re.sub(r"\s+", " ", sentence) in PAGE, f"no longer on the page: {sentence!r}"


def _errors(text: str, variables: dict[str, str] | None = None) -> list[SpecIssue]:
    with pytest.raises(SpecError) as err:
        load_validated("t.yaml", BUILTIN, variables, text=text)
    return err.value.issues


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_rule_parallel_members_one_output_uri_each_is_error() -> None:
    _on_page("Two members must not write the same output URI.")
    text = HEAD + (
        "states:\n  g:\n    parallel: [m0, m1]\n    next: end\n"
        "  m0:\n    run: {shell: echo 0}\n    outputs: [{uri: 's3://b/same'}]\n"
        "  m1:\n    run: {shell: echo 1}\n    outputs: [{uri: 's3://b/same'}]  # second\n"
        "  end:\n    run: {shell: echo e}\n    terminal: true\n"
    )

    found = [i for i in _errors(text) if "also written by 'm0'" in i.message]

    assert [(i.path, i.line) for i in found] == [
        ("$.states.m1.outputs[0].uri", _line_of(text, "# second"))
    ]


@pytest.mark.parametrize(
    ("shell", "part", "at"),
    [
        ("echo {{config.bucket x", "unclosed '{{'", "{{config.bucket x"),
        ("echo {{config.bucket|gzip}}", "unknown transform 'gzip'", "{{config.bucket|gzip}}"),
        ("echo config.bucket}} x", "stray '}}'", "}} x"),
    ],
    ids=["unclosed", "unknown-transform", "stray-close"],
)
def test_rule_malformed_token_is_error_at_token(shell: str, part: str, at: str) -> None:
    _on_page(
        "malformed token (an unclosed `{{`, an unknown transform, a `}}` without its `{{`) is "
        "an error at the token's own line and column"
    )
    text = HEAD + f"states:\n  a:\n    run: {{shell: '{shell}'}}\n    terminal: true\n"

    found = [i for i in _errors(text) if part in i.message]

    assert len(found) == 1
    line = text.splitlines()[found[0].line - 1]
    assert line[found[0].column - 1 :].startswith(at)


def test_rule_every_bad_token_of_a_field_is_its_own_error() -> None:
    _on_page("every bad token of a field is its own error")
    text = HEAD + "states:\n  a:\n    run: {shell: 'echo {{config.qa}} {{config.qb}}'}\n"
    text += "    terminal: true\n"

    found = [i.message for i in _errors(text) if "config has no key" in i.message]

    assert len(found) == 2


def test_rule_misspelled_state_token_gets_closest_state() -> None:
    _on_page("with the closest state name when NAME is misspelled")
    text = HEAD + (
        "states:\n  train:\n    run: {shell: echo a}\n    outputs: [{uri: s3://b/m}]\n"
        "    next: b\n  b:\n    run: {shell: 'echo {{state.trian.uri}}'}\n    terminal: true\n"
    )

    found = [i for i in _errors(text) if "no state named 'trian'" in i.message]

    assert len(found) == 1 and "did you mean 'train'?" in found[0].hint
    assert found[0].line == _line_of(text, "state.trian")


def test_rule_resource_words_are_errors_at_their_lines() -> None:
    _on_page("`cpus: two` or `memory: lots` is an error at its line")
    text = HEAD + (
        "resources:\n  default:\n    cloud: kubernetes\n    cpus: two\n    memory: lots\n"
        + ONE_STATE
    )

    found = {i.path: i.line for i in _errors(text)}

    assert found["$.resources.default.cpus"] == _line_of(text, "cpus: two")
    assert found["$.resources.default.memory"] == _line_of(text, "memory: lots")


def test_rule_unknown_profile_key_ignored_with_warning() -> None:
    _on_page("Unknown profile keys are ignored with a warning.")
    text = HEAD + "resources:\n  default:\n    cloud: kubernetes\n    cpuz: 2\n" + ONE_STATE

    v = load_validated("t.yaml", BUILTIN, text=text)

    assert [(w.path, w.line) for w in v.warnings] == [
        ("$.resources.default.cpuz", _line_of(text, "cpuz"))
    ]
    assert "did you mean 'cpus'?" in v.warnings[0].hint


def test_rule_unknown_state_key_ignored_with_warning_and_suggestion() -> None:
    _on_page("A key that is not in this table is ignored with a warning that names it")
    text = HEAD + "states:\n  a:\n    run: {shell: echo a}\n    nxt: b\n    terminal: true\n"

    v = load_validated("t.yaml", BUILTIN, text=text)

    assert [w.path for w in v.warnings] == ["$.states.a.nxt"]
    assert "nxt" in v.warnings[0].message and "did you mean" in v.warnings[0].hint


def test_rule_unread_var_warns_with_suggestion_and_strict_errors() -> None:
    _on_page(
        "A `--var` key the spec never reads (no `{{config.KEY}}` or `config.KEY` anywhere, not "
        "a key of its `config`, of a tool it uses, or one npa itself reads such as `bucket`) is "
        "a warning that names the closest key the spec does read"
    )
    _on_page("with `--strict` it is an error.")
    text = HEAD + ONE_STATE

    v = load_validated("t.yaml", BUILTIN, {"buckt": "x", "bucket": "y"}, text=text)
    assert [w.path for w in v.warnings] == ["--var buckt"]
    assert "did you mean 'bucket'?" in v.warnings[0].hint

    with pytest.raises(SpecError) as err:
        load_validated("t.yaml", BUILTIN, {"buckt": "x"}, text=text, strict=True)
    assert [i.path for i in err.value.issues] == ["--var buckt"]
