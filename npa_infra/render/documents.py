"""Assemble task documents into SkyPilot job files (dsl.md §5.4, §6.1).

One-shot mode renders one serial pipeline for the whole plan; runtime mode
renders one job per wave, each batch of a parallel wave as a JobGroup. The
YAML text is produced here (pure); writing it to disk is the caller's job.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import ScalarNode

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


_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{kind}" for kind in ("str", "map", "seq"))
_Resolve = Callable[[type[ScalarNode], str, tuple[bool, bool]], str]


class _Unsupported(Exception):
    """A value ``_write_events`` leaves to the dumper's node tree: a dict or list met twice
    in one document (the representer writes an anchor and an alias), or a value whose type
    is not exactly str, dict, list, int, bool, float or None (a ``StrEnum``, a tuple)."""


class _Unsafe(Exception):
    """A string libyaml would write differently from PyYAML's emitter (``_libyaml_safe``)."""


def _dump_nodes(
    documents: tuple[dict[str, Any], ...], dumper: type[yaml.SafeDumper | yaml.CSafeDumper]
) -> str:
    """``yaml.dump_all`` with ``dumper``: a node per value, then the node tree emitted."""
    return yaml.dump_all(
        documents,
        Dumper=dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


class _EventWriter:
    """libyaml's stream of documents, fed to it as events instead of a node tree.

    ``_dump_nodes`` with the C dumper builds a node per value, then walks the nodes,
    calling the resolver twice per scalar for its implicit flags. The same events are
    made here without the nodes: the representer's tags and styles (``_str``; the
    dumper's own ``represent_data`` for the other scalars), the resolver's flags (asked
    once per distinct string), block style and no anchors. So the bytes are the
    dumper's for a third of the work (issue 19); tests compare the two. One event
    object per kind is reused: ``emit`` copies an event into libyaml's own before it
    returns. Each distinct string is checked with ``_libyaml_safe`` on the way, so the
    documents are walked once.
    """

    def __init__(self, stream: io.StringIO) -> None:
        self._dumper = _Dumper(stream, default_flow_style=False, allow_unicode=True, width=100)
        if self._dumper.yaml_path_resolvers:  # a tag that depends on the path: nodes only
            raise _Unsupported("path resolvers")
        self._emit: Callable[[Event], None] = self._dumper.emit
        self._resolve: _Resolve = self._dumper.resolve
        self._flags: dict[str, tuple[bool, bool]] = {}  # of each safe value
        self._keys: set[str] = set()  # the safe keys
        self._scalar = ScalarEvent(None, _STR, (True, True), "")
        self._mapping: tuple[Event, Event] = (
            MappingStartEvent(None, _MAP, True, flow_style=False),
            MappingEndEvent(),
        )
        self._sequence: tuple[Event, Event] = (
            SequenceStartEvent(None, _SEQ, True, flow_style=False),
            SequenceEndEvent(),
        )

    def write(self, documents: tuple[dict[str, Any], ...]) -> None:
        self._dumper.open()
        for document in documents:
            self._emit(DocumentStartEvent(explicit=False))
            self._node(document, set())  # the representer's aliases are per document
            self._emit(DocumentEndEvent(explicit=False))
        self._dumper.close()

    def _implicit(self, value: str, tag: str) -> tuple[bool, bool]:
        return (
            self._resolve(ScalarNode, value, (True, False)) == tag,
            self._resolve(ScalarNode, value, (False, True)) == tag,
        )

    def _text(self, value: str) -> None:
        found = self._flags.get(value)
        if found is None:
            if not _libyaml_safe(value):
                raise _Unsafe
            found = self._flags[value] = self._implicit(value, _STR)
        scalar = self._scalar
        scalar.implicit, scalar.value = found, value
        scalar.style = "|" if "\n" in value else None
        self._emit(scalar)

    def _node(self, value: object, seen: set[int]) -> None:
        if type(value) is str:
            self._text(value)
        elif type(value) is dict or type(value) is list:
            if id(value) in seen:
                raise _Unsupported("shared")
            seen.add(id(value))
            self._collection(value, seen)
        elif value is None or type(value) in (bool, int, float):
            node = self._dumper.represent_data(value)
            if not isinstance(node, ScalarNode):  # never: SafeRepresenter's scalars
                raise _Unsupported(type(node).__name__)
            flags = self._implicit(node.value, node.tag)
            self._emit(ScalarEvent(None, node.tag, flags, node.value, style=node.style))
        else:
            raise _Unsupported(type(value).__name__)

    def _collection(self, value: object, seen: set[int]) -> None:
        node = self._node
        if isinstance(value, dict):
            start, end = self._mapping
            self._emit(start)
            for key, item in value.items():
                if type(key) is str and key not in self._keys:
                    if not _libyaml_safe(key, key=True):
                        raise _Unsafe
                    self._keys.add(key)
                node(key, seen)
                node(item, seen)
            self._emit(end)
        elif isinstance(value, list):
            start, end = self._sequence
            self._emit(start)
            for item in value:
                node(item, seen)
            self._emit(end)


def _write_events(documents: tuple[dict[str, Any], ...]) -> str:
    """libyaml's stream of ``documents`` from ``_EventWriter``.

    Raises:
        _Unsafe: a string outside ``_libyaml_safe`` (the caller uses PyYAML's emitter).
        _Unsupported: a shared dict or list, or another type (the caller dumps nodes).
    """
    stream = io.StringIO()
    _EventWriter(stream).write(documents)
    return stream.getvalue()


def dump_documents(documents: tuple[dict[str, Any], ...], *, pure: bool = False) -> str:
    """The documents as one YAML stream: libyaml's emitter where it writes the same bytes
    (``_libyaml_safe``), fed events (``_write_events``); PyYAML's own otherwise or with
    ``pure``."""
    if pure or _Dumper is _PureDumper:
        return _dump_nodes(documents, _PureDumper)
    try:
        return _write_events(documents)
    except _Unsafe:
        return _dump_nodes(documents, _PureDumper)
    except _Unsupported:  # the node tree, with the emitter ``_libyaml_safe`` chooses
        fast = all(map(_libyaml_safe, documents))
        return _dump_nodes(documents, _Dumper if fast else _PureDumper)


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


def _may_hold_placeholder(value: object) -> bool:
    """False only when no string of ``value`` holds ``${``: then it holds no ``${K}``.

    One C-speed ``json.dumps`` instead of ``_placeholder``'s ordered walk for the usual
    document, which holds none (issue 19); JSON keeps every string's ``${`` as it is.
    A value JSON cannot write is walked.
    """
    try:
        return "${" in json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a set, a tuple key) or circular: walk it
        return True


def _check_placeholders(doc: dict[str, Any], task: str) -> None:
    for key, value in doc.items():
        if key in ("run", "setup") or not _may_hold_placeholder(value):
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
        if wave.kind == "serial":
            name = waves_mod.job_name(plan.run_id, wave)
            jobs.append(_job(name, wave.index, "serial", wave.steps, s))
            continue
        size = max(1, -(-len(wave.steps) // wave.batches))
        for b in range(wave.batches):
            batch = wave.steps[b * size : (b + 1) * size]
            if batch:
                # -bN names one JobGroup of a wave run in several batches (plan.waves.job_name)
                number = b + 1 if wave.batches > 1 else None
                name = waves_mod.job_name(plan.run_id, wave, batch=number)
                jobs.append(_job(name, wave.index, "parallel", batch, s))
    return jobs
