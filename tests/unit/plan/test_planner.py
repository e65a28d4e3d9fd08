"""Planning traversal (dsl.md §5.1-§5.2): steps, loops, groups, decisions, guards.

Specs that are valid go through ``load_validated`` first; specs that
validation would reject (to reach a planner guard directly) are only parsed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.plan import planner
from npa_infra.plan.model import Plan, PlanError
from npa_infra.spec import parse
from npa_infra.spec.model import Spec
from npa_infra.spec.source import LoadedDocument, load_text
from npa_infra.workflow.planning.loading import load_validated

REPO = Path(__file__).resolve().parents[3]
TESTING = REPO / "workflows" / "testing"

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata:
  name: t
config:
  root_uri: s3://b/r
"""


def spec_of(body: str, header: str = HEADER) -> Spec:
    """A validated spec: ``header`` plus ``states:`` holding ``body`` (dedented)."""
    text = header + "states:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    return load_validated("t.yaml", BUILTIN, text=text).spec


def parsed_of(body: str, header: str = HEADER) -> Spec:
    """A parsed but unvalidated spec, to reach planner guards directly."""
    text = header + "states:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    doc = load_text(text, "t.yaml")
    assert isinstance(doc, LoadedDocument)
    result = parse.parse_document(doc)
    assert result.spec is not None, result.collector.issues
    return result.spec


def sample(name: str) -> Spec:
    return load_validated(TESTING / name, BUILTIN).spec


def plan_of(spec: Spec, assume: str = "", variables: dict[str, str] | None = None) -> Plan:
    return planner.build_plan(
        spec, BUILTIN, run_id="r1", assume_decision=assume, variables=variables
    )


def trace(plan: Plan) -> list[tuple[str, int | None]]:
    return [(s.state, s.iteration) for s in plan.steps]


def states_of(plan: Plan) -> list[str]:
    return [s.state for s in plan.steps]


# -- leaf ------------------------------------------------------------------------------------


def test_build_plan_single_leaf_emits_one_resolved_step() -> None:
    plan = plan_of(sample("minimal.yaml"))
    (step,) = plan.steps
    assert step.state == "report"
    assert step.iteration is None
    assert (step.loop_label, step.group) == ("", "")
    assert step.tool_ref == "workbench.rerun.report"
    assert step.argv == (
        "python3",
        "-m",
        "npa_tools.sim2real",
        "report",
        "--root-uri",
        "s3://example-bucket/testing/minimal/r1",
    )
    assert step.shell == ""
    assert step.resources == "default"
    assert step.resources_profile == {"cloud": "kubernetes", "cpus": 2, "memory": "4Gi"}
    assert step.outputs == (
        {
            "uri": "s3://example-bucket/testing/minimal/r1/report.rrd",
            "schema": "application/vnd.rerun.rrd",
        },
    )
    assert plan.workflow == "minimal"
    assert plan.initial == "report"
    assert plan.run_id == "r1"


def test_build_plan_leaf_next_chain_follows_next_in_order() -> None:
    plan = plan_of(sample("linear-chain.yaml"))
    assert states_of(plan) == ["check-trigger", "split", "report"]


def test_build_plan_state_uri_token_reads_earlier_output() -> None:
    plan = plan_of(sample("linear-chain.yaml"))
    assert plan.steps[1].inputs[0]["uri"] == plan.steps[0].outputs[0]["uri"]


def test_build_plan_run_argv_wins_over_shell() -> None:
    # validation rejects both at once (issue 18); the planner's precedence still holds
    spec = parsed_of(
        """
        a:
          run: {argv: [echo, "{{config.root_uri}}"], shell: echo ignored}
          terminal: true
        """
    )
    (step,) = plan_of(spec).steps
    assert step.argv == ("echo", "s3://b/r")
    assert step.shell == ""


