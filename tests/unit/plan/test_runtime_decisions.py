"""Runtime planning on real decisions (dsl.md §3, §5.4 "Decisions").

``build_plan(decisions=...)`` consults the given decisions at each decision
point and stops at the first unknown one, so a supervisor can plan, launch
the prefix, read the artifact, add the decision and plan again. Examples pin
each kind of decision point on small specs and the shipped samples; the
properties run every spec with a decision point in ``workflows/`` and, when
``NPA_SPEC_CORPUS`` and ``NPA_TOOL_CATALOG`` are set, in the corpus:

- replanning with one more decision extends the previous plan (its steps,
  waves and decisions used are a prefix of the new ones);
- feeding the assumed decision at every point ends at the one-shot plan;
- the walk ends at a terminal state, or at a located ``PlanError``.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.catalog.loader import select_catalog
from npa_infra.catalog.model import Catalog
from npa_infra.plan import decisions, planner, waves
from npa_infra.plan.model import DecisionPoint, Plan, PlanError
from npa_infra.spec import parse
from npa_infra.spec.model import Spec
from npa_infra.spec.source import LoadedDocument, load_text
from npa_infra.workflow.planning.loading import load_validated
from tests.strategies import valid_spec_texts

REPO = Path(__file__).resolve().parents[3]
TESTING = REPO / "workflows" / "testing"
MAIN = REPO / "workflows" / "main"
CHOICES = ("promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop")
# Bounds a walk that keeps asking; the planner's own step limit ends it first.
MAX_REPLANS = 200

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata:
  name: t
config:
  root_uri: s3://b/r
  decision_uri: s3://b/r/decision.json
"""


def spec_of(body: str) -> Spec:
    text = HEADER + "states:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    return load_validated("t.yaml", BUILTIN, text=text).spec


def parsed_of(body: str) -> Spec:
    """A parsed but unvalidated spec, to reach planner guards directly."""
    text = HEADER + "states:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    doc = load_text(text, "t.yaml")
    assert isinstance(doc, LoadedDocument)
    result = parse.parse_document(doc)
    assert result.spec is not None, result.collector.issues
    return result.spec


def sample(path: Path) -> Spec:
    return load_validated(path, BUILTIN).spec


def runtime(
    spec: Spec,
    known: dict[str, str],
    catalog: Catalog = BUILTIN,
    assume: str = "",
) -> Plan:
    return planner.build_plan(spec, catalog, run_id="r1", assume_decision=assume, decisions=known)


def trace(plan: Plan) -> list[tuple[str, int | None]]:
    return [(s.state, s.iteration) for s in plan.steps]


def _has_points(spec: Spec) -> bool:
    return spec.has_transitions or any(s.writes_decision for s in spec.states.values())


def _cases() -> list[tuple[str, Path, str]]:
    """(id, path, catalog kind) for every spec with a possible decision point."""
    cases = [
        (f"workflows-{p.stem}", p, "builtin")
        for p in (*sorted(TESTING.glob("*.yaml")), *sorted(MAIN.glob("*.yaml")))
        if p.stem != "raw-skypilot"
    ]
    root = os.environ.get("NPA_SPEC_CORPUS", "")
    if root and os.environ.get("NPA_TOOL_CATALOG"):
        cases += [(f"corpus-{p.stem}", p, "corpus") for p in sorted(Path(root).glob("*.yaml"))]
    return cases


_SPECS: dict[Path, tuple[Spec, Catalog]] = {}


def _load(path: Path, kind: str) -> tuple[Spec, Catalog]:
    if path not in _SPECS:
        catalog = BUILTIN if kind == "builtin" else select_catalog(None, os.environ)
        _SPECS[path] = (load_validated(path, catalog).spec, catalog)
    return _SPECS[path]


CASES = _cases()
DECISION_CASES = [c for c in CASES if _has_points(_load(c[1], c[2])[0])]


# -- leaf with transitions ---------------------------------------------------------------------


