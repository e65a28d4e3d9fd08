"""Properties of validation, planning, waves and tokens (style.md rule 19).

(a) Validation is total: any text either fails with a ``SpecError`` whose
    issues are all located under ``$``, or validates and then plans and
    groups into waves without any exception.
(b) Planning is deterministic: the same spec gives the same fingerprint.
(c) Waves keep the plan's step order and hold every step exactly once.
(d) The token resolver raises nothing but ``TokenError``.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.plan import planner, waves
from npa_infra.spec import tokens
from npa_infra.spec.issues import SpecIssue
from npa_infra.workflow.planning.fingerprint import plan_fingerprint
from npa_infra.workflow.planning.loading import ValidatedSpec, load_validated
from tests.strategies import (
    SEED_SPECS,
    mutated_spec_bytes,
    mutated_spec_texts,
    random_spec_texts,
    token_contexts,
    token_texts,
    valid_spec_texts,
)

ASSUMPTIONS = ("", "loop_back", "promote_checkpoint")


def _assert_located(issue: SpecIssue, *, file_level_ok: bool = False) -> None:
    if file_level_ok and issue.path == "":
        # load_file's file-level issues (binary, not UTF-8, too large) carry no path
        assert issue.line == 0
    else:
        assert issue.path.startswith("$"), issue
    assert issue.line >= 0
    assert issue.column >= 0
    assert issue.message


def _validate_then_plan(validate: Any, *, file_level_ok: bool = False) -> ValidatedSpec | None:
    try:
        validated: ValidatedSpec = validate()
    except SpecError as err:
        assert err.issues
        for issue in err.issues:
            _assert_located(issue, file_level_ok=file_level_ok)
        return None
    for assume in ASSUMPTIONS:
        plan = planner.build_plan(validated.spec, BUILTIN, run_id="prop", assume_decision=assume)
        assert [s for w in waves.compute(plan) for s in w.steps] == list(plan.steps)
    return validated


# -- (a) validation is total ---------------------------------------------------------------


@given(text=mutated_spec_texts())
@example(text=SEED_SPECS[0][1])
@example(text="states: [a]\n")
@example(text="apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nstates: {a: {next: a}}\n")
def test_load_validated_mutated_spec_fails_located_or_plans(text: str) -> None:
    _validate_then_plan(lambda: load_validated("m.yaml", BUILTIN, text=text))


@given(text=random_spec_texts())
def test_load_validated_random_spec_fails_located_or_plans(text: str) -> None:
    _validate_then_plan(lambda: load_validated("r.yaml", BUILTIN, text=text))


@given(raw=mutated_spec_bytes())
@example(raw=b"\xff\xfe\x00\x01")
@example(raw=b"apiVersion: npa.workflow/v0.0.1\nkind: \xe9\n")
def test_load_validated_spec_file_with_random_bytes_fails_located_or_plans(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.yaml"
        path.write_bytes(raw)
        _validate_then_plan(lambda: load_validated(path, BUILTIN), file_level_ok=True)


@given(text=mutated_spec_texts(), bucket=st.text(min_size=1, max_size=12))
def test_load_validated_with_vars_fails_located_or_plans(text: str, bucket: str) -> None:
    _validate_then_plan(
        lambda: load_validated("v.yaml", BUILTIN, {"bucket": bucket, "shard_count": "2"}, text=text)
    )


@given(text=valid_spec_texts())
def test_load_validated_generated_valid_spec_validates_and_plans(text: str) -> None:
    validated = _validate_then_plan(lambda: load_validated("g.yaml", BUILTIN, text=text))
    assert validated is not None, "the generator only builds valid specs"
    plan = planner.build_plan(validated.spec, BUILTIN, run_id="prop")
    assert plan.steps[-1].state == "end"
    assert all(s.argv or s.shell for s in plan.steps)
    assert not any(tokens.find_tokens(" ".join((*s.argv, s.shell))) for s in plan.steps)


# -- (b) determinism ---------------------------------------------------------------------------


@given(text=valid_spec_texts(), assume=st.sampled_from(ASSUMPTIONS))
def test_build_plan_same_spec_same_fingerprint(text: str, assume: str) -> None:
    first = load_validated("g.yaml", BUILTIN, text=text).spec
    second = load_validated("g.yaml", BUILTIN, text=text).spec
    one = planner.build_plan(first, BUILTIN, run_id="det", assume_decision=assume)
    two = planner.build_plan(second, BUILTIN, run_id="det", assume_decision=assume)
    again = planner.build_plan(first, BUILTIN, run_id="det", assume_decision=assume)
    assert plan_fingerprint(one) == plan_fingerprint(two) == plan_fingerprint(again)
    assert plan_fingerprint(one).startswith("sha256:")


@given(text=valid_spec_texts())
def test_build_plan_different_run_id_changes_fingerprint(text: str) -> None:
    spec = load_validated("g.yaml", BUILTIN, text=text).spec
    one = planner.build_plan(spec, BUILTIN, run_id="run-a")
    two = planner.build_plan(spec, BUILTIN, run_id="run-b")
    assert plan_fingerprint(one) != plan_fingerprint(two)


# -- (c) waves ----------------------------------------------------------------------------------


@given(
    text=valid_spec_texts(),
    assume=st.sampled_from(ASSUMPTIONS),
    cap=st.integers(min_value=0, max_value=6),
)
def test_compute_waves_preserve_order_and_cover_each_step_once(
    text: str, assume: str, cap: int
) -> None:
    spec = load_validated("g.yaml", BUILTIN, text=text).spec
    plan = planner.build_plan(spec, BUILTIN, run_id="w", assume_decision=assume)
    result = waves.compute(plan, max_concurrency_cap=cap)
    flat = [s for w in result for s in w.steps]
    assert flat == list(plan.steps)
    assert [id(s) for s in flat] == [id(s) for s in plan.steps]
    assert [w.index for w in result] == list(range(len(result)))
    for wave in result:
        if wave.kind == "serial":
            assert len(wave.steps) == 1
            assert wave.steps[0].group == ""
            continue
        assert {s.group for s in wave.steps} == {wave.group}
        assert len({s.state for s in wave.steps}) == len(wave.steps)
        effective = min(wave.max_concurrency, cap) if cap > 0 else wave.max_concurrency
        assert wave.batches == math.ceil(len(wave.steps) / effective)
        assert 1 <= wave.max_concurrency <= len(spec.states[wave.group].parallel)


# -- (d) tokens ----------------------------------------------------------------------------------


@given(text=token_texts, context=token_contexts())
@example(text="{{config.a|base64}}", context={"config": {"a": "é"}, "run": {}})
@example(
    text="{{state.a.b.uri}}",
    context={"config": {}, "run": {}, "state_outputs": {"a.b": {"uri": "u"}}},
)
@example(text="{{config.a.b}}", context={"config": {"a": "not-a-mapping"}, "run": {}})
def test_resolve_arbitrary_text_raises_only_token_error(text: str, context: dict[str, Any]) -> None:
    ctx = tokens.TokenContext(**context)
    try:
        out = tokens.resolve(text, ctx)
    except tokens.TokenError as err:
        assert err.scope in ("config", "run", "state", "loop")
        assert err.token in text
        return
    assert isinstance(out, str)
    if "{{" not in text:
        assert out == text
