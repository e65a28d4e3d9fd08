"""Accelerator resolution against a catalog (kubernetes.md §8.3, §8.4; runtime-reference.md §14)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.gpus import catalog, resolve
from npa_infra.gpus.resolve import Verdict
from npa_infra.kube.models import NodeInfo, Taint
from npa_infra.plan.model import Plan, PlanStep
from tests.strategies import accelerator_requests, gpu_node_lists

GFD = "nvidia.com/gpu.product"
NEBIUS = "nebius.com/gpu-name"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"


def node(name: str, labels: dict[str, str], gpus: int = 1, **kw: object) -> NodeInfo:
    return NodeInfo(
        name,
        labels,
        tuple(kw.get("taints", ())),  # type: ignore[arg-type]  # test helper: a tuple of Taint
        bool(kw.get("ready", True)),
        bool(kw.get("unschedulable", False)),
        gpus,
    )


@pytest.fixture
def rtxpro_race() -> catalog.GpuCatalog:
    """One node fully labelled by the GPU operator, one still carrying only the Nebius label."""
    return catalog.build(
        "nebius-prod",
        [
            node("gpu-a", {NEBIUS: "RTX6000", GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}),
            node("gpu-b", {NEBIUS: "RTX6000"}),
        ],
    )


@pytest.fixture
def h100() -> catalog.GpuCatalog:
    return catalog.build(
        "h100-ctx",
        [
            node("small", {GFD: "NVIDIA-H100-80GB-HBM3"}, 1),
            node("cordoned", {GFD: "NVIDIA-H100-80GB-HBM3"}, 8, unschedulable=True),
        ],
    )


@pytest.mark.parametrize(
    "request_text",
    [
        "RTXPRO6000:1",
        "RTX6000:1",
        "rtxpro-6000:1",
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition:1",
    ],
    ids=["rtxpro6000", "rtx6000", "lower-dashed", "raw-label"],
)
def test_resolve_alias_group_remapped_to_gfd_name(
    rtxpro_race: catalog.GpuCatalog, request_text: str
) -> None:
    res = resolve.resolve_accelerator(request_text, rtxpro_race)

    assert res.verdict is Verdict.REMAPPED
    assert res.resolved == f"{RTXPRO}:1"
    assert res.display() == f"remapped → {RTXPRO}"


def test_resolve_labelling_race_never_emits_rtx6000(rtxpro_race: catalog.GpuCatalog) -> None:
    res = resolve.resolve_accelerator("RTX6000:1", rtxpro_race)

    assert res.accelerator == RTXPRO
    assert "RTX6000" not in rtxpro_race.names


def test_resolve_exact_name_satisfiable(rtxpro_race: catalog.GpuCatalog) -> None:
    res = resolve.resolve_accelerator(f"{RTXPRO}:1", rtxpro_race)

    assert res.verdict is Verdict.SATISFIABLE
    assert res.resolved == f"{RTXPRO}:1"


def test_resolve_bare_name_keeps_count_implicit(rtxpro_race: catalog.GpuCatalog) -> None:
    res = resolve.resolve_accelerator("RTXPRO6000", rtxpro_race)

    assert (res.verdict, res.resolved, res.count) == (Verdict.REMAPPED, RTXPRO, None)


def test_resolve_gfd_canonical_name_satisfiable(h100: catalog.GpuCatalog) -> None:
    assert resolve.resolve_accelerator("H100-80GB:1", h100).verdict is Verdict.SATISFIABLE


def test_resolve_case_and_punctuation_differ_remapped(h100: catalog.GpuCatalog) -> None:
    res = resolve.resolve_accelerator("h100_80gb:1", h100)

    assert (res.verdict, res.resolved) == (Verdict.REMAPPED, "H100-80GB:1")


def test_resolve_cordoned_8_gpu_node_exceeds_per_node(h100: catalog.GpuCatalog) -> None:
    res = resolve.resolve_accelerator("H100-80GB:8", h100)

    assert res.verdict is Verdict.EXCEEDS_PER_NODE
    assert res.per_node == 1
    assert res.resolved is None
    assert "at most 1 H100-80GB GPU(s) per node" in res.message
    assert "npa workbench workflow gpus --cluster h100-ctx" in res.message


def test_resolve_no_execute_only_node_exceeds_with_zero() -> None:
    taint = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
    cat = catalog.build("c", [node("n", {GFD: "NVIDIA-B200"}, 8, taints=(taint,))])

    res = resolve.resolve_accelerator("B200:1", cat)

    assert res.verdict is Verdict.EXCEEDS_PER_NODE
    assert res.per_node == 0
    assert "per-node quantity 0" in res.message


@pytest.mark.parametrize(
    "request_text",
    ["H100:1", "H100-80:1", "H10080GB-HBM3:1", "A100-80GB:1", "RTXPRO6000:1"],
    ids=["prefix", "truncated", "near-miss", "other-gpu", "alias-absent"],
)
def test_resolve_no_fuzzy_matching_unsatisfiable(
    h100: catalog.GpuCatalog, request_text: str
) -> None:
    res = resolve.resolve_accelerator(request_text, h100)

    assert res.verdict is Verdict.UNSATISFIABLE
    assert res.resolved is None
    assert "advertised: H100-80GB" in res.message


def test_resolve_rtx6000_ada_not_in_alias_group_unsatisfiable() -> None:
    cat = catalog.build("c", [node("n", {GFD: "NVIDIA-RTX-6000-Ada-Generation"}, 4)])

    assert cat.names == ("RTX6000-ADA-GENERATION",)
    assert resolve.resolve_accelerator("RTXPRO6000:1", cat).verdict is Verdict.UNSATISFIABLE


def test_resolve_unsatisfiable_names_not_yet_labelled_nodes() -> None:
    cat = catalog.build(
        "c", [node("a", {GFD: "NVIDIA-B200"}, 8), node("b", {NEBIUS: "RTX6000"}, 1)]
    )

    res = resolve.resolve_accelerator("RTXPRO6000:1", cat)

    assert res.verdict is Verdict.UNSATISFIABLE
    assert "b are not yet labelled with nvidia.com/gpu.product" in res.message
    assert "npa workbench workflow gpus --cluster c" in res.remedy


def test_resolve_two_alias_members_under_one_key_ambiguous() -> None:
    cat = catalog.build(
        "c",
        [
            node("a", {GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}),
            node("b", {GFD: "RTX-PRO-6000"}),
        ],
    )

    res = resolve.resolve_accelerator("RTX6000:1", cat)

    assert res.verdict is Verdict.AMBIGUOUS
    assert res.resolved is None


def test_resolve_exact_match_preferred_over_alias_group() -> None:
    cat = catalog.build(
        "c",
        [
            node("a", {GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}),
            node("b", {GFD: "RTX-PRO-6000"}),
        ],
    )

    res = resolve.resolve_accelerator("RTXPRO-6000:1", cat)

    assert (res.verdict, res.resolved) == (Verdict.SATISFIABLE, "RTXPRO-6000:1")


@pytest.mark.parametrize(
    "request_text",
    ["", ":1", "H100-80GB:0", "H100-80GB:x", "H100-80GB:1.5", "H100-80GB:-1"],
    ids=["empty", "no-name", "zero", "word", "fraction", "negative"],
)
def test_resolve_malformed_request_unsatisfiable(
    h100: catalog.GpuCatalog, request_text: str
) -> None:
    res = resolve.resolve_accelerator(request_text, h100)

    assert res.verdict is Verdict.UNSATISFIABLE
    assert res.remedy == "write NAME:N, e.g. H100:1"


@given(nodes=gpu_node_lists(), request=accelerator_requests())
@example(nodes=[], request="RTX6000:1")
def test_resolve_property_deterministic_and_only_catalog_names(
    nodes: list[NodeInfo], request: str
) -> None:
    cat = catalog.build("ctx", nodes)

    first = resolve.resolve_accelerator(request, cat)
    again = resolve.resolve_accelerator(request, catalog.build("ctx", list(nodes)))

    assert first == again
    assert first.accelerator is None or first.accelerator in cat.names
    if first.verdict.ok:
        assert first.resolved is not None
        assert (first.resolved.rpartition(":")[0] or first.resolved) in cat.names
        assert (first.per_node or 0) >= (first.count or 1)
    else:
        assert first.resolved is None
    if first.verdict is Verdict.SATISFIABLE:
        assert first.accelerator == first.name


@given(nodes=gpu_node_lists())
def test_build_property_race_never_exposes_hidden_nodes(nodes: list[NodeInfo]) -> None:
    cat = catalog.build("ctx", nodes)

    listed = {n.name for a in cat.accelerators for n in a.nodes}
    assert listed.isdisjoint(cat.not_yet_labelled)
    if cat.label_key == GFD:
        assert all(a.label_key == GFD for a in cat.accelerators)
    for acc in cat.accelerators:
        eligible = [n.gpus for n in acc.nodes if n.eligible]
        assert acc.requestable_qty_per_node == max(eligible, default=0)


def _step(state: str, profile: dict[str, object]) -> PlanStep:
    return PlanStep(state, None, "", "", (), "echo", "", "gpu", dict(profile), (), ())


def _plan(*steps: PlanStep) -> Plan:
    return Plan("wf", "npa.workflow/v0.0.1", steps[0].state, "run", "", steps)


def test_remap_plan_accelerators_maps_old_to_new(rtxpro_race: catalog.GpuCatalog) -> None:
    steps = [
        _step("train", {"cloud": "kubernetes", "accelerators": "RTXPRO6000:1"}),
        _step("eval", {"cloud": "kubernetes", "accelerators": {"RTX6000": 1}}),
        _step("exact", {"cloud": "kubernetes", "accelerators": f"{RTXPRO}:1"}),
        _step("cpu", {"cloud": "kubernetes", "cpus": 2}),
    ]

    assert resolve.remap_plan_accelerators(steps, rtxpro_race) == {
        "RTXPRO6000:1": f"{RTXPRO}:1",
        "RTX6000:1": f"{RTXPRO}:1",
    }


def test_apply_remap_rewrites_string_and_mapping_forms(rtxpro_race: catalog.GpuCatalog) -> None:
    plan = _plan(
        _step("train", {"cloud": "kubernetes", "accelerators": "RTXPRO6000:1", "cpus": 8}),
        _step("eval", {"accelerators": {"RTX6000": 1}}),
        _step("vm", {"cloud": "nebius", "accelerators": "RTXPRO6000:1"}),
    )
    mapping = resolve.remap_plan_accelerators(plan.steps, rtxpro_race)

    out = resolve.apply_remap(plan, mapping)

    assert out.steps[0].resources_profile == {
        "cloud": "kubernetes",
        "accelerators": f"{RTXPRO}:1",
        "cpus": 8,
    }
    assert out.steps[1].resources_profile["accelerators"] == {RTXPRO: 1}
    assert out.steps[2].resources_profile["accelerators"] == "RTXPRO6000:1"
    assert plan.steps[0].resources_profile["accelerators"] == "RTXPRO6000:1"


def test_resolve_steps_one_entry_per_state_and_request(h100: catalog.GpuCatalog) -> None:
    step = _step("train", {"cloud": "kubernetes", "accelerators": "H100-80GB:1"})
    again = step._replace(iteration=2)

    items = resolve.resolve_steps([step, again], h100)

    assert [i.to_json() for i in items] == [
        {
            "state": "train",
            "requested": "H100-80GB:1",
            "resolved": "H100-80GB:1",
            "verdict": "satisfiable",
        }
    ]


@given(request=st.text(max_size=30))
def test_resolve_property_arbitrary_text_never_raises(request: str) -> None:
    cat = catalog.build("c", [node("n", {GFD: "NVIDIA-B200"}, 8)])

    assert resolve.resolve_accelerator(request, cat).verdict in set(Verdict)