def test_build_plan_runtime_leaf_with_transitions_stops_after_its_step() -> None:
    plan = runtime(sample(TESTING / "runtime-mode.yaml"), {})

    assert trace(plan) == [("prepare", None), ("grade", None), ("gate", None)]
    assert plan.pending == DecisionPoint(
        key="gate",
        state="gate",
        writer_state="gate",
        uri="s3://example-bucket/testing/runtime-mode/r1/grades/decision.json",
        step_index=2,
    )
    assert plan.decisions_used == ()


@pytest.mark.parametrize(
    ("decision", "last"),
    [("promote", "accept"), ("loop_back", "reject"), ("promote_checkpoint", "accept")],
    ids=["promote-alias", "loop-back-alias", "promote"],
)
def test_build_plan_runtime_known_leaf_decision_routes_on_it(decision: str, last: str) -> None:
    plan = runtime(sample(TESTING / "runtime-mode.yaml"), {"gate": decision})

    assert plan.pending is None
    assert trace(plan)[-1] == (last, None)
    assert plan.decisions_used == (("gate", decisions.normalize(decision)),)


def test_build_plan_runtime_unknown_decision_value_matches_no_predicate() -> None:
    spec = spec_of(
        """
        gate:
          run: {shell: echo g}
          transitions:
            - {when: promote_checkpoint, goto: accept}
            - {goto: reject}
        accept:
          run: {shell: echo y}
          terminal: true
        reject:
          run: {shell: echo n}
          terminal: true
        """
    )

    plan = runtime(spec, {"gate": "retry"})

    assert [s for s, _ in trace(plan)] == ["gate", "reject"]
    assert plan.decisions_used == (("gate", "retry"),)


def test_build_plan_runtime_leaf_uri_falls_back_to_params_decision_uri() -> None:
    spec = spec_of(
        """
        gate:
          run: {shell: echo g}
          params: {decision_uri: "s3://b/r/gate/{{run.id}}.json"}
          transitions:
            - {goto: end}
        end:
          run: {shell: echo e}
          terminal: true
        """
    )

    plan = runtime(spec, {})

    assert plan.pending is not None
    assert plan.pending.uri == "s3://b/r/gate/r1.json"


def test_build_plan_runtime_leaf_without_decision_uri_reports_an_empty_uri() -> None:
    spec = load_validated(
        "t.yaml",
        BUILTIN,
        text=HEADER.replace("  decision_uri: s3://b/r/decision.json\n", "")
        + textwrap.dedent(
            """\
            states:
              gate:
                run: {shell: echo g}
                transitions:
                  - {when: promote_checkpoint, goto: end}
                  - {goto: end}
              end:
                run: {shell: echo e}
                terminal: true
            """
        ),
    ).spec

    plan = runtime(spec, {})

    assert plan.pending == DecisionPoint("gate", "gate", "gate", "", 0)


def test_build_plan_runtime_dead_end_under_real_decision_raises_located_error() -> None:
    # validation rejects this for every outcome; parsed only, a real promote has nowhere to go
    spec = parsed_of(
        """
        gate:
          run: {shell: echo g}
          transitions:
            - {when: loop_back, goto: end}
        end:
          run: {shell: echo e}
          terminal: true
        """
    )

    with pytest.raises(PlanError) as err:
        runtime(spec, {"gate": "promote"})

    assert err.value.path == ("states", "gate", "transitions")
    assert err.value.state == "gate"
    assert "promote_checkpoint" in err.value.message


def test_build_plan_runtime_state_reached_twice_gets_an_occurrence_key() -> None:
    spec = spec_of(
        """
        a:
          sequence: [x]
          next: b
        b:
          sequence: [x]
          next: end
        x:
          run: {shell: echo x}
          transitions:
            - {when: promote_checkpoint, goto: end}
        end:
          run: {shell: echo e}
          terminal: true
        """
    )

    first = runtime(spec, {})
    second = runtime(spec, {"x": "promote"})
    last = runtime(spec, {"x": "promote", "x#2": "loop_back"})

    assert first.pending is not None and first.pending.key == "x"
    assert second.pending is not None and second.pending.key == "x#2"
    assert second.pending.step_index == 1
    assert last.pending is None
    assert trace(last) == [("x", None), ("x", None), ("end", None)]


