"""Validation rules of dsl.md §4.1 and §4.2, one failing spec per rule.

Each case is a small spec that breaks exactly one rule. The line that holds
the offending node carries a ``# <-`` marker, and the case names the text the
reported column must point at, so the expected position is read from the
YAML itself. Tests go through ``load_validated`` (every phase, 1-9).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.plan import planner
from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.model import ExecutionMode
from npa_infra.workflow.planning.loading import ValidatedSpec, load_validated

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

TAIL = """
b:
  run: {shell: echo b}
  terminal: true
"""

MARK = "# <-"


def states(body: str, header: str = HEADER) -> str:
    """A spec: ``header`` then ``states:`` holding ``body`` (dedented) and the terminal ``b``."""
    return header + "states:\n" + textwrap.indent(textwrap.dedent(body) + TAIL.lstrip("\n"), "  ")


def marker(text: str, snippet: str) -> tuple[int, int]:
    """(line, column) of ``snippet`` on the unique line carrying the ``# <-`` marker."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if MARK in line]
    assert len(hits) == 1, "a case must mark exactly one line"
    line = lines[hits[0]]
    assert snippet in line, f"{snippet!r} not on the marked line {line!r}"
    return hits[0] + 1, line.index(snippet) + 1


def validate(text: str, variables: dict[str, str] | None = None) -> ValidatedSpec:
    return load_validated("t.yaml", BUILTIN, variables, text=text)


def issues_of(text: str, variables: dict[str, str] | None = None) -> list[SpecIssue]:
    with pytest.raises(SpecError) as err:
        validate(text, variables)
    assert err.value.issues, "a SpecError must carry at least one issue"
    return err.value.issues


@dataclass(frozen=True)
class Rule:
    text: str
    path: str
    snippet: str
    message: str