def test_build_plan_tool_ref_wins_over_run() -> None:
    # validation rejects both at once (issue 18); the planner's precedence still holds
    spec = parsed_of(
        """
        a:
          toolRef: workbench.rerun.report
          run: {shell: echo ignored}
          terminal: true
        """
    )
    (step,) = plan_of(spec).steps
    assert step.argv[:4] == ("python3", "-m", "npa_tools.sim2real", "report")
    assert step.shell == ""


def test_build_plan_shell_state_resolves_tokens_and_keeps_literals() -> None:
    plan = plan_of(sample("tokens.yaml"))
    literal = plan.steps[-1]
    assert literal.state == "literal"
    assert "'{{params.x}}'" in literal.shell
    assert "'{{\"k\": 1}}'" in literal.shell
    assert "'r1'" in literal.shell


def test_build_plan_run_prefix_defaults_to_name_and_run_id() -> None:
    spec = spec_of('a:\n  run: {shell: "echo {{run.prefix}}"}\n  terminal: true\n')
    assert plan_of(spec).steps[0].shell == "echo t/r1"


def test_build_plan_config_prefix_wins_over_run_prefix() -> None:
    header = HEADER.replace(
        "  root_uri: s3://b/r", '  root_uri: s3://b/r\n  prefix: "p/{{run.id}}"'
    )
    header += "run:\n  prefix: ignored\n"
    spec = spec_of('a:\n  run: {shell: "echo {{run.prefix}}"}\n  terminal: true\n', header)
    assert plan_of(spec).steps[0].shell == "echo p/r1"


def test_build_plan_top_level_run_prefix_used_without_config_prefix() -> None:
    header = HEADER + "run:\n  prefix: custom/place\n  owner: qa\n"
    spec = spec_of(
        'a:\n  run: {shell: "echo {{run.prefix}} {{run.owner}}"}\n  terminal: true\n', header
    )
    assert plan_of(spec).steps[0].shell == "echo custom/place qa"


def test_build_plan_variables_override_config_in_every_field() -> None:
    plan = plan_of(sample("linear-chain.yaml"), variables={"bucket": "prod"})
    texts = [*plan.steps[0].argv, *(o["uri"] for s in plan.steps for o in s.outputs)]
    assert all("example-bucket" not in t for t in texts)
    assert any("s3://prod/" in t for t in texts)


def test_build_plan_catalog_defaults_fill_missing_config_only() -> None:
    header = HEADER.replace("  root_uri: s3://b/r", '  root_uri: s3://b/r\n  threshold: "0.9"')
    header = header.replace("config:", "config:\n  decision_uri: s3://b/d.json")
    spec = spec_of(
        """
        a:
          toolRef: workbench.sim2real.decide
          terminal: true
        """,
        header,
    )
    argv = plan_of(spec).steps[0].argv
    assert argv[argv.index("--threshold") + 1] == "0.9"


# -- sequence ---------------------------------------------------------------------------------

SEQUENCE = """
s:
  sequence: [a, c]
  next: z
a:
  run: {shell: echo a}
  next: x
x:
  run: {shell: echo x}
  terminal: true
c:
  run: {shell: echo c}
  transitions:
    - {goto: y}
y:
  run: {shell: echo y}
  terminal: true
z:
  run: {shell: echo z}
  terminal: true
"""


def test_build_plan_sequence_child_with_next_follows_it() -> None:
    plan = plan_of(spec_of(SEQUENCE))
    assert states_of(plan)[:2] == ["a", "x"]


def test_build_plan_sequence_child_with_transitions_follows_neither() -> None:
    plan = plan_of(spec_of(SEQUENCE))
    assert states_of(plan) == ["a", "x", "c", "z"]
    assert "y" not in states_of(plan)


def test_build_plan_sequence_children_carry_sequence_loop_label() -> None:
    plan = plan_of(spec_of(SEQUENCE))
    labels = {s.state: s.loop_label for s in plan.steps}
    assert labels["a"] == "s"
    assert labels["c"] == "s"
    assert labels["z"] == ""
    assert all(s.group == "" and s.iteration is None for s in plan.steps)