# -- sequence loops ----------------------------------------------------------------------------


def test_build_plan_runtime_sequence_loop_reads_last_writer_each_iteration() -> None:
    spec = sample(TESTING / "loop-decision.yaml")

    plan = runtime(spec, {})

    assert trace(plan) == [("evaluate", None), ("decide", None)]
    assert plan.pending == DecisionPoint(
        key="rounds@rounds=1",
        state="rounds",
        writer_state="decide",
        uri="s3://example-bucket/testing/loop-decision/r1/decision.json",
        step_index=1,
    )


def test_build_plan_runtime_sequence_loop_promote_exits_early_then_reads_route() -> None:
    spec = sample(TESTING / "loop-decision.yaml")

    routed = runtime(spec, {"rounds@rounds=1": "loop_back", "rounds@rounds=2": "promote"})
    done = runtime(
        spec, {"rounds@rounds=1": "loop_back", "rounds@rounds=2": "promote", "route": "promote"}
    )

    assert [s for s, _ in trace(routed)] == ["evaluate", "decide"] * 2 + ["route"]
    assert routed.pending is not None
    assert (routed.pending.key, routed.pending.writer_state) == ("route", "route")
    assert routed.pending.step_index == 4
    assert done.pending is None
    assert [s for s, _ in trace(done)][-2:] == ["route", "publish"]
    assert done.decisions_used == (
        ("rounds@rounds=1", "loop_back_to_inner_loop"),
        ("rounds@rounds=2", "promote_checkpoint"),
        ("route", "promote_checkpoint"),
    )


def test_build_plan_runtime_inner_loop_without_writer_does_not_suppress_outer_read() -> None:
    # sim2real: the training-pass loop reads nothing, so each improvement round
    # still reads its verdict (dsl.md §5.4 counts reads, not assumed decisions)
    spec = sample(MAIN / "sim2real.yaml")

    first = runtime(spec, {})
    promoted = runtime(spec, {"improvement-round@improvement-round=1": "promote"})

    assert first.pending is not None
    assert first.pending.key == "improvement-round@improvement-round=1"
    assert first.pending.writer_state == "verdict"
    assert first.steps[first.pending.step_index].state == "verdict"
    assert trace(first).count(("rollouts", None)) == 2
    assert promoted.pending is None
    assert promoted.steps[-1].state == "report"


def test_build_plan_runtime_leaf_read_in_loop_body_replaces_the_writer_read() -> None:
    spec = spec_of(
        """
        rounds:
          loop: {max: 3, until: promote_checkpoint}
          sequence: [gate, work]
          next: end
        gate:
          run: {shell: echo g}
          transitions:
            - {goto: end}
        work:
          run: {shell: echo w}
          writesDecision: true
        end:
          run: {shell: echo e}
          terminal: true
        """
    )

    first = runtime(spec, {})
    second = runtime(spec, {"gate@rounds=1": "loop_back"})
    done = runtime(spec, {"gate@rounds=1": "loop_back", "gate@rounds=2": "promote"})

    assert first.pending is not None
    assert (first.pending.key, first.pending.writer_state) == ("gate@rounds=1", "gate")
    assert second.pending is not None and second.pending.key == "gate@rounds=2"
    assert [s for s, _ in trace(done)] == ["gate", "work", "gate", "work", "end"]


def test_build_plan_runtime_nested_loop_keys_name_every_enclosing_iteration() -> None:
    spec = spec_of(
        """
        outer:
          loop: {max: 2}
          sequence: [inner]
          next: end
        inner:
          loop: {max: 2, until: promote_checkpoint}
          sequence: [judge]
        judge:
          run: {shell: echo j}
          writesDecision: true
        end:
          run: {shell: echo e}
          terminal: true
        """
    )
    known: dict[str, str] = {}
    keys = []
    plan = runtime(spec, known)
    while plan.pending is not None:
        keys.append(plan.pending.key)
        known[plan.pending.key] = "loop_back"
        plan = runtime(spec, known)

    # the outer iteration does not read again: its inner loop already did
    assert keys == [
        "inner@outer=1,inner=1",
        "inner@outer=1,inner=2",
        "inner@outer=2,inner=1",
        "inner@outer=2,inner=2",
    ]
    assert len(plan.steps) == 5