# fmt: off
RULES = [
    # -- phase 1: file ------------------------------------------------------
    pytest.param(Rule("- a  # <-\n- b\n", "$", "- a", "spec must be a mapping, got list"),
                 id="p1-not-a-mapping"),
    # -- phase 2: structure ---------------------------------------------------
    pytest.param(Rule(HEADER.replace("apiVersion: npa.workflow/v0.0.1",
                                     "apiVersion: npa.workflow/v0.0.1  # <-"),
                      "$", "apiVersion", "missing required field 'states'"),
                 id="p2-missing-states"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER.replace("kind: Workflow", "kind: Job  # <-")),
                      "$.kind", "Job", "expected 'Workflow', got 'Job'"),
                 id="p2-kind-not-workflow"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER.replace("  name: t", "  description: x  # <-")),
                      "$.metadata", "description", "missing required field 'name'"),
                 id="p2-metadata-missing-name"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER.replace("  root_uri: s3://b/r", "  - a  # <-")),
                      "$.config", "- a", "expected object, got list"),
                 id="p2-config-not-object"),
    pytest.param(Rule(HEADER + "states:\n  - a  # <-\n", "$.states", "- a",
                      "expected object, got list"),
                 id="p2-states-list"),
    pytest.param(Rule(HEADER + "states: {}  # <-\n", "$.states", "{}", "states must not be empty"),
                 id="p2-states-empty"),
    # -- phase 3: parse ---------------------------------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          transitions:
            - when: loop_back  # <-
          next: b
        """), "$.states.a.transitions[0]", "when", "transition needs goto"),
        id="p3-transition-needs-goto"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          loop: 3  # <-
          next: b
        """), "$.states.a.loop", "3", "loop must be a mapping, got int"),
        id="p3-loop-not-mapping"),
    pytest.param(Rule(states("""
        a:
          run: echo a  # <-
          next: b
        """), "$.states.a.run", "echo a", "run must be a mapping, got str"),
        id="p3-run-not-mapping"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          trigger: s3://x/  # <-
          next: b
        """), "$.states.a.trigger", "s3://x/", "trigger must be a mapping, got str"),
        id="p3-trigger-not-mapping"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          params: [1]  # <-
          next: b
        """), "$.states.a.params", "[1]", "params must be a mapping, got list"),
        id="p3-params-not-mapping"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          params:
            k: [1, 2]  # <-
          next: b
        """), "$.states.a.params.k", "[1, 2]", "params values must be scalars, got list"),
        id="p3-params-value-not-scalar"),
    pytest.param(Rule(states("""
        g:
          parallel: m  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.g.parallel", "m", "parallel must be a list of state names, got str"),
        id="p3-parallel-not-list"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          trigger:
            uri: s3://x/
            pollSeconds: 0  # <-
          next: b
        """), "$.states.a.trigger.pollSeconds", "0", "trigger.pollSeconds must be >= 1, got 0"),
        id="p3-trigger-poll-seconds-zero"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          trigger:
            uri: s3://x/
            minObjects: 0  # <-
          next: b
        """), "$.states.a.trigger.minObjects", "0", "trigger.minObjects must be >= 1, got 0"),
        id="p3-trigger-min-objects-zero"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          trigger:
            uri: s3://x/
            maxPolls: -1  # <-
          next: b
        """), "$.states.a.trigger.maxPolls", "-1", "trigger.maxPolls must be >= 0, got -1"),
        id="p3-trigger-max-polls-negative"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          multiNodeMode: replicated  # <-
          next: b
        """), "$.states.a.multiNodeMode", "replicated", "multiNodeMode must be 'sharded'"),
        id="p3-multi-node-mode-not-sharded"),
    # -- phase 4: spec level ---------------------------------------------------
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER.replace("apiVersion: npa.workflow/v0.0.1",
                                            "apiVersion: npa.workflow/v9  # <-")),
                      "$.apiVersion", "npa.workflow/v9",
                      "unsupported apiVersion 'npa.workflow/v9' (expected one of ["),
                 id="p4-unsupported-api-version"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "initial: nope  # <-\n"),
                      "$.initial", "nope", "initial state 'nope' is not defined"),
                 id="p4-initial-undefined"),
    # -- phase 5: references ---------------------------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          loop: {max: 2, until: maybe}  # <-
          next: b
        """), "$.states.a.loop.until", "maybe", "unknown loop.until predicate 'maybe'"),
        id="p5-loop-until-unknown-predicate"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          transitions:
            - {when: maybe, goto: b}  # <-
          next: b
        """), "$.states.a.transitions[0].when", "maybe",
        "unknown transition.when predicate 'maybe'"),
        id="p5-transition-when-unknown-predicate"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          transitions:
            - {goto: q}  # <-
          next: b
        """), "$.states.a.transitions[0].goto", "q}", "transition goto unknown state 'q'"),
        id="p5-transition-goto-unknown"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          needs: [q]  # <-
          next: b
        """), "$.states.a.needs[0]", "q]", "needs unknown state 'q'"),
        id="p5-needs-unknown"),
    pytest.param(Rule(states("""
        a:
          sequence: [m, q]  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.sequence[1]", "q]", "sequence entry unknown state 'q'"),
        id="p5-sequence-entry-unknown"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          next: q  # <-
        """), "$.states.a.next", "q", "unknown state 'q'"),
        id="p5-next-unknown"),
    # -- phase 5: parallel groups -----------------------------------------------
    pytest.param(Rule(states("""
        a:
          sequence: [m]
          parallel: [m]  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel", "[m]", "a state cannot have both sequence and parallel"),
        id="p5-group-sequence-and-parallel"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]
          loop: {max: 2}  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.loop", "{max", "loop is not allowed on a parallel group"),
        id="p5-group-with-loop"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]  # <-
          run: {shell: echo a}
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel", "[m]", "a parallel group cannot have run or toolRef"),
        id="p5-group-with-run"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]  # <-
          toolRef: workbench.rerun.report
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel", "[m]", "a parallel group cannot have run or toolRef"),
        id="p5-group-with-tool-ref"),
    pytest.param(Rule(states("""
        a:
          parallel: [m, m]  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel[1]", "m]", "duplicate parallel member 'm'"),
        id="p5-group-duplicate-member"),
    pytest.param(Rule(states("""
        a:
          parallel: [m, n]
          parallelCount: 3  # <-
          next: b
        m:
          run: {shell: echo m}
        n:
          run: {shell: echo n}
        """), "$.states.a.parallelCount", "3",
        "parallelCount resolves to 3, but the group declares 2 members"),
        id="p5-group-count-mismatch"),
    pytest.param(Rule(states("""
        a:
          parallel: [m, q]  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel[1]", "q]", "unknown state 'q'"),
        id="p5-group-member-unknown"),
    pytest.param(Rule(states("""
        a:
          parallel: [m, a]  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.parallel[1]", "a]", "a parallel group cannot contain itself"),
        id="p5-group-contains-itself"),
    pytest.param(Rule(states("""
        a:
          parallel: [m, s]  # <-
          next: b
        m:
          run: {shell: echo m}
        s:
          sequence: [m]
        """), "$.states.a.parallel[1]", "s]",
        "parallel member 's' must be a leaf (no sequence, parallel or loop)"),
        id="p5-group-member-is-sequence"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]  # <-
          next: b
        m:
          run: {shell: echo m}
          loop: {max: 2}
        """), "$.states.a.parallel[0]", "m]", "parallel member 'm' must be a leaf"),
        id="p5-group-member-has-loop"),
    # issue 18: at the member's own next:, the key a person deletes
    pytest.param(Rule(states("""
        a:
          parallel: [m]
          next: b
        m:
          run: {shell: echo m}
          next: b  # <-
        """), "$.states.m.next", "next",
        "parallel member 'm' of group 'a' must not have next or transitions; the group owns the barrier edge"),
        id="p5-group-member-has-next"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]
          next: b
        m:
          run: {shell: echo m}
          transitions: [{goto: b}]  # <-
        """), "$.states.m.transitions", "transitions", "must not have next or transitions"),
        id="p5-group-member-has-transitions"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]  # <-
          next: b
        m:
          run: {shell: echo m}
          terminal: true
        """), "$.states.a.parallel[0]", "m]", "parallel member 'm' must not be terminal"),
        id="p5-group-member-terminal"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]
          maxConcurrency: 0  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.maxConcurrency", "0", "maxConcurrency must be in 1..64, got 0"),
        id="p5-group-max-concurrency-zero"),
    pytest.param(Rule(states("""
        a:
          parallel: [m]
          maxConcurrency: 65  # <-
          next: b
        m:
          run: {shell: echo m}
        """), "$.states.a.maxConcurrency", "65", "maxConcurrency must be in 1..64, got 65"),
        id="p5-group-max-concurrency-65"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          parallelCount: 1  # <-
          next: b
        """), "$.states.a.parallelCount", "1", "parallelCount is allowed only together with parallel"),
        id="p5-parallel-count-without-parallel"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          maxConcurrency: 1  # <-
          next: b
        """), "$.states.a.maxConcurrency", "1",
        "maxConcurrency is allowed only together with parallel"),
        id="p5-max-concurrency-without-parallel"),
    # -- phase 5: triggers, tools, work, loop bound --------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          trigger: {pollSeconds: 5}  # <-
          next: b
        """), "$.states.a.trigger", "{pollSeconds", "trigger.uri is required"),
        id="p5-trigger-uri-required"),
    pytest.param(Rule(states("""
        a:
          trigger: {uri: "s3://x/"}  # <-
          next: b
        """), "$.states.a.trigger", "{uri", "a state with a trigger also needs run or toolRef"),
        id="p5-trigger-without-work"),
    pytest.param(Rule(states("""
        a:
          toolRef: workbench.sim2real.run  # <-
          next: b
        """), "$.states.a.toolRef", "workbench.sim2real.run",
        "unknown toolRef 'workbench.sim2real.run' (known: "),
        id="p5-unknown-tool-ref"),
    pytest.param(Rule(states("""
        a:
          description: nothing to do  # <-
        """), "$.states.a", "description", "state does nothing"),
        id="p5-state-does-nothing"),
    pytest.param(Rule(states("""
        a:
          run: {}  # <-
          next: b
        """), "$.states.a.run", "{}", "empty run block"),
        id="p5-empty-run-block"),
    pytest.param(Rule(states("""
        a:
          run: {shell: "   "}  # <-
          next: b
        """), "$.states.a.run", "{shell", "empty run block"),
        id="p5-blank-shell-run-block"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          next: c
        c:
          terminal: true  # <-
        """), "$.states.c", "terminal", "terminal state has no work"),
        id="p5-terminal-without-work"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          loop: {max: 0}  # <-
          next: b
        """), "$.states.a.loop.max", "0}", "loop.max must be >= 1, got 0"),
        id="p5-loop-max-zero"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          loop: {max: config.nope}  # <-
          next: b
        """), "$.states.a.loop.max", "config.nope", "config has no attribute 'nope'"),
        id="p5-loop-max-config-missing"),
    # -- phase 6: profiles ----------------------------------------------------
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "resources:\n  gpu:\n    accelerators: H100:0  # <-\n"),
                      "$.resources.gpu.accelerators", "H100:0",
                      "accelerator count must be >= 1, got 0"),
                 id="p6-accelerator-count-zero"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "resources:\n  gpu:\n    accelerators: {H100: 0}  # <-\n"),
                      "$.resources.gpu.accelerators.H100", "0}",
                      "accelerator count must be >= 1, got 0"),
                 id="p6-accelerator-map-count-zero"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "resources:\n  gpu:\n    num_nodes: 0  # <-\n"),
                      "$.resources.gpu.num_nodes", "0", "num_nodes must be in 1..32, got 0"),
                 id="p6-num-nodes-zero"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "resources:\n  gpu:\n    num_nodes: 33  # <-\n"),
                      "$.resources.gpu.num_nodes", "33", "num_nodes must be in 1..32, got 33"),
                 id="p6-num-nodes-33"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n",
                             HEADER + "resources:\n  gpu:\n    num_nodes: true  # <-\n"),
                      "$.resources.gpu.num_nodes", "true", "num_nodes must be an integer, not a bool"),
                 id="p6-num-nodes-bool"),
    # -- phase 7: executable states -----------------------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          resources: gpux  # <-
          next: b
        """), "$.states.a.resources", "gpux", "unknown resource profile 'gpux'"),
        id="p7-unknown-resource-profile"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          resources: gpu  # <-
          next: b
        """, HEADER + "resources:\n  gpu:\n    num_nodes: 2\n"), "$.states.a.resources", "gpu",
        "not declared sharded; identical workers could duplicate or race output writers"),
        id="p7-num-nodes-not-sharded"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          writesDecision: true  # <-
          next: b
        """), "$.states.a.writesDecision", "true",
        "no decision URI (declare an output whose schema contains 'decision' "
        "or set config.decision_uri)"),
        id="p7-writes-decision-without-uri"),
    # -- phase 8: graph -------------------------------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          needs: [c]  # <-
          next: c
        c:
          run: {shell: echo c}
          needs: [a]
          next: b
        """), "$.states.a.needs", "[c]", "cycle detected in needs among states (at a)"),
        id="p8-needs-cycle"),
    pytest.param(Rule(HEADER + "states:\n  a:  # <-\n    run: {shell: echo a}\n", "$.states",
                      "a:", "workflow must declare at least one terminal: true state"),
                 id="p8-no-terminal-state"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}  # <-
          next: c
        c:
          run: {shell: echo c}
          transitions:
            - {when: loop_back, goto: a}
            - {goto: b}
        """), "$.states.a", "run", "unbounded control-flow cycle detected: a -> c -> a"),
        id="p8-control-flow-cycle"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          terminal: true
        c:  # <-
          run: {shell: echo c}
          next: b
        """), "$.states.c", "c:", "unreachable from initial 'a'"),
        id="p8-unreachable-state"),
    # -- phase 9: tokens ---------------------------------------------------------
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n", HEADER.replace(
        "  root_uri: s3://b/r", '  root_uri: "s3://{{config.bucket}}/r"  # <-')),
        "$.config.root_uri", '"s3://', "config has no key 'bucket'"),
        id="p9-config-string-missing-key"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n", HEADER.replace(
        "  root_uri: s3://b/r", '  root_uri: "{{state.a.uri}}/r"  # <-')),
        "$.config.root_uri", '"{{state', "state.* tokens are not allowed in config"),
        id="p9-config-string-state-token"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n", HEADER.replace(
        "  root_uri: s3://b/r", '  root_uri: "s3://b/{{loop.a}}"  # <-')),
        "$.config.root_uri", '"s3://', "loop.* tokens are not allowed in config"),
        id="p9-config-string-loop-token"),
    pytest.param(Rule(states("a:\n  run: {shell: echo a}\n  next: b\n", HEADER.replace(
        "  root_uri: s3://b/r", "  root_uri: s3://b/r\n  plan_assume_decision: maybe  # <-")),
        "$.config.plan_assume_decision", "maybe", "unknown decision 'maybe'"),
        id="p9-plan-assume-decision-not-allowed"),
    pytest.param(Rule(states("""
        a:
          run: {argv: [echo, "{{config.nope}}"]}  # <-
          next: b
        """), "$.states.a.run.argv[1]", "{{config.nope}}", "config has no key 'nope'"),
        id="p9-argv-unknown-config-key"),
    pytest.param(Rule(states("""
        a:
          toolRef: workbench.sim2real.check_trigger  # <-
          next: b
        """), "$.states.a.toolRef", "workbench", "config has no key 'trigger_uri'"),
        id="p9-tool-template-unknown-config-key"),
    pytest.param(Rule(states("""
        a:
          run: {shell: "echo {{run.owner}}"}  # <-
          next: b
        """), "$.states.a.run.shell", "{{run.owner}}", "run has no key 'owner'"),
        id="p9-shell-unknown-run-key"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          outputs:
            - {uri: "s3://x/{{loop.nope}}"}  # <-
          next: b
        """), "$.states.a.outputs[0].uri", "{{loop.nope}}", "no loop named 'nope'"),
        id="p9-output-unknown-loop"),
    pytest.param(Rule(states("""
        a:
          run: {shell: "echo {{config.root_uri|upper}}"}  # <-
          next: b
        """), "$.states.a.run.shell", "{{config.root_uri|upper}}", "unknown transform 'upper'"),
        id="p9-unknown-transform"),
    pytest.param(Rule(states("""
        a:
          run: {argv: [echo, "{{state.c.uri}}"]}  # <-
          next: c
        c:
          run: {shell: echo c}
          outputs: [{uri: "s3://x/c"}]
          next: b
        """), "$.states.a.run.argv[1]", '"{{state.c.uri}}"',
        "state 'c' has not run before this point"),
        id="p9-state-token-runs-later"),
    pytest.param(Rule(states("""
        a:
          run: {argv: [echo, "{{state.zz.uri}}"]}  # <-
          next: b
        """), "$.states.a.run.argv[1]", "{{state.zz.uri}}", "'zz'"),
        id="p9-state-token-unknown-state"),
    # -- planning guard (npa-infra adds) -----------------------------------------
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: b}
            - {goto: c}
        c:
          run: {shell: echo c}  # <-
        """), "$.states.c", "run", "plan ends at a non-terminal state"),
        id="guard-non-terminal-dead-end"),
    pytest.param(Rule(states("""
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: b}  # <-
        """), "$.states.a.transitions", "- {", "no transition matches decision"),
        id="guard-no-transition-matches"),
]
# fmt: on


@pytest.mark.parametrize("rule", RULES)
def test_load_validated_rule_violation_reports_located_issue(rule: Rule) -> None:
    issue = issues_of(rule.text)[0]
    assert issue.path == rule.path
    assert rule.message in issue.message
    assert (issue.line, issue.column) == marker(rule.text, rule.snippet)


@pytest.mark.parametrize("rule", RULES)
def test_load_validated_rule_violation_issue_has_one_line_hint(rule: Rule) -> None:
    # dsl.md §4.2: every error carries a one-line hint saying how to fix it.
    issue = issues_of(rule.text)[0]
    assert issue.hint.strip()
    assert "\n" not in issue.hint


@pytest.mark.parametrize("rule", RULES)
def test_load_validated_state_issue_names_its_state(rule: Rule) -> None:
    issue = issues_of(rule.text)[0]
    if issue.path.startswith("$.states."):
        assert issue.state == issue.path.removeprefix("$.states.").split(".")[0].split("[")[0]
    else:
        assert issue.state is None


# -- file phase -----------------------------------------------------------------


def test_load_validated_missing_file_raises_file_level_issue(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_validated(tmp_path / "absent.yaml", BUILTIN)
    (issue,) = err.value.issues
    assert issue.message.startswith("spec file not found")


def test_load_validated_invalid_yaml_raises_single_located_issue() -> None:
    text = HEADER + "states:\n  a: {run: [\n"
    (issue,) = issues_of(text)
    assert issue.path == "$"
    assert issue.message.startswith("invalid YAML")
    assert issue.line >= 7


def test_load_validated_empty_text_reports_not_a_mapping() -> None:
    (issue,) = issues_of("")
    assert issue.path == "$"
    assert issue.message == "spec must be a mapping, got null"


# -- metadata (dsl.md §1.2) ---------------------------------------------------------


def test_load_validated_unknown_metadata_field_reports_metadata_path() -> None:
    # dsl.md §1.2: "an error of the form `$.metadata: unknown field(s): 'x'`".
    text = states(
        "a:\n  run: {shell: echo a}\n  next: b\n",
        HEADER.replace("  name: t", "  name: t\n  owner: me  # <-\n  team: x"),
    )
    issue = issues_of(text)[0]
    assert issue.message == "unknown field(s): 'owner', 'team'"
    assert (issue.line, issue.column) == marker(text, "owner")
    assert issue.path == "$.metadata"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("runtime", ExecutionMode.RUNTIME), (None, None)],
    ids=["runtime", "absent"],
)
def test_load_validated_execution_mode_allowed_value_is_parsed(
    value: str | None, expected: ExecutionMode | None
) -> None:
    header = (
        HEADER
        if value is None
        else HEADER.replace("  name: t", f"  name: t\n  executionMode: {value}")
    )
    spec = validate(states("a:\n  run: {shell: echo a}\n  next: b\n", header)).spec
    assert spec.metadata.execution_mode == expected


@pytest.mark.parametrize(
    ("value", "snippet"),
    [("batch", "batch"), ("3", "3"), ("[runtime]", "[runtime]")],
    ids=["unknown-word", "int", "list"],
)
def test_load_validated_execution_mode_other_value_names_runtime(value: str, snippet: str) -> None:
    # dsl.md §1.2: any value other than `runtime` is a located error naming `runtime`.
    header = HEADER.replace("  name: t", f"  name: t\n  executionMode: {value}  # <-")
    text = states("a:\n  run: {shell: echo a}\n  next: b\n", header)
    issue = issues_of(text)[0]
    assert issue.path == "$.metadata.executionMode"
    assert (issue.line, issue.column) == marker(text, snippet)
    assert "runtime" in issue.message + issue.hint


def test_load_validated_execution_mode_planned_is_accepted() -> None:
    # The foundation issue allows `executionMode: planned|runtime` (it wins over dsl.md §1.2).
    header = HEADER.replace("  name: t", "  name: t\n  executionMode: planned")
    text = states("a:\n  run: {shell: echo a}\n  next: b\n", header)
    validated = load_validated("spec.yaml", BUILTIN, text=text)
    assert validated.spec.metadata.execution_mode == "planned"


# -- several independent errors ------------------------------------------------------


def test_load_validated_independent_errors_all_reported_in_reference_order() -> None:
    text = states(
        """
        a:
          toolRef: workbench.nope.tool
          next: q
        """,
        HEADER.replace("  name: t", "  name: t\n  owner: me"),
    )
    issues = issues_of(text)
    paths = [i.path for i in issues]
    assert len(issues) >= 3
    assert paths[0].startswith("$.metadata")
    assert "unknown field(s): 'owner'" in issues[0].message
    assert "$.states.a.next" in paths
    assert "$.states.a.toolRef" in paths
    # phase 5 references come before the tool check
    assert paths.index("$.states.a.next") < paths.index("$.states.a.toolRef")


def test_load_validated_errors_in_two_states_both_reported() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          loop: {max: 0}
          next: c
        c:
          run: {}
          next: b
        """
    )
    paths = {i.path for i in issues_of(text)}
    assert {"$.states.a.loop.max", "$.states.c.run"} <= paths


