"""Token substitution (dsl.md §2): scopes, syntax, literals and errors."""

from __future__ import annotations

import base64
import dataclasses
import gc
import weakref
from typing import Any

import pytest

from npa_infra.spec import tokens
from npa_infra.spec.tokens import TokenContext, TokenError, find_tokens, resolve

BASE = TokenContext(
    config={"bucket": "b1", "note": "a b/c=d", "flag": True, "off": False, "n": 3},
    run={"id": "run-7", "prefix": "wf/run-7", "owner": "qa"},
    state_outputs={
        "stage": {"uri": "s3://x/one", "output_1": "s3://x/one", "output_2": "s3://x/two"}
    },
    loop_iterations={"outer": 2, "outer-loop": 3},
)


def ctx(**overrides: Any) -> TokenContext:
    return dataclasses.replace(BASE, **overrides)


# -- scopes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{config.bucket}}", "b1"),
        ("s3://{{config.bucket}}/data", "s3://b1/data"),
        ("{{run.id}}", "run-7"),
        ("{{run.prefix}}", "wf/run-7"),
        ("{{run.owner}}", "qa"),
        ("{{state.stage.uri}}", "s3://x/one"),
        ("{{state.stage.output_1}}", "s3://x/one"),
        ("{{state.stage.output_2}}", "s3://x/two"),
        ("{{loop.outer}}", "2"),
        ("{{loop.outer-loop}}", "3"),
        ("{{config.bucket}}/{{run.id}}/{{loop.outer}}", "b1/run-7/2"),
    ],
    ids=[
        "config",
        "config-embedded",
        "run-id",
        "run-prefix",
        "run-key",
        "state-uri",
        "state-output-1",
        "state-output-2",
        "loop",
        "loop-name-with-dash",
        "several-scopes",
    ],
)
def test_resolve_scope_token_substitutes_value(text: str, expected: str) -> None:
    assert resolve(text, ctx()) == expected


@pytest.mark.parametrize(
    "text",
    [
        "{{ config.bucket }}",
        "{{config.bucket }}",
        "{{  config.bucket}}",
        "{{\tconfig.bucket\t}}",
    ],
    ids=["both-sides", "trailing", "leading-double", "tabs"],
)
def test_resolve_spaces_inside_braces_are_allowed(text: str) -> None:
    assert resolve(text, ctx()) == "b1"


@pytest.mark.parametrize(
    "text",
    ["{{config.note|base64}}", "{{ config.note | base64 }}", "{{config.note |base64}}"],
    ids=["tight", "spaced", "space-before-pipe"],
)
def test_resolve_base64_transform_encodes_utf8_value(text: str) -> None:
    assert resolve(text, ctx()) == base64.b64encode(b"a b/c=d").decode("ascii")


def test_resolve_base64_of_non_ascii_value_encodes_utf8_bytes() -> None:
    out = resolve("{{config.word|base64}}", ctx(config={"word": "café"}))
    assert base64.b64decode(out).decode("utf-8") == "café"


def test_resolve_base64_of_surrogate_escaped_var_never_raises_other_errors() -> None:
    # A --var value taken from a non-UTF-8 command line holds surrogate escapes
    # (Python decodes argv with surrogateescape). Product bug: UnicodeEncodeError.
    try:
        out = resolve("{{config.note|base64}}", ctx(config={"note": "\udcff"}))
    except TokenError:
        return
    assert base64.b64decode(out) == b"\xff"


@pytest.mark.parametrize(
    ("transform", "text"),
    [
        ("upper", "{{config.bucket|upper}}"),
        ("b64", "{{ config.bucket | b64 }}"),
        ("", "{{config.bucket|}}"),
    ],
    ids=["upper", "b64", "empty"],
)
def test_resolve_unknown_transform_raises_token_error(transform: str, text: str) -> None:
    with pytest.raises(TokenError) as err:
        resolve(text, ctx())
    assert f"unknown transform '{transform}'" in err.value.message
    assert err.value.scope == "config"


# -- literals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{{params.x}}",
        "{{inputs.x}}",
        '{{"k":v}}',
        '{{"k": 1}}',
        "{{ params.x | upper }}",
        "{{}}",
        "{{ }}",
        "{{config bucket}}",
        "{ {config.bucket} }",
        "{config.bucket}",
        "${config.bucket}",
        "{{outputs.0}}",
        "{{configuration.bucket}}",
        "{{Config.bucket}}",
    ],
    ids=[
        "params",
        "inputs",
        "python-dict",
        "python-dict-spaced",
        "other-scope-with-transform",
        "empty-braces",
        "blank-braces",
        "space-in-name",
        "split-braces",
        "single-braces",
        "shell-style",
        "outputs",
        "scope-prefix-lookalike",
        "scope-case",
    ],
)
def test_resolve_non_token_double_braces_survive_verbatim(text: str) -> None:
    assert resolve(text, ctx()) == text


def test_resolve_literal_and_token_side_by_side_only_token_changes() -> None:
    text = "printf '%s' '{{params.x}}' '{{\"k\": 1}}' '{{ run.id }}'"
    assert resolve(text, ctx()) == "printf '%s' '{{params.x}}' '{{\"k\": 1}}' 'run-7'"


