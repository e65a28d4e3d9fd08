"""Which PodDisruptionBudgets hold up draining every node of a cluster (kubernetes.md §7).

Pure: ``preview(nodes, pods, budgets)`` reads the records the adapter returns
(``NodeInfo`` names, ``NodePod``, ``DisruptionBudget``) and does no I/O. It is
advisory (§7.3): a drain evicts every pod of every node through the eviction
API, which refuses (429) an eviction its budget does not allow, and the
drainer retries until it does. Knowing which budgets will refuse, and why,
makes a multi-minute drain expected rather than alarming.

**Pods a drain evicts** (§7.1): pods bound to one of the nodes, minus
DaemonSet-owned pods and mirror pods (a drain skips them) and pods already
being deleted. Of a budget's matching pods (its namespace, its selector; an
empty selector matches every pod of the namespace, a null one none):

- *ready*: the ``Ready`` condition holds; these evictions are checked against
  ``status.disruptionsAllowed``;
- *unhealthy*: ``Running`` but not ready; the eviction API lets them go unless
  the budget protects them (§7.2). Pending and finished pods are evicted
  without consulting any budget, so they count for neither.

**When a budget blocks** (§7.2), first match wins, each branch citing its rule
in ``_judge``. The reference removes the kube-system budgets
``cilium-operator``, ``coredns``, ``coredns-autoscaler`` and ``metrics-server``
for a full cluster destroy; npa-infra only reports them (``system``, §7.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from npa_infra.kube.models import DisruptionBudget, LabelSelector, NodePod

__all__ = [
    "BLOCKING",
    "SYSTEM_BUDGETS",
    "BudgetVerdict",
    "DrainPreview",
    "Reason",
    "format_selector",
    "judge",
    "matches",
    "preview",
]

# kubernetes.md §7.3: what the reference's full destroy removes for the drain.
SYSTEM_BUDGETS = frozenset(
    ("kube-system", name)
    for name in ("cilium-operator", "coredns", "coredns-autoscaler", "metrics-server")
)
ALWAYS_ALLOW = "AlwaysAllow"


class Reason(StrEnum):
    """Why a budget does or does not hold up the drain; the values are the JSON ``reason``."""

    NULL_SELECTOR = "null_selector"
    NO_MATCHING_PODS = "no_matching_pods"
    STATUS_NOT_OBSERVED = "status_not_observed"
    MAX_UNAVAILABLE_ZERO = "max_unavailable_zero"
    NO_EXPECTED_PODS = "no_expected_pods"
    MIN_AVAILABLE_ALL_PODS = "min_available_all_pods"
    NO_DISRUPTIONS_ALLOWED = "no_disruptions_allowed"
    EXCEEDS_DISRUPTIONS_ALLOWED = "exceeds_disruptions_allowed"
    UNHEALTHY_PODS_PROTECTED = "unhealthy_pods_protected"
    WITHIN_BUDGET = "within_budget"


BLOCKING = frozenset(
    {
        Reason.STATUS_NOT_OBSERVED,
        Reason.MAX_UNAVAILABLE_ZERO,
        Reason.NO_EXPECTED_PODS,
        Reason.MIN_AVAILABLE_ALL_PODS,
        Reason.NO_DISRUPTIONS_ALLOWED,
        Reason.EXCEEDS_DISRUPTIONS_ALLOWED,
        Reason.UNHEALTHY_PODS_PROTECTED,
    }
)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BudgetVerdict(_Model):
    """One budget in ``cluster down --json`` (``budgets[]``)."""

    name: str
    namespace: str
    selector: str | None  # the canonical selector text; "" matches all, None (null) none
    matching_ready_pods: int
    unhealthy_pods: int
    disruptions_allowed: int | None  # None: no status written yet
    blocks: bool
    reason: Reason
    note: str
    system: bool


class DrainPreview(_Model):
    """Every budget's verdict, in (namespace, name) order, and the pods the drain skips."""

    nodes: int
    budgets: tuple[BudgetVerdict, ...]
    skipped_daemonset_pods: int
    skipped_mirror_pods: int

    @property
    def blocking(self) -> int:
        return sum(1 for b in self.budgets if b.blocks)


def _requirement_text(key: str, operator: str, values: Sequence[str]) -> str:
    listed = ",".join(sorted(values))
    forms = {"In": f"{key} in ({listed})", "NotIn": f"{key} notin ({listed})"}
    forms |= {"Exists": key, "DoesNotExist": f"!{key}"}
    return forms.get(operator, f"{key} {operator} ({listed})")


def format_selector(selector: LabelSelector | None) -> str | None:
    """The selector as label-selector text (``app=web,tier in (a,b),!legacy``); None stays None."""
    if selector is None:
        return None
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels)]
    parts += [_requirement_text(*e) for e in selector.match_expressions]
    return ",".join(parts)


def matches(selector: LabelSelector | None, labels: Iterable[tuple[str, str]]) -> bool:
    """policy/v1 selector semantics: null matches nothing, empty everything (kubernetes.md §7.1)."""
    if selector is None:
        return False
    have = dict(labels)
    if any(have.get(k) != v for k, v in selector.match_labels):
        return False
    for key, operator, values in selector.match_expressions:
        present = key in have
        if operator == "In":
            ok = present and have[key] in values
        elif operator == "NotIn":
            ok = not present or have[key] not in values
        elif operator in ("Exists", "DoesNotExist"):
            ok = present == (operator == "Exists")
        else:
            ok = False  # the API rejects other operators; never guess a match
        if not ok:
            return False
    return True