def test_load_validated_parse_error_reported_before_semantic_error() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          params: [1]
          next: q
        """
    )
    paths = [i.path for i in issues_of(text)]
    assert paths[:2] == ["$.states.a.params", "$.states.a.next"]


# -- warnings ------------------------------------------------------------------


def test_load_validated_unknown_state_key_warns_not_errors() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          colour: blue  # <-
          next: b
        """
    )
    validated = validate(text)
    (warning,) = validated.warnings
    assert warning.path == "$.states.a.colour"
    assert warning.state == "a"
    assert "'colour'" in warning.message
    assert (warning.line, warning.column) == marker(text, "colour")


def test_load_validated_clean_spec_has_no_warnings() -> None:
    validated = validate((TESTING / "linear-chain.yaml").read_text())
    assert validated.warnings == []
    assert validated.spec.name == "linear-chain"


@pytest.mark.parametrize(
    "alias",
    ["tool_ref", "writes_decision", "multi_node_mode"],
    ids=["tool_ref", "writes_decision", "multi_node_mode"],
)
def test_load_validated_snake_case_alias_is_accepted_without_warning(alias: str) -> None:
    field = {
        "tool_ref": "tool_ref: workbench.rerun.report",
        "writes_decision": "writes_decision: true\n  outputs: [{uri: s3://x/d, schema: t.decision.v1}]",
        "multi_node_mode": "multi_node_mode: sharded",
    }[alias]
    # toolRef and run are mutually exclusive (issue 18): the tool_ref case has no run
    work = "" if alias == "tool_ref" else "run: {shell: echo a}\n  "
    text = states(f"a:\n  {work}{field}\n  next: b\n")
    assert validate(text).warnings == []