def test_build_plan_sequence_chain_through_non_terminal_child_continues_sequence() -> None:
    # The reference follows a child's next chain and returns to the sequence
    # when the chain ends; the plan does not end there, so the planning guard
    # must not fire. Product bug: npa-infra raises "plan ends at a non-terminal state".
    spec = parsed_of(
        """
        s:
          sequence: [a, c]
          next: z
        a:
          run: {shell: echo a}
          next: x
        x:
          run: {shell: echo x}
        c:
          run: {shell: echo c}
        z:
          run: {shell: echo z}
          terminal: true
        """
    )
    assert states_of(plan_of(spec)) == ["a", "x", "c", "z"]


def test_build_plan_nested_sequence_expands_in_order() -> None:
    spec = spec_of(
        """
        outer:
          sequence: [first, inner, last]
          next: done
        inner:
          sequence: [m1, m2]
        first:
          run: {shell: echo 1}
        m1:
          run: {shell: echo m1}
        m2:
          run: {shell: echo m2}
        last:
          run: {shell: echo last}
        done:
          run: {shell: echo done}
          terminal: true
        """
    )
    plan = plan_of(spec)
    assert states_of(plan) == ["first", "m1", "m2", "last", "done"]
    assert [s.loop_label for s in plan.steps] == ["outer", "inner", "inner", "outer", ""]


# -- sequence loops ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assume", "expected"),
    [
        ("", ["evaluate", "decide"] * 3 + ["route", "escalate"]),
        ("loop_back", ["evaluate", "decide"] * 3 + ["route", "escalate"]),
        ("loop_back_to_inner_loop", ["evaluate", "decide"] * 3 + ["route", "escalate"]),
        ("promote_checkpoint", ["evaluate", "decide", "route", "publish"]),
        ("promote", ["evaluate", "decide", "route", "publish"]),
    ],
    ids=["default", "loop_back", "loop_back_long", "promote_checkpoint", "promote"],
)
def test_build_plan_sequence_loop_until_promote_follows_assumption(
    assume: str, expected: list[str]
) -> None:
    plan = plan_of(sample("loop-decision.yaml"), assume)
    assert states_of(plan) == expected


def test_build_plan_sequence_loop_children_keep_null_iteration_and_loop_label() -> None:
    plan = plan_of(sample("loop-decision.yaml"))
    body = [s for s in plan.steps if s.state in ("evaluate", "decide")]
    assert {s.iteration for s in body} == {None}
    assert {s.loop_label for s in body} == {"rounds"}


def test_build_plan_sequence_loop_token_counts_iterations_in_params() -> None:
    plan = plan_of(sample("loop-decision.yaml"))
    outers = [s.argv[s.argv.index("--outer") + 1] for s in plan.steps if s.state == "evaluate"]
    assert outers == ["1", "2", "3"]


def test_build_plan_sequence_loop_without_until_runs_full_max_under_promote() -> None:
    spec = spec_of(
        """
        rounds:
          loop: {max: 3}
          sequence: [work]
          next: done
        work:
          run: {shell: "echo {{loop.rounds}}"}
        done:
          run: {shell: "echo last={{loop.rounds}}"}
          terminal: true
        """
    )
    plan = plan_of(spec, "promote_checkpoint")
    assert [s.shell for s in plan.steps] == ["echo 1", "echo 2", "echo 3", "echo last=3"]


def test_build_plan_sequence_loop_until_loop_back_stops_after_first_under_loop_back() -> None:
    spec = spec_of(
        """
        rounds:
          loop: {max: 4, until: loop_back}
          sequence: [work]
          next: done
        work:
          run: {shell: echo w}
        done:
          run: {shell: echo d}
          terminal: true
        """
    )
    assert states_of(plan_of(spec, "loop_back")) == ["work", "done"]
    assert states_of(plan_of(spec, "promote")) == ["work"] * 4 + ["done"]
    assert states_of(plan_of(spec)) == ["work"] * 4 + ["done"]


