"""Which images a spec can run, and which states use each (cli.md §1.3, dsl.md §6.2); pure.

``reachable_states`` walks the spec graph from ``initial`` the way the
planner expands it, but over every branch at once: a leaf follows each
enabled transition (those after an unconditional one can never match) and,
unless an unconditional transition catches every decision, its ``next``; a
sequence enters each child, whose entry state follows only its ``next`` when
it has no transitions (planner: ``follow=False``); a parallel group steps its
members; a group then continues with its own ``next``. Loops repeat the same
states, so visiting each state once covers them.

``image_targets`` resolves each reachable state's image with the renderer's
``render.images.resolve_image`` (the same rules and the same selection), so
preflight checks exactly the strings the renderer will emit or pin.
``step_images`` keeps each such state with its image and resources profile:
what the in-cluster pull probe needs to rebuild the pod identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.plan import context, planner
from npa_infra.render import images
from npa_infra.spec.model import Spec, State

__all__ = ["ImageTarget", "StepImage", "image_targets", "reachable_states", "step_images"]

_FOLLOW, _ENTRY, _MEMBER = "follow", "entry", "member"


@dataclass(frozen=True, slots=True)
class ImageTarget:
    """One distinct image and the states that run in it, in discovery order."""

    image: str
    steps: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StepImage:
    """One reachable state, the image it runs in and its resolved resources profile."""

    state: str
    image: str
    profile: Mapping[str, Any]


def _leaf_successors(state: State, config: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for tr in state.transitions:
        if tr.if_config and not planner.config_truthy(tr.if_config, config):
            continue  # disabled by configuration: never taken in this run
        out.append(tr.goto)
        if tr.when is None:
            return out  # matches every decision: nothing after it is reachable
    if state.next:
        out.append(state.next)
    return out


def _successors(state: State, mode: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    if mode == _MEMBER:
        return []
    if state.parallel:
        members = [(m, _MEMBER) for m in state.parallel]
        return members + ([(state.next, _FOLLOW)] if state.next else [])
    if state.sequence:
        children = [(c, _ENTRY) for c in state.sequence]
        return children + ([(state.next, _FOLLOW)] if state.next else [])
    if state.terminal:
        return []
    if mode == _ENTRY and state.loop is None:
        # planner: a sequence child's entry leaf does not follow its transitions.
        return [] if state.transitions or not state.next else [(state.next, _FOLLOW)]
    return [(name, _FOLLOW) for name in _leaf_successors(state, config)]


def reachable_states(spec: Spec, config: Mapping[str, Any]) -> tuple[str, ...]:
    """States with work reachable from ``initial`` over every branch, in discovery order."""
    order: list[str] = []
    seen: set[tuple[str, str]] = set()
    stack: list[tuple[str, str]] = [(spec.initial, _FOLLOW)]
    while stack:
        name, mode = stack.pop()
        state = spec.states.get(name)
        if state is None or (name, mode) in seen:
            continue
        seen.add((name, mode))
        if state.has_work and name not in order:
            order.append(name)
        # reversed: the first successor is explored first (deterministic discovery order)
        stack.extend(reversed(_successors(state, mode, config)))
    return tuple(order)


def step_images(
    spec: Spec,
    catalog: Catalog,
    *,
    run_id: str,
    selection: images.ImageSelection,
    variables: Mapping[str, str] | None = None,
) -> tuple[StepImage, ...]:
    """Every reachable state that runs in an image, in discovery order.

    Raises:
        PlanError: a token of a state's profile does not resolve (validation
            reports the same error first).
    """
    config, run = context.build_scope(spec, catalog, run_id=run_id, variables=variables or {})
    walk = planner.dry_run_walk(spec, catalog, config, run)
    found: list[StepImage] = []
    for name in reachable_states(spec, config):
        walk.step(spec.states[name], iteration=None, loop_label="", group="")
        step = walk.steps[-1]
        image = images.resolve_image(step.tool_ref, step.resources_profile.get("image"), selection)
        if image:
            found.append(StepImage(name, image, step.resources_profile))
    return tuple(found)


def image_targets(
    spec: Spec,
    catalog: Catalog,
    *,
    run_id: str,
    selection: images.ImageSelection,
    variables: Mapping[str, str] | None = None,
) -> tuple[ImageTarget, ...]:
    """Every distinct image of every reachable state, with the states using it.

    Raises:
        PlanError: a token of a state's profile does not resolve (validation
            reports the same error first).
    """
    found: dict[str, list[str]] = {}
    for step in step_images(spec, catalog, run_id=run_id, selection=selection, variables=variables):
        found.setdefault(step.image, []).append(step.state)
    return tuple(ImageTarget(image, tuple(states)) for image, states in found.items())
