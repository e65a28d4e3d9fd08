"""The state-machine graph of a spec and its Mermaid and DOT text (issue 18)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.plan import graph, graphtext, planner, waves
from npa_infra.plan.graph import END, START, Cluster, EdgeKind, Graph, Node, NodeKind
from npa_infra.spec.model import Spec
from npa_infra.workflow.planning.loading import load_validated
from tests import strategies
from tests.support import graphparse

REPO = Path(__file__).resolve().parents[3]
SPECS = sorted(
    p
    for d in (REPO / "workflows" / "testing", REPO / "workflows" / "main")
    for p in d.glob("*.yaml")
    if p.name != "raw-skypilot.yaml"  # a raw SkyPilot task, not an npa.workflow spec
)
IDS = [p.stem for p in SPECS]


def _spec(path: Path) -> Spec:
    return load_validated(path, BUILTIN).spec


def _graph(path: Path, *, with_waves: bool = False) -> Graph:
    spec = _spec(path)
    plan = planner.build_plan(spec, BUILTIN, run_id="g")
    grouped = waves.compute(plan) if with_waves else None
    return graph.build(spec, config=plan.config, waves=grouped)


def _by_state(g: Graph) -> dict[str, str]:
    return {n.state: n.id for n in g.nodes if n.state}


def _edges(g: Graph) -> set[tuple[str, str, EdgeKind]]:
    return {(e.source, e.target, e.kind) for e in g.edges}


def _members(clusters: tuple[Cluster, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for c in clusters:
        found.update({n: c.id for n in c.nodes})
        found.update(_members(c.clusters))
    return found


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_build_every_shipped_spec_node_per_state_and_edges_match_spec(path: Path) -> None:
    spec = _spec(path)
    g = _graph(path)
    ids = _by_state(g)
    edges = _edges(g)

    assert set(ids) == set(spec.states)
    assert len({n.id for n in g.nodes}) == len(g.nodes)
    assert (START, ids[spec.initial], EdgeKind.START) in edges
    inside = _members(g.clusters)
    for name, state in spec.states.items():
        if not state.is_group:
            if state.next:
                assert (ids[name], ids[state.next], EdgeKind.NEXT) in edges
            for tr in state.transitions:
                assert (ids[name], ids[tr.goto], EdgeKind.TRANSITION) in edges
            if state.terminal:
                assert (ids[name], END, EdgeKind.END) in edges
        for member in state.parallel:
            assert (ids[name], ids[member], EdgeKind.FORK) in edges
            assert inside[ids[member]] == "c_" + ids[name][2:]
        if state.sequence:
            assert (ids[name], ids[state.sequence[0]], EdgeKind.ENTER) in edges
        if state.sequence and state.loop is not None:
            assert any(t == ids[name] and k is EdgeKind.LOOP_BACK for _, t, k in edges)
    for e in g.edges:
        assert g.node(e.source) and g.node(e.target)


def test_build_sim2real_nested_clusters_loops_and_fan_in() -> None:
    g = _graph(REPO / "workflows" / "main" / "sim2real.yaml")
    edges = {(e.source, e.target, e.kind): e.label for e in g.edges}

    (fanout, rounds) = g.clusters
    assert (fanout.kind, fanout.nodes[0]) == (NodeKind.PARALLEL, "s_envgen_fanout")
    assert rounds.kind is NodeKind.LOOP
    assert [c.label for c in rounds.clusters] == ["training-pass"]
    assert [c.label for c in rounds.clusters[0].clusters] == ["score-lanes"]
    # both shards fan in to split; both scoring lanes fan in to ppo-update
    assert ("s_envgen_shard_0", "s_split", EdgeKind.NEXT) in edges
    assert ("s_envgen_shard_1", "s_split", EdgeKind.NEXT) in edges
    assert ("s_score_secondary", "s_ppo_update", EdgeKind.ORDER) in edges
    assert edges[("s_verdict", "s_improvement_round", EdgeKind.LOOP_BACK)] == "next iteration"
    assert edges[("s_ppo_update", "s_training_pass", EdgeKind.LOOP_BACK)] == "next iteration"
    assert edges[("s_improvement_round", "s_record_lineage", EdgeKind.NEXT)] == "done"
    assert ("s_training_pass", "s_heldout_eval", EdgeKind.ORDER) in edges
    assert g.node("s_improvement_round").label[1] == "loop max 3 until promote_checkpoint"
    assert g.node("s_envgen_fanout").label[1] == "parallel x2, at most 2 at once"


def test_build_loop_decision_transitions_labelled_by_decision() -> None:
    g = _graph(REPO / "workflows" / "testing" / "loop-decision.yaml")
    labels = {(e.source, e.target): e.label for e in g.edges if e.kind is EdgeKind.TRANSITION}

    assert g.node("s_route").kind is NodeKind.DECISION
    assert labels == {
        ("s_route", "s_publish"): "promote_checkpoint",
        ("s_route", "s_escalate"): "loop_back",
    }
    assert "writes decision" in g.node("s_decide").label


def test_build_with_waves_labels_each_running_node_with_its_waves() -> None:
    g = _graph(REPO / "workflows" / "main" / "sim2real.yaml", with_waves=True)

    assert g.node("s_check_trigger").label[-1] == "wave 00"
    assert g.node("s_envgen_fanout").label[-1] == "wave 02"
    assert g.node("s_envgen_shard_1").label[-1] == "wave 02"
    assert g.node("s_rollouts").label[-1] == "waves 04, 07, 12, 15, ... (6 waves)"
    assert not g.node("s_improvement_round").label[-1].startswith("wave")


def test_build_ids_colliding_after_sanitising_stay_distinct() -> None:
    assert graph._ids(["a-b", "a_b", "a.b"]) == {"a-b": "s_a_b", "a_b": "s_a_b_2", "a.b": "s_a_b_3"}


@pytest.mark.parametrize("path", SPECS, ids=IDS)
@pytest.mark.parametrize("fmt", graphtext.FORMATS)
def test_render_every_shipped_spec_parses_back_to_the_model(path: Path, fmt: str) -> None:
    g = _graph(path, with_waves=True)
    parse = graphparse.parse_mermaid if fmt == "mermaid" else graphparse.parse_dot

    parsed = parse(graphtext.render(g, fmt))

    assert parsed.nodes == {n.id: n.label for n in g.nodes}
    assert parsed.edges == [(e.source, e.target, e.label) for e in g.edges]
    prefix = "" if fmt == "mermaid" else "cluster_"
    assert {k: v.removeprefix(prefix) for k, v in parsed.parent.items() if k in parsed.nodes} == (
        _members(g.clusters)
    )


def test_render_unknown_format_raises_value_error() -> None:
    with pytest.raises(ValueError, match="svg"):
        graphtext.render(_graph(SPECS[0]), "svg")


def _hostile(label: str) -> Graph:
    nodes = (
        Node(START, NodeKind.START, ("start",)),
        Node("s_a", NodeKind.DECISION, (label, label + "]")),
        Node("s_b", NodeKind.TASK, ('"' + label,), "b"),
        Node(END, NodeKind.END, ("end",)),
    )
    edges = (
        graph.Edge(START, "s_a", EdgeKind.START),
        graph.Edge("s_a", "s_b", EdgeKind.TRANSITION, label),
        graph.Edge("s_b", END, EdgeKind.LOOP_BACK, "|" + label),
    )
    return Graph(label, nodes, edges, (Cluster("c_b", label, NodeKind.SEQUENCE, ("s_b",)),))


@given(strategies.graph_labels())
def test_render_any_label_parses_back_to_the_same_nodes_and_labels(label: str) -> None:
    g = _hostile(label)
    for fmt, parse in (("mermaid", graphparse.parse_mermaid), ("dot", graphparse.parse_dot)):
        parsed = parse(graphtext.render(g, fmt))

        assert parsed.nodes == {n.id: n.label for n in g.nodes}, fmt
        assert parsed.edges == [(e.source, e.target, e.label) for e in g.edges], fmt
        assert list(parsed.clusters.values()) == [label], fmt


@pytest.fixture
def graphviz() -> None:
    """graphviz's ``dot`` (``make test`` installs it): skipped without it, failed under CI."""
    if shutil.which("dot") is None:
        message = "graphviz is not installed (apt-get install -y graphviz; make graph-tools)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _graphviz_nodes(text: str) -> set[str]:
    result = subprocess.run(
        ["dot", "-Tplain"], input=text, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return {ln.split()[1].strip('"') for ln in result.stdout.splitlines() if ln.startswith("node ")}


@pytest.mark.usefixtures("graphviz")
@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_dot_every_shipped_spec_laid_out_by_graphviz_with_every_node(path: Path) -> None:
    g = _graph(path, with_waves=True)

    assert _graphviz_nodes(graphtext.dot(g)) == {n.id for n in g.nodes}


@pytest.mark.usefixtures("graphviz")
def test_dot_hostile_labels_laid_out_by_graphviz() -> None:
    g = _hostile('a"b\\c&amp;d{e}<f>\n|g; \\"')

    assert _graphviz_nodes(graphtext.dot(g)) == {n.id for n in g.nodes}