def test_build_plan_nested_sequence_loops_multiply() -> None:
    spec = spec_of(
        """
        outer:
          loop: {max: 2}
          sequence: [inner]
          next: done
        inner:
          loop: {max: 3}
          sequence: [work]
        work:
          run: {shell: echo w}
          outputs:
            - {uri: "s3://b/{{loop.outer}}-{{loop.inner}}"}
        done:
          run: {shell: "echo {{loop.outer}}"}
          terminal: true
        """
    )
    plan = plan_of(spec)
    uris = [s.outputs[0]["uri"] for s in plan.steps if s.state == "work"]
    assert uris == [f"s3://b/{o}-{i}" for o in (1, 2) for i in (1, 2, 3)]
    assert plan.steps[-1].shell == "echo 2"


def test_build_plan_main_sim2real_promote_runs_one_round() -> None:
    spec = load_validated(REPO / "workflows" / "main" / "sim2real.yaml", BUILTIN).spec
    full = plan_of(spec, "loop_back")
    short = plan_of(spec, "promote_checkpoint")
    assert len(short.steps) < len(full.steps)
    assert states_of(full)[-1] == states_of(short)[-1]


# -- leaf loops -----------------------------------------------------------------------------------

LEAF_LOOP = """
a:
  run: {shell: "echo {{loop.a}}"}
  loop: {max: 3, until: promote_checkpoint}
  outputs:
    - {uri: "s3://b/a-{{loop.a}}"}
  next: b
b:
  run: {argv: [echo, "{{state.a.uri}}", "{{loop.a}}"]}
  terminal: true
"""


def test_build_plan_leaf_loop_emits_numbered_iterations() -> None:
    plan = plan_of(spec_of(LEAF_LOOP))
    assert trace(plan) == [("a", 1), ("a", 2), ("a", 3), ("b", None)]
    assert [s.shell for s in plan.steps[:3]] == ["echo 1", "echo 2", "echo 3"]


def test_build_plan_leaf_loop_stops_early_on_until() -> None:
    plan = plan_of(spec_of(LEAF_LOOP), "promote_checkpoint")
    assert trace(plan) == [("a", 1), ("b", None)]


def test_build_plan_loop_token_keeps_last_value_after_loop() -> None:
    plan = plan_of(spec_of(LEAF_LOOP))
    assert plan.steps[-1].argv == ("echo", "s3://b/a-3", "3")


def test_build_plan_leaf_loop_follows_transitions_after_iterations() -> None:
    spec = spec_of(
        """
        a:
          run: {shell: echo a}
          loop: {max: 2}
          transitions:
            - {when: promote_checkpoint, goto: p}
            - {goto: q}
        p:
          run: {shell: echo p}
          terminal: true
        q:
          run: {shell: echo q}
          terminal: true
        """
    )
    assert trace(plan_of(spec, "promote")) == [("a", 1), ("a", 2), ("p", None)]
    assert trace(plan_of(spec, "loop_back")) == [("a", 1), ("a", 2), ("q", None)]


def test_build_plan_terminal_leaf_loop_ends_plan() -> None:
    # dsl.md §1.3: a terminal state still runs its own work. Product bug: a
    # terminal leaf loop raises "plan ends at a non-terminal state".
    spec = parsed_of(
        """
        a:
          run: {shell: echo a}
          loop: {max: 2}
          terminal: true
        """
    )
    assert trace(plan_of(spec)) == [("a", 1), ("a", 2)]


# -- parallel groups ------------------------------------------------------------------------------


def test_build_plan_parallel_members_emitted_in_order_with_group() -> None:
    plan = plan_of(sample("parallel-fanout.yaml"))
    assert states_of(plan) == ["shard-0", "shard-1", "shard-2", "aggregate"]
    assert [(s.group, s.loop_label) for s in plan.steps] == [
        ("envgen", "envgen"),
        ("envgen", "envgen"),
        ("envgen", "envgen"),
        ("", ""),
    ]