# -- leaf loops --------------------------------------------------------------------------------


LEAF_LOOP = """
gate:
  run: {shell: echo g}
  transitions:
    - {goto: polish}
polish:
  run: {shell: echo p}
  loop: {max: 3, until: promote_checkpoint}
  next: end
end:
  run: {shell: echo e}
  terminal: true
"""


@pytest.mark.parametrize(
    ("decision", "rounds"),
    [("promote", 1), ("loop_back", 3)],
    ids=["promote-stops-at-once", "loop-back-runs-max"],
)
def test_build_plan_runtime_leaf_loop_keeps_the_decision_in_force(
    decision: str, rounds: int
) -> None:
    plan = runtime(spec_of(LEAF_LOOP), {"gate": decision}, assume="loop_back")

    assert plan.pending is None
    assert [i for s, i in trace(plan) if s == "polish"] == list(range(1, rounds + 1))


def test_build_plan_runtime_leaf_loop_alone_never_asks() -> None:
    spec = spec_of(
        """
        polish:
          run: {shell: echo p}
          loop: {max: 3, until: promote_checkpoint}
          next: end
        end:
          run: {shell: echo e}
          terminal: true
        """
    )

    plan = runtime(spec, {}, assume="promote")

    assert plan.pending is None
    assert trace(plan) == [("polish", 1), ("end", None)]


# -- one-shot mode and JSON --------------------------------------------------------------------


def test_build_plan_without_decisions_keeps_one_shot_json() -> None:
    plan = planner.build_plan(sample(TESTING / "loop-decision.yaml"), BUILTIN, run_id="r1")

    assert plan.pending is None
    assert plan.decisions_used == ()
    assert set(plan.to_json()) == {"workflow", "api_version", "initial", "assume_decision", "steps"}


def test_plan_to_json_runtime_prefix_carries_pending_and_decisions_used() -> None:
    plan = runtime(sample(TESTING / "loop-decision.yaml"), {"rounds@rounds=1": "loop_back"})

    body = plan.to_json()

    assert body["decisions_used"] == [
        {"key": "rounds@rounds=1", "decision": "loop_back_to_inner_loop"}
    ]
    assert body["pending"] == {
        "key": "rounds@rounds=2",
        "state": "rounds",
        "writer_state": "decide",
        "uri": "s3://example-bucket/testing/loop-decision/r1/decision.json",
        "step_index": 3,
    }


def test_build_plan_runtime_spec_without_points_equals_one_shot_plan() -> None:
    spec = sample(TESTING / "parallel-fanout.yaml")

    plan = runtime(spec, {})

    assert plan.pending is None
    assert plan.steps == planner.build_plan(spec, BUILTIN, run_id="r1").steps


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (("gate", (), 1), "gate"),
        (("gate", (("outer", 2),), 1), "gate@outer=2"),
        (("inner", (("outer", 1), ("inner", 3)), 1), "inner@outer=1,inner=3"),
        (("x", (), 2), "x#2"),
    ],
    ids=["plain", "in-loop", "nested", "second-occurrence"],
)
def test_point_key_formats_state_loops_and_occurrence(
    key: tuple[str, tuple[tuple[str, int], ...], int], expected: str
) -> None:
    state, loops, occurrence = key
    assert decisions.point_key(state, loops, occurrence) == expected


# -- properties over the shipped specs and the corpus ------------------------------------------


def _assert_extends(shorter: Plan, longer: Plan) -> None:
    n = len(shorter.steps)
    assert longer.steps[:n] == shorter.steps
    assert [s.task_name for s in longer.steps[:n]] == [s.task_name for s in shorter.steps]
    assert longer.decisions_used[: len(shorter.decisions_used)] == shorter.decisions_used
    before = waves.compute(shorter)
    assert waves.compute(longer)[: len(before)] == before


