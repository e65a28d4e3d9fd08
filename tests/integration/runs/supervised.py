"""Helpers for supervision tests: a one-wave runtime spec, supervision settings, journal reads.

``settings(**extra)`` sets supervision options that ``submit`` does not take
as ``SubmitOptions`` fields (``heartbeat_seconds``, ``stale_after_seconds``)
by adding them to the ``LiveRequest.extra`` that ``submit`` hands to
``runner.execute``, exactly where the submit options land.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from npa_infra.journal.store import Journal
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.submission import pipeline
from npa_infra.workflow.supervision import runner
from npa_infra.workflow.target.services import Services, StoreFactory
from tests.integration.runs.world import World

__all__ = ["events", "run", "settings", "single_wave_spec"]


def single_wave_spec(
    directory: Path,
    *,
    params: Mapping[str, str] | None = None,
    outputs: tuple[tuple[str, str], ...] = (),
) -> Path:
    """A runtime spec with one state (``train``), so one wave: its attempts are the run's jobs."""
    lines = [
        "apiVersion: npa.workflow/v0.0.1",
        "kind: Workflow",
        "metadata: {name: supervised, executionMode: runtime}",
        'config: {root_uri: "s3://example-bucket/supervised/{{run.id}}"}',
        "resources:",
        "  default: {cloud: kubernetes, cpus: 1, memory: 1Gi}",
        "states:",
        "  train:",
        "    toolRef: workbench.rerun.report",
        "    terminal: true",
    ]
    if params:
        lines.append("    params:")
        lines += [f'      {key}: "{value}"' for key, value in params.items()]
    if outputs:
        lines.append("    outputs:")
        for uri, schema in outputs:
            lines.append(f'      - {{uri: "{uri}"' + (f", schema: {schema}}}" if schema else "}"))
    path = directory / "supervised.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def settings(**extra: Any) -> Iterator[None]:
    """Add ``extra`` to every ``LiveRequest`` that ``submit`` executes while active."""
    original = runner.execute

    def execute(
        request: liverun.LiveRequest,
        env: Mapping[str, str],
        services: Services | None = None,
    ) -> liverun.LiveResult:
        request = dataclasses.replace(request, extra={**request.extra, **extra})
        return original(request, env, services)

    runner.execute = execute  # restored below
    try:
        yield
    finally:
        runner.execute = original


def run(
    world: World,
    spec: Path,
    *,
    progress: Callable[[str], None] | None = None,
    store: StoreFactory | None = None,
    **options: Any,
) -> liverun.LiveResult:
    """``submit`` through the world, with a progress callback and an object store when given."""
    services = world.services()
    if progress is not None:
        services = dataclasses.replace(services, progress=progress)
    if store is not None:
        services = dataclasses.replace(services, store=store)
    result = pipeline.submit(spec, world.options(**options), env=world.env, services=services)
    assert isinstance(result, liverun.LiveResult)
    return result


def events(world: World, run_id: str, *kinds: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's journal events (of ``kinds`` when given), oldest first."""
    journal = Journal.open(world.home)
    try:
        found = [(e.kind, dict(e.data)) for e in journal.events(run_id)]
    finally:
        journal.close()
    return [e for e in found if not kinds or e[0] in kinds]


CAPACITY = "0/3 nodes are available: 3 Insufficient cpu."
# The first attempt stays PENDING on a capacity blocker (a transient one, kubernetes.md
# §6.3); every later attempt runs to SUCCEEDED.
UNSCHEDULABLE_FIRST: dict[str, Any] = {
    "command": "jobs.launch",
    "nth": 1,
    "action": "pod_state",
    "task": 0,
    "pod": {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": CAPACITY,
            }
        ],
    },
}
BLOCKED_THEN_RUNS: list[dict[str, Any]] = [
    {"command": "jobs.launch", "nth": 1, "action": "timeline", "statuses": ["PENDING"]},
    UNSCHEDULABLE_FIRST,
    {
        "command": "jobs.launch",
        "action": "timeline",
        "statuses": ["PENDING", "RUNNING", "SUCCEEDED"],
    },
]


def chain_spec(waves: int, resources: str = "{cloud: kubernetes, cpus: 1, memory: 1Gi}") -> str:
    """A runtime spec of ``waves`` states in a row (``s0`` → ``s1`` → …): one wave each."""
    lines = [
        "apiVersion: npa.workflow/v0.0.1",
        "kind: Workflow",
        "metadata: {name: chain, executionMode: runtime}",
        'config: {bucket: example-bucket, root_uri: "s3://example-bucket/chain"}',
        "resources:",
        f"  default: {resources}",
        "states:",
    ]
    for i in range(waves):
        lines += [f"  s{i}:", "    toolRef: workbench.rerun.report"]
        lines.append(f"    next: s{i + 1}" if i < waves - 1 else "    terminal: true")
    return "\n".join(lines) + "\n"