def test_build_plan_parallel_member_params_overlay_applies_per_member() -> None:
    plan = plan_of(sample("parallel-fanout.yaml"))
    indexes = [s.argv[s.argv.index("--shard-index") + 1] for s in plan.steps[:3]]
    assert indexes == ["0", "1", "2"]
    counts = {s.argv[s.argv.index("--shard-count") + 1] for s in plan.steps[:3]}
    assert counts == {"3"}


def test_build_plan_parallel_group_records_effective_concurrency() -> None:
    plan = plan_of(sample("parallel-fanout.yaml"))
    assert plan.group_concurrency == {"envgen": 2}


def test_build_plan_parallel_max_concurrency_capped_at_member_count() -> None:
    spec = spec_of(
        """
        g:
          parallel: [m1, m2]
          maxConcurrency: 8
          next: done
        m1:
          run: {shell: echo 1}
        m2:
          run: {shell: echo 2}
        done:
          run: {shell: echo d}
          terminal: true
        """
    )
    assert plan_of(spec).group_concurrency == {"g": 2}


def test_build_plan_parallel_inside_sequence_loop_repeats_group() -> None:
    spec = spec_of(
        """
        rounds:
          loop: {max: 2}
          sequence: [g]
          next: done
        g:
          parallel: [m1, m2]
        m1:
          run: {shell: echo 1}
        m2:
          run: {shell: echo 2}
        done:
          run: {shell: echo d}
          terminal: true
        """
    )
    plan = plan_of(spec)
    assert states_of(plan) == ["m1", "m2", "m1", "m2", "done"]
    assert [s.group for s in plan.steps] == ["g", "g", "g", "g", ""]


# -- transitions -----------------------------------------------------------------------------------

IF_SPEC = """
a:
  run: {shell: echo a}
  transitions:
    - {if: config.flag, goto: p}
    - {goto: q}
p:
  run: {shell: echo p}
  terminal: true
q:
  run: {shell: echo q}
  terminal: true
"""


@pytest.mark.parametrize(
    ("flag_line", "expected"),
    [
        ('  flag: "0"\n', "p"),
        ('  flag: "false"\n', "p"),
        ("  flag: 1\n", "p"),
        ("  flag: true\n", "p"),
        ('  flag: ""\n', "q"),
        ("  flag: false\n", "q"),
        ("  flag: 0\n", "q"),
        ("", "q"),
    ],
    ids=[
        "string-zero-truthy",
        "string-false-truthy",
        "int-one",
        "bool-true",
        "empty-string",
        "bool-false",
        "int-zero",
        "missing-key",
    ],
)
def test_build_plan_transition_if_config_tests_base_config_truthiness(
    flag_line: str, expected: str
) -> None:
    header = HEADER.replace("config:\n", "config:\n" + flag_line)
    assert states_of(plan_of(spec_of(IF_SPEC, header))) == ["a", expected]


def test_build_plan_transition_if_ignores_state_params() -> None:
    body = IF_SPEC.replace(
        "  run: {shell: echo a}\n", '  run: {shell: echo a}\n  params: {flag: "1"}\n', 1
    )
    assert states_of(plan_of(spec_of(body))) == ["a", "q"]


def test_build_plan_transition_if_sees_var_override() -> None:
    plan = plan_of(spec_of(IF_SPEC), variables={"flag": "yes"})
    assert states_of(plan) == ["a", "p"]


@pytest.mark.parametrize(
    ("assume", "last"),
    [("", "reject"), ("loop_back", "reject"), ("promote_checkpoint", "accept")],
    ids=["default", "loop_back", "promote"],
)
def test_build_plan_transition_when_follows_assumed_decision(assume: str, last: str) -> None:
    plan = plan_of(sample("runtime-mode.yaml"), assume)
    assert states_of(plan) == ["prepare", "grade", "gate", last]


