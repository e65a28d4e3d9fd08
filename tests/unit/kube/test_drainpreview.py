"""The drain preview's decision (kubernetes.md §7): a table of budgets, then its properties.

No cluster: the inputs are the adapter's records. The table walks every
branch of the rule chain; hypothesis checks that the decision is total, that
``blocks`` is exactly the rule of §7.2, and that pods a drain does not evict
never change a verdict.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from npa_infra.kube import drainpreview
from npa_infra.kube.drainpreview import Reason
from npa_infra.kube.models import (
    BudgetStatus,
    DisruptionBudget,
    LabelSelector,
    NodePod,
    SelectorRequirement,
)
from tests import strategies

WEB = LabelSelector(match_labels=(("app", "web"),))


def _pods(ready: int, *, unhealthy: int = 0, pending: int = 0, ns: str = "team-a") -> list[NodePod]:
    pods = [NodePod(f"r{i}", ns, "n1", (("app", "web"),)) for i in range(ready)]
    pods += [NodePod(f"u{i}", ns, "n1", (("app", "web"),), ready=False) for i in range(unhealthy)]
    pods += [
        NodePod(f"p{i}", ns, "n1", (("app", "web"),), phase="Pending", ready=False)
        for i in range(pending)
    ]
    return pods


def _budget(
    status: tuple[int, int, int, int] | None,
    *,
    selector: LabelSelector | None = WEB,
    generation: int = 1,
    observed: int | None = 1,
    name: str = "web",
    namespace: str = "team-a",
    **spec: Any,
) -> DisruptionBudget:
    current, desired, allowed, expected = status or (0, 0, 0, 0)
    return DisruptionBudget(
        name=name,
        namespace=namespace,
        selector=selector,
        generation=generation,
        status=None
        if status is None
        else BudgetStatus(current, desired, allowed, expected, observed),
        **spec,
    )


@pytest.mark.parametrize(
    ("budget", "pods", "reason"),
    [
        (_budget((3, 0, 0, 0), selector=None, min_available=1), _pods(3), Reason.NULL_SELECTOR),
        (_budget((0, 1, 0, 0), min_available=1), [], Reason.NO_MATCHING_PODS),
        (_budget((0, 0, 0, 0), min_available=1), _pods(0, pending=2), Reason.NO_MATCHING_PODS),
        (_budget(None, min_available=1), _pods(2), Reason.STATUS_NOT_OBSERVED),
        (
            _budget((2, 1, 1, 2), min_available=1, generation=2, observed=1),
            _pods(2),
            Reason.STATUS_NOT_OBSERVED,
        ),
        (_budget((3, 3, 0, 3), max_unavailable=0), _pods(3), Reason.MAX_UNAVAILABLE_ZERO),
        (_budget((3, 3, 0, 3), max_unavailable="0%"), _pods(3), Reason.MAX_UNAVAILABLE_ZERO),
        (_budget((3, 0, 0, 0), max_unavailable=1), _pods(3), Reason.NO_EXPECTED_PODS),
        (_budget((3, 3, 0, 3), min_available=3), _pods(3), Reason.MIN_AVAILABLE_ALL_PODS),
        (_budget((3, 3, 0, 3), min_available="100%"), _pods(3), Reason.MIN_AVAILABLE_ALL_PODS),
        (
            _budget((2, 2, 0, 3), min_available=2),
            _pods(2, unhealthy=1),
            Reason.NO_DISRUPTIONS_ALLOWED,
        ),
        (_budget((3, 1, 2, 3), min_available=1), _pods(3), Reason.EXCEEDS_DISRUPTIONS_ALLOWED),
        (_budget((4, 3, 1, 3), max_unavailable=0), _pods(4), Reason.EXCEEDS_DISRUPTIONS_ALLOWED),
        (_budget((3, 2, 1, 2), min_available="100%"), _pods(3), Reason.EXCEEDS_DISRUPTIONS_ALLOWED),
        (
            _budget((1, 2, 0, 3), min_available=2),
            _pods(0, unhealthy=2),
            Reason.UNHEALTHY_PODS_PROTECTED,
        ),
        (
            _budget((1, 2, 0, 3), min_available=2, unhealthy_pod_eviction_policy="AlwaysAllow"),
            _pods(0, unhealthy=2),
            Reason.WITHIN_BUDGET,
        ),
        (_budget((3, 1, 2, 3), min_available=1), _pods(2), Reason.WITHIN_BUDGET),
    ],
    ids=[
        "null-selector",
        "no-pods",
        "only-pending-pods",
        "no-status",
        "stale-generation",
        "max-unavailable-0",
        "max-unavailable-0-percent",
        "unmanaged-pods-expected-0",
        "min-available-equals-pods",
        "min-available-100-percent",
        "disruptions-allowed-0",
        "more-ready-than-allowed",
        "max-unavailable-0-extra-pod",
        "min-100-percent-scale-below-pods",
        "unhealthy-protected",
        "unhealthy-always-allow",
        "fits",
    ],
)
def test_judge_budget_table_reason_and_blocks(
    budget: DisruptionBudget, pods: list[NodePod], reason: Reason
) -> None:
    verdict = drainpreview.judge(budget, pods)

    assert verdict.reason is reason
    assert verdict.blocks is (reason in drainpreview.BLOCKING)
    assert verdict.note


def test_judge_exceeds_note_counts_the_waiting_pods() -> None:
    verdict = drainpreview.judge(_budget((5, 3, 2, 5), min_available=3), _pods(5))

    assert (verdict.matching_ready_pods, verdict.disruptions_allowed) == (5, 2)
    assert "2 of 5 ready pods can be evicted at once; the other 3 wait" in verdict.note


def test_preview_system_budget_reported_not_exempt() -> None:
    coredns = _budget(
        (2, 2, 0, 2),
        name="coredns",
        namespace="kube-system",
        min_available=2,
        selector=LabelSelector((("k8s-app", "kube-dns"),)),
    )
    pods = [
        NodePod(f"coredns-{i}", "kube-system", "n1", (("k8s-app", "kube-dns"),)) for i in (1, 2)
    ]

    result = drainpreview.preview(["n1"], pods, [coredns])

    [verdict] = result.budgets
    assert verdict.system and verdict.blocks and result.blocking == 1
    assert "npa-infra only reports it" in verdict.note


def test_preview_skips_daemonset_mirror_terminating_and_other_nodes() -> None:
    skipped = [
        NodePod("ds", "team-a", "n1", (("app", "web"),), daemonset=True),
        NodePod("mirror", "team-a", "n1", (("app", "web"),), mirror=True),
        NodePod("leaving", "team-a", "n1", (("app", "web"),), deleting=True),
        NodePod("far", "team-a", "other-cluster-node", (("app", "web"),)),
        NodePod("other-ns", "team-b", "n1", (("app", "web"),)),
    ]

    result = drainpreview.preview(["n1"], skipped, [_budget((0, 1, 0, 0), min_available=1)])

    assert result.budgets[0].reason is Reason.NO_MATCHING_PODS
    assert (result.skipped_daemonset_pods, result.skipped_mirror_pods) == (1, 1)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (None, None),
        (LabelSelector(), ""),
        (
            LabelSelector(
                (("tier", "a"), ("app", "web")),
                (
                    SelectorRequirement("zone", "In", ("b", "a")),
                    SelectorRequirement("legacy", "DoesNotExist"),
                    SelectorRequirement("canary", "NotIn", ("yes",)),
                    SelectorRequirement("owner", "Exists"),
                ),
            ),
            "app=web,tier=a,zone in (a,b),!legacy,canary notin (yes),owner",
        ),
    ],
    ids=["null", "empty", "full"],
)
def test_format_selector_canonical_text(selector: LabelSelector | None, text: str | None) -> None:
    assert drainpreview.format_selector(selector) == text


def test_matches_empty_selector_every_pod_unknown_operator_none() -> None:
    assert drainpreview.matches(LabelSelector(), ())
    odd = LabelSelector(match_expressions=(SelectorRequirement("app", "Gt", ("1",)),))
    assert not drainpreview.matches(odd, (("app", "2"),))


def _rule_blocks(budget: DisruptionBudget, pods: list[NodePod]) -> bool:
    """kubernetes.md §7.2, written the plain way."""
    mine = [
        p
        for p in pods
        if p.namespace == budget.namespace and drainpreview.matches(budget.selector, p.labels)
    ]
    ready = sum(p.ready for p in mine)
    unhealthy = sum(1 for p in mine if not p.ready and p.phase == "Running")
    if budget.selector is None or ready + unhealthy == 0:
        return False
    status = budget.status
    if status is None or (status.observed_generation or 0) < budget.generation:
        return True
    protected = (budget.unhealthy_pod_eviction_policy or "IfHealthyBudget") != "AlwaysAllow"
    return ready > status.disruptions_allowed or (
        unhealthy > 0 and protected and status.current_healthy < status.desired_healthy
    )


@given(strategies.drain_worlds())
def test_preview_any_world_total_and_blocks_exactly_by_the_rule(world: dict[str, Any]) -> None:
    result = drainpreview.preview(world["nodes"], world["pods"], world["budgets"])

    evicted = [
        p
        for p in world["pods"]
        if p.node_name in world["nodes"] and not (p.daemonset or p.mirror or p.deleting)
    ]
    ordered = sorted(world["budgets"], key=lambda b: (b.namespace, b.name))
    assert [(v.namespace, v.name) for v in result.budgets] == [
        (b.namespace, b.name) for b in ordered
    ]
    for budget, verdict in zip(ordered, result.budgets, strict=True):
        assert verdict.blocks is _rule_blocks(budget, evicted)
        assert verdict.blocks is (verdict.reason in drainpreview.BLOCKING)
    assert result.blocking == sum(v.blocks for v in result.budgets)
    assert drainpreview.DrainPreview.model_validate_json(result.model_dump_json()) == result


@given(strategies.drain_worlds())
def test_preview_pods_the_drain_skips_never_change_a_verdict(world: dict[str, Any]) -> None:
    before = drainpreview.preview(world["nodes"], world["pods"], world["budgets"])
    extra = [
        NodePod(
            "ds-x", b.namespace, world["nodes"][0], (("app", "a"), ("tier", "a")), daemonset=True
        )
        for b in world["budgets"]
    ] + [NodePod("far-x", "team-a", "not-in-cluster", (("app", "a"),))]

    after = drainpreview.preview(world["nodes"], [*world["pods"], *extra], world["budgets"])

    assert [v.model_dump(exclude={"note"}) for v in after.budgets] == [
        v.model_dump(exclude={"note"}) for v in before.budgets
    ]