# -- --var merge and re-validation (dsl.md §2.4) ----------------------------------------


def test_load_validated_var_changing_parallel_count_fails_only_with_var() -> None:
    text = (TESTING / "parallel-fanout.yaml").read_text()
    validate(text)
    issues = issues_of(text, {"shard_count": "2"})
    assert issues[0].path == "$.states.envgen.parallelCount"
    assert issues[0].message.startswith("parallelCount resolves to 2, but the group declares 3")
    line = text.splitlines()[issues[0].line - 1]
    assert line.strip().startswith("parallelCount:")


def test_load_validated_var_supplies_missing_config_key() -> None:
    text = states('a:\n  run: {argv: [echo, "{{config.bucket}}"]}\n  next: b\n')
    issues_of(text)
    spec = validate(text, {"bucket": "real-bucket"}).spec
    assert spec.config["bucket"] == "real-bucket"


def test_load_validated_var_bucket_reaches_every_uri() -> None:
    text = (TESTING / "linear-chain.yaml").read_text()
    spec = validate(text, {"bucket": "prod-bucket"}).spec
    plan = planner.build_plan(spec, BUILTIN, run_id="r1")
    uris = [o["uri"] for s in plan.steps for o in (*s.inputs, *s.outputs)]
    assert uris
    assert all("prod-bucket" in u and "example-bucket" not in u for u in uris)