def test_build_plan_first_matching_transition_wins_over_next() -> None:
    spec = spec_of(
        """
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: p}
            - {goto: q}
            - {goto: p}
          next: p
        p:
          run: {shell: echo p}
          terminal: true
        q:
          run: {shell: echo q}
          terminal: true
        """
    )
    assert states_of(plan_of(spec, "loop_back")) == ["a", "q"]


def test_build_plan_unmatched_transitions_fall_back_to_next() -> None:
    spec = spec_of(
        """
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: p}
          next: q
        p:
          run: {shell: echo p}
          terminal: true
        q:
          run: {shell: echo q}
          terminal: true
        """
    )
    assert states_of(plan_of(spec, "loop_back")) == ["a", "q"]
    assert states_of(plan_of(spec, "promote_checkpoint")) == ["a", "p"]


def test_build_plan_unknown_decision_value_matches_no_predicate() -> None:
    spec = spec_of(
        """
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: p}
            - {when: loop_back, goto: p}
          next: q
        p:
          run: {shell: echo p}
          terminal: true
        q:
          run: {shell: echo q}
          terminal: true
        """
    )
    plan = plan_of(spec, "hold")
    assert plan.assume_decision == "hold"
    assert states_of(plan) == ["a", "q"]


# -- assumed decision (dsl.md §5.2) ------------------------------------------------------------------

NO_TRANSITIONS = "a:\n  run: {shell: echo a}\n  terminal: true\n"
WITH_TRANSITIONS = (
    "a:\n  run: {shell: echo a}\n  transitions: [{goto: b}]\n"
    "b:\n  run: {shell: echo b}\n  terminal: true\n"
)


@pytest.mark.parametrize(
    ("explicit", "config_value", "body", "expected"),
    [
        ("promote", "loop_back", WITH_TRANSITIONS, "promote_checkpoint"),
        ("loop_back", "promote", NO_TRANSITIONS, "loop_back_to_inner_loop"),
        ("", "promote", WITH_TRANSITIONS, "promote_checkpoint"),
        ("", "promote_checkpoint", NO_TRANSITIONS, "promote_checkpoint"),
        ("  ", "loop_back", NO_TRANSITIONS, "loop_back_to_inner_loop"),
        ("", "", WITH_TRANSITIONS, "loop_back_to_inner_loop"),
        ("", None, WITH_TRANSITIONS, "loop_back_to_inner_loop"),
        ("", None, NO_TRANSITIONS, ""),
    ],
    ids=[
        "explicit-beats-config",
        "explicit-without-transitions",
        "config-beats-transitions-default",
        "config-without-transitions",
        "blank-explicit-falls-to-config",
        "empty-config-falls-to-loop-back",
        "transitions-default-loop-back",
        "nothing-set-is-empty",
    ],
)
def test_build_plan_assumed_decision_resolution_order(
    explicit: str, config_value: str | None, body: str, expected: str
) -> None:
    header = HEADER
    if config_value is not None:
        header = HEADER.replace("config:\n", f'config:\n  plan_assume_decision: "{config_value}"\n')
    plan = plan_of(spec_of(body, header), explicit)
    assert plan.assume_decision == expected


def test_resolve_assumption_reads_effective_config() -> None:
    spec = spec_of(NO_TRANSITIONS)
    assert (
        planner.resolve_assumption(spec, {"plan_assume_decision": "promote"})
        == "promote_checkpoint"
    )
    assert planner.resolve_assumption(spec, {}) == ""


def test_build_plan_assumption_from_var_applies() -> None:
    plan = plan_of(sample("loop-decision.yaml"), variables={"plan_assume_decision": "promote"})
    assert plan.assume_decision == "promote_checkpoint"
    assert states_of(plan)[-1] == "publish"


# -- step limit and planning guard --------------------------------------------------------------------