def _assert_pending_sound(plan: Plan, spec: Spec, known: dict[str, str]) -> None:
    point = plan.pending
    assert point is not None
    assert point.key not in known
    assert 0 <= point.step_index < len(plan.steps)
    assert plan.steps[point.step_index].state == point.writer_state
    assert spec.states[point.state].transitions or spec.states[point.state].loop
    writer = spec.states[point.writer_state]
    if writer.writes_decision:
        assert point.uri.startswith("s3://"), point
    else:
        # a routing leaf without any decision URI: nothing to read, the caller decides
        assert point.uri.startswith("s3://") or point.uri == "", point


@pytest.mark.skipif(
    not os.environ.get("NPA_SPEC_CORPUS") or not os.environ.get("NPA_TOOL_CATALOG"),
    reason="set NPA_SPEC_CORPUS and NPA_TOOL_CATALOG to add the corpus specs",
)
def test_runtime_cases_include_the_corpus_decision_specs() -> None:
    assert any(case[0].startswith("corpus-") for case in DECISION_CASES)


@pytest.mark.parametrize(
    ("path", "kind"), [c[1:] for c in DECISION_CASES], ids=[c[0] for c in DECISION_CASES]
)
@given(data=st.data())
def test_build_plan_runtime_each_decision_extends_the_previous_plan(
    path: Path, kind: str, data: st.DataObject
) -> None:
    spec, catalog = _load(path, kind)
    known: dict[str, str] = {}
    previous: Plan | None = None
    for _ in range(MAX_REPLANS):
        try:
            plan = runtime(spec, known, catalog)
        except PlanError as err:
            # a dead end under a real decision fails the run, located
            assert err.path and err.message
            return
        if previous is not None:
            _assert_extends(previous, plan)
        assert dict(plan.decisions_used) == {k: decisions.normalize(v) for k, v in known.items()}
        if plan.pending is None:
            assert spec.states[plan.steps[-1].state].terminal
            return
        _assert_pending_sound(plan, spec, known)
        known[plan.pending.key] = data.draw(st.sampled_from(CHOICES), label=plan.pending.key)
        previous = plan
    pytest.fail(f"still pending after {MAX_REPLANS} decisions")


@pytest.mark.parametrize("assume", ["", "loop_back", "promote"], ids=["default", "loop", "promote"])
@pytest.mark.parametrize(
    ("path", "kind"), [c[1:] for c in DECISION_CASES], ids=[c[0] for c in DECISION_CASES]
)
def test_build_plan_runtime_assumed_decisions_everywhere_equal_one_shot_plan(
    path: Path, kind: str, assume: str
) -> None:
    spec, catalog = _load(path, kind)
    one_shot = planner.build_plan(spec, catalog, run_id="r1", assume_decision=assume)
    known: dict[str, str] = {}
    plan = runtime(spec, known, catalog, assume)
    while plan.pending is not None:
        known[plan.pending.key] = one_shot.assume_decision
        plan = runtime(spec, known, catalog, assume)

    assert plan.steps == one_shot.steps
    assert plan.group_concurrency == one_shot.group_concurrency
    assert len(plan.decisions_used) == len(known)


@given(text=valid_spec_texts(), data=st.data())
def test_build_plan_runtime_generated_specs_extend_and_end_terminal(
    text: str, data: st.DataObject
) -> None:
    spec = load_validated("generated.yaml", BUILTIN, text=text).spec
    known: dict[str, str] = {}
    previous: Plan | None = None
    for _ in range(MAX_REPLANS):
        try:
            plan = runtime(spec, known)
        except PlanError as err:
            assert err.path and err.message
            return
        if previous is not None:
            _assert_extends(previous, plan)
        if plan.pending is None:
            assert spec.states[plan.steps[-1].state].terminal
            return
        _assert_pending_sound(plan, spec, known)
        known[plan.pending.key] = data.draw(st.sampled_from(CHOICES))
        previous = plan
    pytest.fail(f"still pending after {MAX_REPLANS} decisions")