def _zero(value: int | str | None) -> bool:
    return value == 0 or value == "0%"


def _judge(budget: DisruptionBudget, ready: int, unhealthy: int) -> tuple[Reason, str]:
    """The reason and its note for one budget, given its ready and unhealthy matching pods."""
    # kubernetes.md §7.1: a null selector matches no pod.
    if budget.selector is None:
        return Reason.NULL_SELECTOR, "selects no pods (null selector); never holds up a drain"
    # §7.2: nothing of it runs on the nodes, so no eviction consults it.
    if ready == 0 and unhealthy == 0:
        return Reason.NO_MATCHING_PODS, "no pod it protects runs on these nodes"
    status = budget.status
    # The eviction API refuses (429) while the controller has not observed the current spec.
    if status is None or (status.observed_generation or 0) < budget.generation:
        return Reason.STATUS_NOT_OBSERVED, (
            "the disruption controller has not processed this budget yet: every eviction it "
            "covers is refused until it has"
        )
    allowed = status.disruptions_allowed
    waiting = ready - allowed
    # §7.2: more ready matching pods than disruptions allowed, and none allowed now.
    if ready > allowed == 0:
        if _zero(budget.max_unavailable):
            return Reason.MAX_UNAVAILABLE_ZERO, (
                f"maxUnavailable is 0: none of its {ready} ready pods may be evicted; the drain "
                "waits on it until the budget is changed or removed"
            )
        if status.expected_pods == 0:
            return Reason.NO_EXPECTED_PODS, (
                "the disruption controller counts none of its pods (no controller owns them), "
                "so no eviction is allowed; the drain waits on it until the budget is changed "
                "or removed"
            )
        if budget.min_available is not None and status.desired_healthy >= status.expected_pods:
            return Reason.MIN_AVAILABLE_ALL_PODS, (
                f"minAvailable covers all {status.expected_pods} pods: each of the {ready} "
                "evictions waits until a replacement pod is ready on a node that is not draining"
            )
        return Reason.NO_DISRUPTIONS_ALLOWED, (
            f"no disruption allowed now: each of the {ready} evictions waits until a "
            "replacement pod is ready elsewhere"
        )
    # §7.2: more ready matching pods than disruptions allowed.
    if ready > allowed:
        return Reason.EXCEEDS_DISRUPTIONS_ALLOWED, (
            f"{allowed} of {ready} ready pods can be evicted at once; the other {waiting} wait "
            "until replacement pods are ready elsewhere"
        )
    # §7.2: unhealthy pods are protected unless the policy is AlwaysAllow.
    policy = budget.unhealthy_pod_eviction_policy or "IfHealthyBudget"
    if unhealthy and policy != ALWAYS_ALLOW and status.current_healthy < status.desired_healthy:
        return Reason.UNHEALTHY_PODS_PROTECTED, (
            f"{unhealthy} unhealthy pods are protected ({policy}, currentHealthy "
            f"{status.current_healthy} < desiredHealthy {status.desired_healthy}): they are "
            "evicted only once the budget is healthy again"
        )
    return Reason.WITHIN_BUDGET, (
        f"its {ready} ready pods fit in the {allowed} disruptions allowed"
        if ready
        else "its pods are evicted without waiting"
    )


def judge(budget: DisruptionBudget, pods: Iterable[NodePod]) -> BudgetVerdict:
    """The verdict on one budget, ``pods`` being the pods the drain evicts."""
    matching = [
        p for p in pods if p.namespace == budget.namespace and matches(budget.selector, p.labels)
    ]
    ready = sum(1 for p in matching if p.ready)
    unhealthy = sum(1 for p in matching if not p.ready and p.phase == "Running")
    reason, note = _judge(budget, ready, unhealthy)
    system = (budget.namespace, budget.name) in SYSTEM_BUDGETS
    if system:
        note += (
            "; the reference's full cluster destroy removes this kube-system budget for the "
            "drain and restores it on abort, npa-infra only reports it"
        )
    return BudgetVerdict(
        name=budget.name,
        namespace=budget.namespace,
        selector=format_selector(budget.selector),
        matching_ready_pods=ready,
        unhealthy_pods=unhealthy,
        disruptions_allowed=None if budget.status is None else budget.status.disruptions_allowed,
        blocks=reason in BLOCKING,
        reason=reason,
        note=note,
        system=system,
    )


def preview(
    nodes: Iterable[str], pods: Iterable[NodePod], budgets: Iterable[DisruptionBudget]
) -> DrainPreview:
    """The preview of draining every node in ``nodes`` (kubernetes.md §7)."""
    names = frozenset(nodes)
    on_nodes = [p for p in pods if p.node_name in names]
    evicted = [p for p in on_nodes if not (p.daemonset or p.mirror or p.deleting)]
    ordered = sorted(budgets, key=lambda b: (b.namespace, b.name))
    return DrainPreview(
        nodes=len(names),
        budgets=tuple(judge(b, evicted) for b in ordered),
        skipped_daemonset_pods=sum(1 for p in on_nodes if p.daemonset),
        skipped_mirror_pods=sum(1 for p in on_nodes if p.mirror and not p.daemonset),
    )