# -- decisions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop"],
    ids=["promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop"],
)
def test_load_validated_plan_assume_decision_allowed_value_passes(value: str) -> None:
    header = HEADER.replace(
        "  root_uri: s3://b/r", f"  root_uri: s3://b/r\n  plan_assume_decision: {value}"
    )
    validate(states("a:\n  run: {shell: echo a}\n  next: b\n", header))


def test_load_validated_bad_plan_assume_decision_reported_with_other_errors_first() -> None:
    # dsl.md §4.2 table: the check sits in phase 2, so it precedes phase 5
    # errors and is reported together with them. Product bug: it runs only in
    # the token phase, which is skipped whenever an earlier phase failed.
    header = HEADER.replace(
        "  root_uri: s3://b/r", "  root_uri: s3://b/r\n  plan_assume_decision: maybe"
    )
    paths = [i.path for i in issues_of(states("a:\n  run: {shell: echo a}\n  next: q\n", header))]
    assert paths[0] == "$.config.plan_assume_decision"
    assert "$.states.a.next" in paths


# -- state.* references (dsl.md §2.3) --------------------------------------------------------


def test_load_validated_state_token_on_one_branch_only_errors_at_referrer() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          transitions:
            - {when: promote_checkpoint, goto: p}
            - {goto: f}
        p:
          run: {shell: echo p}
          outputs: [{uri: "s3://x/p"}]
          next: f
        f:
          run: {argv: [echo, "{{state.p.uri}}"]}  # <-
          next: b
        """
    )
    issues = issues_of(text)
    assert [i.path for i in issues] == ["$.states.f.run.argv[1]"]
    assert "state 'p' has not run before this point" in issues[0].message
    assert (issues[0].line, issues[0].column) == marker(text, '"{{state.p.uri}}"')
    assert issues[0].state == "f"


def test_load_validated_state_token_of_earlier_state_passes() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          outputs: [{uri: "s3://x/a"}, {uri: "s3://x/a2"}]
          next: c
        c:
          run: {argv: [echo, "{{state.a.uri}}", "{{state.a.output_2}}"]}
          next: b
        """
    )
    validate(text)


