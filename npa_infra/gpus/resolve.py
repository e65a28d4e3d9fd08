"""Decide whether a cluster can run ``NAME:N`` and under which name (kubernetes.md §8.3, §8.4).

One ordered chain per request: the exact normalised name (or raw label
value) first, then the RTX PRO 6000 alias group, never anything fuzzier.
A match whose name differs from the request is *remapped* to the name
SkyPilot matches on the cluster; ``N`` above the per-node requestable
quantity is a permanent refusal, because SkyPilot never spreads a pod's GPUs
over nodes. The result only ever names an accelerator of the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from npa_infra.gpus import labels
from npa_infra.gpus.catalog import Accelerator, GpuCatalog
from npa_infra.plan.model import Plan, PlanStep

__all__ = [
    "Resolution",
    "StepResolution",
    "Verdict",
    "accelerator_request",
    "apply_remap",
    "gpu_requests",
    "gpus_command",
    "remap_plan_accelerators",
    "resolve_accelerator",
    "resolve_steps",
]

_COUNT = re.compile(r"^[0-9]+$")
_KUBERNETES_CLOUDS = ("", "kubernetes", "k8s")


class Verdict(StrEnum):
    SATISFIABLE = "satisfiable"  # the cluster advertises the requested name itself
    REMAPPED = "remapped"  # same GPU, advertised under another name
    UNSATISFIABLE = "unsatisfiable"  # no exact or alias match
    EXCEEDS_PER_NODE = "exceeds_per_node"  # N above the per-node requestable quantity
    AMBIGUOUS = "ambiguous"  # several different accelerators match

    @property
    def ok(self) -> bool:
        return self in (Verdict.SATISFIABLE, Verdict.REMAPPED)


def gpus_command(context: str) -> str:
    return f"npa workbench workflow gpus --cluster {context}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The verdict for one request; ``resolved`` is what to render when the verdict is ok."""

    requested: str
    name: str
    count: int | None  # None: no ``:N`` given (SkyPilot's default is 1)
    verdict: Verdict
    accelerator: str | None  # the matched catalog name, when one matched
    per_node: int | None  # its per-node requestable quantity
    message: str
    remedy: str

    @property
    def resolved(self) -> str | None:
        if not self.verdict.ok or self.accelerator is None:
            return None
        return self.accelerator if self.count is None else f"{self.accelerator}:{self.count}"

    def display(self) -> str:
        """``satisfiable``, ``remapped → NAME`` or the failure verdict (cli.md §1.9)."""
        if self.verdict is Verdict.REMAPPED:
            return f"remapped → {self.accelerator}"
        return self.verdict.value


def _parse(request: str) -> tuple[str, int | None, str]:
    """Name, count and a problem (empty when the request is well formed)."""
    text = request.strip()
    name, sep, count = text.rpartition(":")
    if not sep:
        return text, None, "" if text else "the accelerator name is empty"
    if not name.strip():
        return "", None, "the accelerator name is empty"
    if not _COUNT.match(count.strip()) or int(count) < 1:
        return name.strip(), None, f"the GPU count {count!r} is not a positive integer"
    return name.strip(), int(count), ""


def _candidates(catalog: GpuCatalog, norm: str) -> list[Accelerator]:
    exact = [
        a for a in catalog.accelerators if norm in (a.canonical, labels.normalise(a.label_value))
    ]
    if exact or norm not in labels.ALIAS_GROUP:
        return exact
    return [
        a
        for a in catalog.accelerators
        if a.canonical in labels.ALIAS_GROUP
        or labels.normalise(a.label_value) in labels.ALIAS_GROUP
    ]


def _unsatisfiable(request: str, name: str, count: int | None, catalog: GpuCatalog) -> Resolution:
    ctx = catalog.context
    offered = ", ".join(catalog.names) or "none"
    message = f"context '{ctx}' advertises no GPU matching {name!r} (advertised: {offered})"
    remedy = f"use an advertised name, or see `{gpus_command(ctx)}`"
    if catalog.not_yet_labelled:
        message += (
            f"; GPU node(s) {', '.join(catalog.not_yet_labelled)} are not yet labelled with "
            f"{catalog.label_key or 'a GPU label SkyPilot reads'}"
        )
        remedy = f"wait for the GPU operator to finish labelling, then check `{gpus_command(ctx)}`"
    return _failed(request, name, count, Verdict.UNSATISFIABLE, message=message, remedy=remedy)


def _failed(
    request: str,
    name: str,
    count: int | None,
    verdict: Verdict,
    *,
    message: str,
    remedy: str,
    accelerator: str | None = None,
    per_node: int | None = None,
) -> Resolution:
    return Resolution(request, name, count, verdict, accelerator, per_node, message, remedy)