def test_resolve_text_without_braces_is_returned_unchanged() -> None:
    text = "plain text with } and { and |base64"
    assert resolve(text, ctx()) is text


def test_resolve_is_single_pass_value_tokens_are_not_reexpanded() -> None:
    out = resolve("{{config.a}}", ctx(config={"a": "{{config.b}}", "b": "x"}))
    assert out == "{{config.b}}"


# -- stringification ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, "True"), (False, "False"), (3, "3"), (0.5, "0.5"), (None, "None"), ("", "")],
    ids=["true", "false", "int", "float", "null", "empty-string"],
)
def test_resolve_non_string_value_is_stringified_like_python(value: object, expected: str) -> None:
    assert resolve("{{config.v}}", ctx(config={"v": value})) == expected


def test_stringify_keeps_strings_identical() -> None:
    assert tokens.stringify("x") == "x"
    assert tokens.stringify(True) == "True"


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scope", "fragment"),
    [
        ("{{config.missing}}", "config", "config has no key 'missing'"),
        ("{{run.missing}}", "run", "run has no key 'missing'"),
        ("{{loop.inner}}", "loop", "no loop named 'inner' is active"),
        ("{{state.later.uri}}", "state", "state 'later' has not run before this point"),
        ("{{state.stage.output_3}}", "state", "state 'stage' has no output_3"),
        ("{{state.stage.path}}", "state", "expected state.NAME.uri or state.NAME.output_N"),
        ("{{state.stage}}", "state", "expected state.NAME.uri or state.NAME.output_N"),
        ("{{state.stage.output_0}}", "state", "expected state.NAME.uri or state.NAME.output_N"),
        ("{{config.}}", "config", "names no key"),
        ("{{config}}", "config", "names no key"),
    ],
    ids=[
        "config-missing",
        "run-missing",
        "loop-inactive",
        "state-not-run",
        "state-output-out-of-range",
        "state-bad-field",
        "state-no-field",
        "state-output-zero",
        "config-trailing-dot",
        "bare-scope",
    ],
)
def test_resolve_unresolvable_token_raises_token_error(
    text: str, scope: str, fragment: str
) -> None:
    with pytest.raises(TokenError) as err:
        resolve(text, ctx())
    assert err.value.scope == scope
    assert fragment in err.value.message
    assert err.value.token == text


def test_resolve_state_token_disallowed_context_raises() -> None:
    with pytest.raises(TokenError) as err:
        resolve("{{state.stage.uri}}", ctx(allow_state=False))
    assert "not allowed" in err.value.message


def test_resolve_loop_token_disallowed_context_raises() -> None:
    with pytest.raises(TokenError) as err:
        resolve("{{loop.outer}}", ctx(allow_loop=False))
    assert "not allowed" in err.value.message


def test_resolve_first_bad_token_stops_resolution() -> None:
    with pytest.raises(TokenError) as err:
        resolve("{{config.bucket}} {{config.a1}} {{config.a2}}", ctx())
    assert err.value.token == "{{config.a1}}"


def test_token_error_is_not_a_builtin_lookup_error() -> None:
    assert not issubclass(TokenError, (KeyError, LookupError, ValueError))


# -- find_tokens ------------------------------------------------------------------------------


def test_find_tokens_lists_only_substituted_scopes_in_order() -> None:
    text = '{{params.x}} {{ config.a }} {{run.id|base64}} {{loop.o}} {{state.s.uri}} {{"k":1}}'
    assert find_tokens(text) == [
        ("{{ config.a }}", "config", "a"),
        ("{{run.id|base64}}", "run", "id"),
        ("{{loop.o}}", "loop", "o"),
        ("{{state.s.uri}}", "state", "s.uri"),
    ]


def test_find_tokens_plain_text_returns_empty() -> None:
    assert find_tokens("no tokens {{params.x}} here") == []


# -- problems: every bad token, kept without a reference cycle (issue 19) -----------


def test_problems_each_bad_token_once_in_order_with_offsets() -> None:
    text = "{{config.nope}} and {{run.none}} and {{config.bucket}}"
    found = tokens.problems(text, BASE)
    assert [(e.token, e.offset) for e in found] == [
        ("{{config.nope}}", 0),
        ("{{run.none}}", text.index("{{run.none}}")),
    ]


def test_problems_errors_are_freed_without_a_collection() -> None:
    # a kept traceback holds the frame of problems(), whose list holds the error: a
    # cycle only the collector frees, and load_validated pauses it
    enabled = gc.isenabled()
    gc.disable()
    try:
        found = tokens.problems("{{config.nope}} {{loop.none}}", BASE)
        refs = [weakref.ref(e) for e in found]
        tracebacks = [e.__traceback__ for e in found]
        del found
        alive = [ref for ref in refs if ref() is not None]
    finally:
        if enabled:
            gc.enable()
    assert len(refs) == 2
    assert tracebacks == [None, None]
    assert alive == []