def test_load_validated_state_token_output_index_out_of_range_errors() -> None:
    text = states(
        """
        a:
          run: {shell: echo a}
          outputs: [{uri: "s3://x/a"}]
          next: c
        c:
          run: {argv: [echo, "{{state.a.output_2}}"]}  # <-
          next: b
        """
    )
    issue = issues_of(text)[0]
    assert issue.path == "$.states.c.run.argv[1]"
    assert "output_2" in issue.message


def test_load_validated_config_token_error_points_at_config_key_line() -> None:
    header = HEADER.replace(
        "  root_uri: s3://b/r",
        '  root_uri: s3://b/r\n  a: "{{config.b}}"\n  b: "{{config.missing}}"  # <-',
    )
    text = states("a:\n  run: {shell: echo a}\n  next: b\n", header)
    issue = issues_of(text)[0]
    assert issue.path in ("$.config.a", "$.config.b")
    assert "missing" in issue.message


# -- writesDecision, num_nodes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "header_extra"),
    [
        ("outputs: [{uri: s3://x/d.json, schema: npa.test.Decision.v1}]", ""),
        ("params: {decision_uri: s3://x/d.json}", ""),
        ("", "\n  decision_uri: s3://x/d.json"),
    ],
    ids=["decision-schema-output", "params-decision-uri", "config-decision-uri"],
)
def test_load_validated_writes_decision_with_uri_passes(extra: str, header_extra: str) -> None:
    header = HEADER.replace("  root_uri: s3://b/r", "  root_uri: s3://b/r" + header_extra)
    body = (
        "a:\n  run: {shell: echo a}\n  writesDecision: true\n"
        + (f"  {extra}\n" if extra else "")
        + "  next: b\n"
    )
    validate(states(body, header))