def resolve_accelerator(request: str, catalog: GpuCatalog) -> Resolution:
    """Resolve ``NAME:N`` (or ``NAME``) against ``catalog``; total, deterministic, never raises."""
    name, count, problem = _parse(request)
    ctx = catalog.context
    if problem:
        return _failed(
            request,
            name,
            count,
            Verdict.UNSATISFIABLE,
            message=f"invalid accelerator request {request!r}: {problem}",
            remedy="write NAME:N, e.g. H100:1",
        )
    norm = labels.normalise(name)
    candidates = _candidates(catalog, norm) if norm else []
    names = list(dict.fromkeys(a.name for a in candidates))
    if not names:
        return _unsatisfiable(request, name, count, catalog)
    if len(names) > 1:
        # runtime-reference.md §14: several different matches are a permanent error.
        return _failed(
            request,
            name,
            count,
            Verdict.AMBIGUOUS,
            message=f"{name!r} matches several GPUs on context '{ctx}': {', '.join(names)}",
            remedy=f"request one of them by its exact name; see `{gpus_command(ctx)}`",
        )
    target = names[0]
    per_node = max(a.requestable_qty_per_node for a in candidates if a.name == target)
    needed = 1 if count is None else count
    if needed > per_node:
        # kubernetes.md §8.4: all of a pod's GPUs must fit on one eligible node.
        where = (
            f"at most {per_node} {target} GPU(s) per node are requestable"
            if per_node
            else f"no eligible node offers {target} (per-node quantity 0)"
        )
        return _failed(
            request,
            name,
            count,
            Verdict.EXCEEDS_PER_NODE,
            accelerator=target,
            per_node=per_node,
            message=f"{request} needs {needed} GPU(s) on one node, but on context '{ctx}' "
            f"{where}; see `{gpus_command(ctx)}`",
            remedy=f"request {target}:{per_node} or fewer per step"
            if per_node
            else f"make a {target} node schedulable, then check `{gpus_command(ctx)}`",
        )
    verdict = Verdict.SATISFIABLE if target == name else Verdict.REMAPPED
    message = (
        f"{name} is advertised on context '{ctx}'"
        if verdict is Verdict.SATISFIABLE
        else f"{name} is advertised as {target} on context '{ctx}'"
    )
    return Resolution(request, name, count, verdict, target, per_node, message, "")


def accelerator_request(profile: Mapping[str, Any]) -> str | None:
    """A profile's ``accelerators`` as ``NAME:N``/``NAME`` text, or None when it has none."""
    raw = profile.get("accelerators")
    if raw is None or raw == "" or raw == {}:
        return None
    if isinstance(raw, Mapping):
        name, count = next(iter(raw.items()))
        return f"{name}:{count}"
    return str(raw)


def _kubernetes(profile: Mapping[str, Any]) -> bool:
    return str(profile.get("cloud") or "").strip().lower() in _KUBERNETES_CLOUDS


@dataclass(frozen=True, slots=True)
class StepResolution:
    """One GPU state's verdict, as the plan-only JSON lists it."""

    state: str
    resolution: Resolution

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "requested": self.resolution.requested,
            "resolved": self.resolution.resolved,
            "verdict": self.resolution.verdict.value,
        }


def gpu_requests(steps: Iterable[PlanStep]) -> list[tuple[str, str]]:
    """Distinct (state, request) pairs of the Kubernetes GPU steps, in plan order."""
    pairs: dict[tuple[str, str], None] = {}
    for step in steps:
        request = accelerator_request(step.resources_profile)
        if request is not None and _kubernetes(step.resources_profile):
            pairs[(step.state, request)] = None
    return list(pairs)


def resolve_steps(steps: Iterable[PlanStep], catalog: GpuCatalog) -> list[StepResolution]:
    """One verdict per distinct (state, request) among the Kubernetes GPU steps, in plan order."""
    return [
        StepResolution(state, resolve_accelerator(request, catalog))
        for state, request in gpu_requests(steps)
    ]


def remap_plan_accelerators(steps: Iterable[PlanStep], catalog: GpuCatalog) -> dict[str, str]:
    """Requested → resolved text for every request the cluster advertises under another name."""
    mapping: dict[str, str] = {}
    for item in resolve_steps(steps, catalog):
        res = item.resolution
        if res.verdict is Verdict.REMAPPED and res.resolved is not None:
            mapping[res.requested] = res.resolved
    return mapping


def _rewrite(profile: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    request = accelerator_request(profile)
    if request is None or request not in mapping or not _kubernetes(profile):
        return profile
    new = mapping[request]
    raw = profile["accelerators"]
    if isinstance(raw, Mapping):
        value: Any = {new.rpartition(":")[0] or new: next(iter(raw.values()))}
    else:
        value = new
    return {**profile, "accelerators": value}


def apply_remap(plan: Plan, mapping: Mapping[str, str]) -> Plan:
    """``plan`` with each Kubernetes GPU step's accelerators rewritten through ``mapping``."""
    if not mapping:
        return plan
    steps = tuple(
        step._replace(resources_profile=_rewrite(step.resources_profile, mapping))
        for step in plan.steps
    )
    return plan._replace(steps=steps)