def _looping(iterations: int) -> Spec:
    return parsed_of(
        f"""
        a:
          run: {{shell: echo a}}
          loop: {{max: {iterations}}}
          next: b
        b:
          run: {{shell: echo b}}
          terminal: true
        """
    )


def test_step_limit_is_max_of_256_and_64_per_state() -> None:
    assert planner.step_limit(_looping(1)) == 256
    five = parsed_of(
        "".join(f"s{i}:\n  run: {{shell: echo}}\n  next: s{i + 1}\n" for i in range(5))
    )
    assert planner.step_limit(five) == 320


def test_build_plan_exactly_at_step_limit_succeeds() -> None:
    assert len(plan_of(_looping(255)).steps) == 256


def test_build_plan_over_step_limit_raises_located_error() -> None:
    with pytest.raises(PlanError) as err:
        plan_of(_looping(256))
    assert err.value.message.startswith("plan exceeded step limit")
    assert err.value.path[:2] == ("states", "b")


def test_build_plan_huge_loop_max_fails_fast_with_step_limit() -> None:
    with pytest.raises(PlanError) as err:
        plan_of(_looping(10**12))
    assert err.value.message.startswith("plan exceeded step limit")


def test_build_plan_non_terminal_dead_end_raises_located_error() -> None:
    spec = parsed_of(
        """
        a:
          run: {shell: echo a}
          next: c
        c:
          run: {shell: echo c}
        """
    )
    with pytest.raises(PlanError) as err:
        plan_of(spec)
    assert err.value.path == ("states", "c")
    assert err.value.state == "c"
    assert err.value.message == "plan ends at a non-terminal state"
    assert err.value.hint


def test_build_plan_no_matching_transition_without_next_raises() -> None:
    spec = parsed_of(
        """
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: b}
        b:
          run: {shell: echo b}
          terminal: true
        """
    )
    assert states_of(plan_of(spec, "promote")) == ["a", "b"]
    with pytest.raises(PlanError) as err:
        plan_of(spec, "loop_back")
    assert err.value.path == ("states", "a", "transitions")
    assert "no transition matches decision" in err.value.message


def test_build_plan_parallel_group_without_next_at_top_level_raises() -> None:
    spec = parsed_of(
        """
        g:
          parallel: [m]
        m:
          run: {shell: echo m}
        """
    )
    with pytest.raises(PlanError) as err:
        plan_of(spec)
    assert err.value.path == ("states", "g")


def test_build_plan_sequence_cycle_raises_instead_of_recursing() -> None:
    spec = parsed_of(
        """
        a:
          sequence: [b]
          terminal: true
        b:
          sequence: [a]
        """
    )
    with pytest.raises(PlanError) as err:
        plan_of(spec)
    assert "cycle" in err.value.message


def test_build_plan_state_token_before_state_runs_raises_at_field() -> None:
    spec = parsed_of(
        """
        a:
          run: {argv: [echo, "{{state.b.uri}}"]}
          next: b
        b:
          run: {shell: echo b}
          outputs: [{uri: s3://x/b}]
          terminal: true
        """
    )
    with pytest.raises(PlanError) as err:
        plan_of(spec)
    assert err.value.path == ("states", "a", "run", "argv", 1)


# -- omit_flags_when_empty and params -----------------------------------------------------------------

# the built-in tool whose template drops an empty --cache-dir (dsl.md §7)
CURATE_TOOL = next(
    e.name for e in BUILTIN.tools.values() if "--cache-dir" in e.omit_flags_when_empty
)
CURATE = f"""
a:
  toolRef: {CURATE_TOOL}
  terminal: true
"""
CURATE_HEADER = HEADER.replace(
    "config:\n", "config:\n  augment_uri: s3://b/aug\n  curated_uri: s3://b/cur\n"
)


def test_build_plan_omit_flags_when_empty_drops_flag_and_value() -> None:
    argv = plan_of(spec_of(CURATE, CURATE_HEADER)).steps[0].argv
    assert "--cache-dir" not in argv
    assert argv[-2:] == ("--out", "s3://b/cur")


