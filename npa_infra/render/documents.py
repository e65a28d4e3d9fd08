"""Assemble task documents into SkyPilot job files (dsl.md §5.4, §6.1).

One-shot mode renders one serial pipeline for the whole plan; runtime mode
renders one job per wave, each batch of a parallel wave as a JobGroup. The
YAML text is produced here (pure); writing it to disk is the caller's job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from npa_infra.errors import RenderError
from npa_infra.plan import waves as waves_mod
from npa_infra.plan.model import Plan, PlanStep
from npa_infra.render.tasks import RenderSettings, render_task

__all__ = ["RenderedJob", "dump_documents", "render_plan", "with_envs"]

_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SHA40 = re.compile(r"^[0-9a-f]{40}$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True, slots=True)
class RenderedJob:
    """One ``sky jobs launch`` unit: its logical name, documents and YAML text.

    ``wave`` is the plan wave it belongs to (the batches of one parallel group
    share it); ``outputs`` are the URIs its own steps declare, in step order.
    """

    job_name: str
    wave: int | None
    execution: str
    documents: tuple[dict[str, Any], ...]
    images: tuple[str, ...]
    text: str
    outputs: tuple[str, ...] = ()


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_documents(documents: tuple[dict[str, Any], ...]) -> str:
    return yaml.dump_all(
        documents,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


def with_envs(
    job: RenderedJob,
    common: Mapping[str, str],
    per_task: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The job's YAML with ``common`` set in every task's ``envs`` and ``per_task[name]`` in
    that task's; the job's own text, byte for byte, when no value changes.

    One attempt's variables (its fence numbers and resume mode) are set this way
    at launch, so the rendered job, and with it the wave's identity, stays as planned.
    """
    changed = False
    docs: list[dict[str, Any]] = []
    for doc in job.documents:
        if "execution" in doc:  # the job header
            docs.append(doc)
            continue
        envs = dict(doc.get("envs") or {})
        wanted = {**common, **(per_task or {}).get(str(doc.get("name")), {})}
        if any(envs.get(key) != value for key, value in wanted.items()):
            envs.update(wanted)
            changed = True
        docs.append({**doc, "envs": envs})
    return dump_documents(tuple(docs)) if changed else job.text


def _check_placeholders(doc: dict[str, Any], task: str) -> None:
    for key, value in doc.items():
        if key in ("run", "setup"):
            continue
        text = yaml.safe_dump(value) if not isinstance(value, str) else value
        found = _PLACEHOLDER.search(text)
        if found:
            raise RenderError(
                f"task '{task}' keeps the placeholder {found.group(0)} in '{key}'; "
                "SkyPilot envs cannot refer to each other",
                remedy="define the value in config or pass --var so the renderer resolves it",
            )


def _tasks(
    steps: tuple[PlanStep, ...], s: RenderSettings
) -> tuple[list[dict[str, Any]], list[str]]:
    docs, imgs = [], []
    seen: dict[str, int] = {}
    for step in steps:
        # Sequence loops repeat states; SkyPilot task names must stay unique per job.
        count = seen[step.task_name] = seen.get(step.task_name, 0) + 1
        name = step.task_name if count == 1 else f"{step.task_name}-r{count}"
        doc, image = render_task(step, s, name)
        _check_placeholders(doc, step.task_name)
        docs.append(doc)
        if image:
            imgs.append(image)
    return docs, imgs


def _job(
    name: str, wave: int | None, execution: str, steps: tuple[PlanStep, ...], s: RenderSettings
) -> RenderedJob:
    docs, imgs = _tasks(steps, s)
    documents = ({"name": name, "execution": execution}, *docs)
    outputs = tuple(str(out["uri"]) for step in steps for out in step.outputs if out.get("uri"))
    return RenderedJob(
        name,
        wave,
        execution,
        documents,
        tuple(dict.fromkeys(imgs)),
        dump_documents(documents),
        outputs,
    )


def render_plan(
    plan: Plan, s: RenderSettings, *, runtime: bool, max_concurrency_cap: int = 0
) -> list[RenderedJob]:
    """Render the whole plan: one job (one-shot) or one job per wave batch (runtime)."""
    baked = str(s.config.get("require_baked_npa") or "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )
    if baked and not _SHA40.match(str(s.config.get("source_sha") or "")):
        raise RenderError(
            "config.require_baked_npa is enabled but config.source_sha is not 40 hex characters",
            remedy="pass --var source_sha=<the git commit baked into the images>",
        )
    probe = str(s.config.get("baked_npa_import") or "")
    if baked and probe and not _DOTTED.match(probe):
        raise RenderError(
            f"config.baked_npa_import {probe!r} is not a dotted module name",
            remedy="set it to the module the stage image executes, e.g. npa.workflows.sim2real.stage",
        )
    if not plan.steps:
        raise RenderError(
            "the plan has no steps to render", remedy="check initial and the state graph"
        )
    if not runtime:
        return [_job(waves_mod.job_name(plan.run_id), None, "serial", plan.steps, s)]
    jobs: list[RenderedJob] = []
    for wave in waves_mod.compute(plan, max_concurrency_cap=max_concurrency_cap):
        name = waves_mod.job_name(plan.run_id, wave)
        if wave.kind == "serial":
            jobs.append(_job(name, wave.index, "serial", wave.steps, s))
            continue
        size = max(1, -(-len(wave.steps) // wave.batches))
        for b in range(wave.batches):
            batch = wave.steps[b * size : (b + 1) * size]
            if batch:
                suffix = f"-b{b + 1}" if wave.batches > 1 else ""
                jobs.append(
                    _job(name[: 60 - len(suffix)] + suffix, wave.index, "parallel", batch, s)
                )
    return jobs