NUM_NODES = HEADER.replace("  root_uri: s3://b/r", '  root_uri: s3://b/r\n  gpu_num_nodes: "1"') + (
    'resources:\n  gpu:\n    num_nodes: "{{config.gpu_num_nodes}}"\n'
)


def test_load_validated_sharded_state_may_use_multi_node_profile() -> None:
    validate((TESTING / "multinode-sharded.yaml").read_text())


def test_load_validated_multi_node_profile_without_sharded_fails() -> None:
    text = (
        (TESTING / "multinode-sharded.yaml").read_text().replace("    multiNodeMode: sharded\n", "")
    )
    issue = issues_of(text)[0]
    assert issue.path == "$.states.sharded-work.resources"
    assert "num_nodes 2" in issue.message


def test_load_validated_num_nodes_token_from_var_requires_sharded() -> None:
    text = states("a:\n  run: {shell: echo a}\n  resources: gpu\n  next: b\n", NUM_NODES)
    validate(text)
    issue = issues_of(text, {"gpu_num_nodes": "2"})[0]
    assert issue.path == "$.states.a.resources"
    assert "not declared sharded" in issue.message


def test_load_validated_num_nodes_token_from_params_requires_sharded() -> None:
    # dsl.md §1.4: profile tokens resolve with the state's params; §4.1 phase 7:
    # num_nodes > 1 needs multiNodeMode: sharded. Product bug: params are ignored.
    text = states(
        'a:\n  run: {shell: echo a}\n  resources: gpu\n  params: {gpu_num_nodes: "2"}\n  next: b\n',
        NUM_NODES,
    )
    issue = issues_of(text)[0]
    assert issue.path == "$.states.a.resources"
    assert "not declared sharded" in issue.message


def test_load_validated_num_nodes_token_out_of_range_fails() -> None:
    # dsl.md §1.4: num_nodes is 1..32. Product bug: a token resolving to 40 passes.
    text = states(
        "a:\n  run: {shell: echo a}\n  resources: gpu\n  multiNodeMode: sharded\n  next: b\n",
        NUM_NODES.replace('gpu_num_nodes: "1"', 'gpu_num_nodes: "40"'),
    )
    issue = issues_of(text)[0]
    assert "num_nodes" in issue.message


def test_load_validated_infinite_accelerator_count_reports_issue() -> None:
    # Product bug: int(float('inf')) raises OverflowError out of validate._profiles.
    text = states(
        "a:\n  run: {shell: echo a}\n  next: b\n",
        HEADER + "resources:\n  gpu:\n    accelerators: {H100: .inf}  # <-\n",
    )
    issue = issues_of(text)[0]
    assert issue.path == "$.resources.gpu.accelerators.H100"
    assert (issue.line, issue.column) == marker(text, ".inf")


def test_load_validated_deep_sequence_nesting_reports_issue() -> None:
    # dsl.md §4.2: no input produces a traceback. Product bug: 600 nested
    # sequences (a ~20 KB spec) raise RecursionError from the planner.
    n = 600
    body = "".join(f"s{i}:\n  sequence: [s{i + 1}]\n" for i in range(n))
    body = body.replace("s0:\n", "s0:\n  terminal: true\n", 1) + f"s{n}:\n  run: {{shell: echo}}\n"
    text = HEADER + "states:\n" + textwrap.indent(body, "  ")
    try:
        spec = validate(text).spec
    except SpecError as err:
        assert all(i.path.startswith("$") for i in err.issues)
    else:
        plan = planner.build_plan(spec, BUILTIN, run_id="r")
        assert [s.state for s in plan.steps] == [f"s{n}"]


