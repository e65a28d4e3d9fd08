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


def _str(dumper: yaml.representer.SafeRepresenter, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _PureDumper(yaml.SafeDumper):
    """PyYAML's own emitter: the reference the libyaml one must match byte for byte."""


_PureDumper.add_representer(str, _str)

# libyaml's emitter is ~7x faster, and writes the same bytes as PyYAML's own for
# documents whose strings are all printable ASCII (values may hold inner line breaks):
# ``_libyaml_safe`` decides. Outside that (non-BMP characters, control characters, empty
# or multi-line keys, leading or doubled trailing line breaks) the two differ, so those
# documents keep PyYAML's emitter. Tests compare both on every rendered task of the
# reference workflows and the test specs, and on generated documents (issue 19).
_KEY = re.compile(r"[ -~]+\Z")
_VALUE = re.compile(r"[ -~\n]*\Z")
_Dumper: type[yaml.SafeDumper | yaml.CSafeDumper] = _PureDumper
if getattr(yaml, "__with_libyaml__", False):

    class _CDumper(yaml.CSafeDumper):
        pass

    _CDumper.add_representer(str, _str)
    _Dumper = _CDumper


def _libyaml_safe(value: object, *, key: bool = False) -> bool:
    """Whether libyaml emits ``value`` byte for byte as PyYAML's own emitter does."""
    if isinstance(value, str):
        if key:
            return _KEY.match(value) is not None
        return (
            _VALUE.match(value) is not None
            and not value.startswith("\n")
            and not value.endswith("\n\n")
        )
    if isinstance(value, dict):
        return all(_libyaml_safe(k, key=True) and _libyaml_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_libyaml_safe(item) for item in value)
    return value is None or isinstance(value, int | float)  # bool is an int


def dump_documents(documents: tuple[dict[str, Any], ...], *, pure: bool = False) -> str:
    """The documents as one YAML stream: libyaml's emitter where it writes the same bytes
    (``_libyaml_safe``), PyYAML's own otherwise or with ``pure``."""
    fast = not pure and _Dumper is not _PureDumper and all(map(_libyaml_safe, documents))
    return yaml.dump_all(
        documents,
        Dumper=_Dumper if fast else _PureDumper,
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


def _placeholder(value: object) -> re.Match[str] | None:
    """The first ``${K}`` in any string (key or value) of ``value``, walking it in place
    instead of dumping it to YAML text first (issue 19)."""
    if isinstance(value, str):
        return _PLACEHOLDER.search(value)
    if isinstance(value, Mapping):
        # keys in sorted order, as the YAML dump this replaces found the first one
        pairs = sorted(value.items(), key=lambda pair: str(pair[0]))
        items: list[object] = [part for pair in pairs for part in pair]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:  # numbers, booleans, None hold no placeholder
        return None
    for item in items:
        found = _placeholder(item)
        if found:
            return found
    return None


def _check_placeholders(doc: dict[str, Any], task: str) -> None:
    for key, value in doc.items():
        if key in ("run", "setup"):
            continue
        found = _placeholder(value)
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