def test_build_plan_omit_flags_when_empty_keeps_non_empty_value() -> None:
    plan = plan_of(spec_of(CURATE, CURATE_HEADER), variables={"curator_cache_dir": "/cache"})
    assert plan.steps[0].argv[-2:] == ("--cache-dir", "/cache")


def test_build_plan_omit_flags_when_empty_treats_blank_as_empty() -> None:
    body = CURATE.replace(
        "  terminal: true", '  params: {curator_cache_dir: "  "}\n  terminal: true'
    )
    assert "--cache-dir" not in plan_of(spec_of(body, CURATE_HEADER)).steps[0].argv


def test_build_plan_params_overlay_with_loop_tokens_per_iteration() -> None:
    plan = plan_of(sample("tokens.yaml"))
    encodes = [s for s in plan.steps if s.state == "encode"]
    assert [s.argv[-2] for s in encodes] == ["pass-1", "pass-2"]
    assert [s.outputs[0]["uri"] for s in encodes] == [
        "s3://example-bucket/testing/tokens/data/1/encoded.json",
        "s3://example-bucket/testing/tokens/data/2/encoded.json",
    ]


def test_build_plan_params_overlay_is_scoped_to_its_state() -> None:
    spec = spec_of(
        """
        a:
          run: {shell: "echo {{config.word}}"}
          params: {word: override}
          next: c
        c:
          run: {shell: "echo {{config.word}}"}
          terminal: true
        """,
        HEADER.replace("config:\n", "config:\n  word: base\n"),
    )
    assert [s.shell for s in plan_of(spec).steps] == ["echo override", "echo base"]


def test_build_plan_params_beat_var_for_their_state() -> None:
    spec = spec_of(
        'a:\n  run: {shell: "echo {{config.word}}"}\n  params: {word: p}\n  terminal: true\n',
        HEADER.replace("config:\n", "config:\n  word: base\n"),
    )
    assert plan_of(spec, variables={"word": "v"}).steps[0].shell == "echo p"


def test_build_plan_profile_tokens_resolve_with_state_params() -> None:
    header = HEADER.replace("config:\n", 'config:\n  gpu_count: "1"\n') + (
        'resources:\n  gpu:\n    accelerators: "H100:{{config.gpu_count}}"\n'
        "    kubernetes:\n      pod_config:\n        metadata:\n"
        '          labels: {run: "{{run.id}}"}\n'
    )
    spec = spec_of(
        """
        a:
          run: {shell: echo a}
          resources: gpu
          params: {gpu_count: "4"}
          next: c
        c:
          run: {shell: echo c}
          resources: gpu
          terminal: true
        """,
        header,
    )
    plan = plan_of(spec)
    assert plan.steps[0].resources_profile["accelerators"] == "H100:4"
    assert plan.steps[1].resources_profile["accelerators"] == "H100:1"
    labels = plan.steps[0].resources_profile["kubernetes"]["pod_config"]["metadata"]["labels"]
    assert labels == {"run": "r1"}


def test_build_plan_default_profile_absent_means_empty() -> None:
    spec = spec_of(NO_TRANSITIONS)
    assert plan_of(spec).steps[0].resources_profile == {}


# -- determinism and JSON shape ------------------------------------------------------------------------


def test_build_plan_same_spec_twice_gives_equal_plans() -> None:
    spec = sample("loop-decision.yaml")
    assert plan_of(spec).to_json() == plan_of(spec).to_json()


def test_plan_to_json_has_contract_keys() -> None:
    body = plan_of(sample("parallel-fanout.yaml")).to_json()
    assert set(body) == {"workflow", "api_version", "initial", "assume_decision", "steps"}
    assert set(body["steps"][0]) == {
        "state",
        "iteration",
        "loop_label",
        "group",
        "argv",
        "shell",
        "tool_ref",
        "resources",
        "resources_profile",
        "inputs",
        "outputs",
    }