# -- loop.max forms (dsl.md §1.3) ------------------------------------------------------------------

LOOP_HEADER = HEADER.replace("  root_uri: s3://b/r", '  root_uri: s3://b/r\n  k: "3"\n  n: 3')


@pytest.mark.parametrize(
    "form",
    ["3", '"3"', "config.k", '"{{config.k}}"', '"{{ config.k }}"', "config.n"],
    ids=["int", "digit-string", "config-ref", "whole-token", "token-with-spaces", "config-int"],
)
def test_load_validated_loop_max_form_resolves_to_three_iterations(form: str) -> None:
    text = states(
        f"a:\n  run: {{shell: echo a}}\n  loop: {{max: {form}}}\n  next: b\n", LOOP_HEADER
    )
    plan = planner.build_plan(validate(text).spec, BUILTIN, run_id="r")
    assert [(s.state, s.iteration) for s in plan.steps] == [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("b", None),
    ]


@pytest.mark.parametrize(
    ("form", "snippet"),
    [
        ('"three"', '"three"'),
        ("config.missing", "config.missing"),
        ('"{{config.k}}x"', '"{{config.k}}x"'),
        ('"-1"', '"-1"'),
        ("true", "true"),
        ("[3]", "[3]"),
    ],
    ids=["word", "missing-config", "token-with-suffix", "negative-string", "bool", "list"],
)
def test_load_validated_loop_max_bad_form_errors_at_loop_max(form: str, snippet: str) -> None:
    text = states(
        f"a:\n  run: {{shell: echo a}}\n  loop: {{max: {form}}}  # <-\n  next: b\n", LOOP_HEADER
    )
    issue = issues_of(text)[0]
    assert issue.path == "$.states.a.loop.max"
    assert (issue.line, issue.column) == marker(text, snippet)


def test_load_validated_loop_max_from_var_is_revalidated() -> None:
    text = states("a:\n  run: {shell: echo a}\n  loop: {max: config.k}\n  next: b\n", LOOP_HEADER)
    issue = issues_of(text, {"k": "0"})[0]
    assert issue.path == "$.states.a.loop.max"
    assert issue.message == "loop.max must be >= 1, got 0"


# -- triggers (dsl.md §1.3) ----------------------------------------------------------------------

TRIGGER_HEADER = HEADER.replace("  root_uri: s3://b/r", '  root_uri: s3://b/r\n  poll: "5"')


def _trigger_spec(poll: str) -> str:
    return states(
        f"""
        a:
          run: {{shell: echo a}}
          trigger:
            uri: "{{{{config.root_uri}}}}/inbox/"
            pollSeconds: {poll}  # <-
          next: b
        """,
        TRIGGER_HEADER,
    )


def test_load_validated_trigger_with_token_number_passes_and_plans_uri() -> None:
    spec = validate(_trigger_spec('"{{config.poll}}"')).spec
    plan = planner.build_plan(spec, BUILTIN, run_id="r")
    assert plan.steps[0].trigger_uri == "s3://b/r/inbox/"


def test_load_validated_trigger_number_resolves_after_var_merge() -> None:
    text = _trigger_spec('"{{config.poll}}"')
    issue = issues_of(text, {"poll": "0"})[0]
    assert issue.path == "$.states.a.trigger.pollSeconds"
    assert issue.message == "trigger.pollSeconds must be >= 1, got 0"
    assert (issue.line, issue.column) == marker(text, '"{{config.poll}}"')


@pytest.mark.parametrize(
    "poll",
    ['"soon"', '"{{config.nope}}"', "1.5", "[1]"],
    ids=["word", "missing-config", "float", "list"],
)
def test_load_validated_trigger_number_not_integer_errors(poll: str) -> None:
    text = _trigger_spec(poll)
    issue = issues_of(text)[0]
    assert issue.path == "$.states.a.trigger.pollSeconds"
    assert "trigger.pollSeconds must" in issue.message


def test_load_validated_trigger_defaults_apply_when_numbers_absent() -> None:
    text = states('a:\n  run: {shell: echo a}\n  trigger: {uri: "s3://x/"}\n  next: b\n')
    trigger = validate(text).spec.states["a"].trigger
    assert trigger is not None
    assert (trigger.poll_seconds, trigger.max_polls, trigger.min_objects) == (30, 0, 1)


# -- reference-order files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in TESTING.glob("*.yaml") if p.name != "raw-skypilot.yaml"),
)
def test_load_validated_testing_workflow_is_valid(name: str) -> None:
    validated = validate((TESTING / name).read_text())
    assert validated.spec.initial == next(iter(validated.spec.states))
