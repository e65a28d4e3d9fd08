"""A runtime run plans and renders its route once per decision set (issue 19).

The run's planner and renderer are counting wrappers handed to ``submit``
(``planners.Planning``); the GPU catalog's node listings are counted on the
Kubernetes double. A K-wave run routes once (its outputs and schemas come from
that routing, never a re-plan per wave), each decision that changes the route
plans and renders exactly once more, and with accelerator resolution on the
nodes are listed once for the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from npa_infra.catalog.model import Catalog
from npa_infra.plan import planner
from npa_infra.plan.model import Plan
from npa_infra.render import documents
from npa_infra.render.tasks import RenderSettings
from npa_infra.spec.model import Spec
from npa_infra.storage.s3 import BotoStore
from npa_infra.workflow.execution.liverun import LiveResult
from npa_infra.workflow.submission import pipeline, planners
from tests.integration.runs.supervised import chain_spec
from tests.integration.runs.world import ROOT, World
from tests.support.motoserver import MotoS3

RUNTIME = ROOT / "workflows/testing/runtime-mode.yaml"
BUCKET = "example-bucket"
GFD = "nvidia.com/gpu.product"
RTXPRO = "RTXPRO-6000-BLACKWELL-SERVER-EDITION"  # what SkyPilot matches for this product
FINISHES = {
    "command": "jobs.launch",
    "action": "timeline",
    "statuses": ["PENDING", "RUNNING", "SUCCEEDED"],
}


@dataclass
class Counting:
    """The real planner and renderer, with every call recorded."""

    builds: list[dict[str, str] | None] = field(default_factory=list)  # decisions; None: one-shot
    renders: list[bool] = field(default_factory=list)  # runtime flag of each render
    texts: list[str] = field(default_factory=list)  # every rendered job's task YAML

    def build(
        self,
        spec: Spec,
        catalog: Catalog,
        *,
        run_id: str,
        assume_decision: str = "",
        variables: Mapping[str, str] | None = None,
        decisions: Mapping[str, str] | None = None,
    ) -> Plan:
        self.builds.append(None if decisions is None else dict(decisions))
        return planner.build_plan(
            spec,
            catalog,
            run_id=run_id,
            assume_decision=assume_decision,
            variables=variables,
            decisions=decisions,
        )

    def render(
        self, plan: Plan, s: RenderSettings, *, runtime: bool, max_concurrency_cap: int = 0
    ) -> list[documents.RenderedJob]:
        self.renders.append(runtime)
        jobs = documents.render_plan(
            plan, s, runtime=runtime, max_concurrency_cap=max_concurrency_cap
        )
        self.texts += [job.text for job in jobs]
        return jobs

    def planning(self) -> planners.Planning:
        return planners.Planning(build=self.build, render=self.render)

    @property
    def route_builds(self) -> list[dict[str, str]]:
        """The runtime routings (the submit's one-shot plan of the fingerprint excluded)."""
        return [d for d in self.builds if d is not None]


def _submit(
    world: World,
    spec: Path,
    counting: Counting,
    s3: MotoS3 | None = None,
    **overrides: object,
) -> LiveResult:
    if not Path(world.env["SKYSIM_FAULTS"]).exists():
        world.faults(FINISHES)
    services = world.services()
    if s3 is not None:
        services = replace(services, store=lambda _endpoint: BotoStore.create(s3.endpoint_url))
    result = pipeline.submit(
        spec,
        world.options(**overrides),
        env=world.env,
        services=services,
        planning=counting.planning(),
    )
    assert isinstance(result, LiveResult)
    return result


def _node_listings(world: World) -> int:
    return len(world.fake.calls("GET", r"^/api/v1/nodes(\?|$)"))


def test_runtime_chain_without_decisions_routes_once(world: World, tmp_path: Path) -> None:
    spec = tmp_path / "chain.yaml"
    spec.write_text(chain_spec(5), encoding="utf-8")
    counting = Counting()

    result = _submit(world, spec, counting, run_id="once-1")

    assert result.status == "SUCCEEDED", result.to_json()
    assert len(world.sim_jobs()) == 5
    # one routing for the five waves (not one per wave's outputs and schemas), plus
    # the submit's one-shot plan the fingerprint is taken of
    assert counting.route_builds == [{}]
    assert counting.builds == [None, {}]
    assert counting.renders == [True, True]


def test_runtime_decision_changing_the_route_replans_once(world: World, s3_server: MotoS3) -> None:
    s3_server.create_bucket(BUCKET)
    key = "testing/runtime-mode/once-2/grades/decision.json"
    s3_server.put(BUCKET, key, json.dumps({"decision": "loop_back"}).encode())
    counting = Counting()

    result = _submit(world, RUNTIME, counting, s3_server, run_id="once-2")

    assert result.status == "SUCCEEDED", result.to_json()
    assert len(world.sim_jobs()) == 4  # prepare, grade, gate, reject
    # 1 + one route-changing decision, each decision set planned and rendered once
    assert counting.route_builds == [{}, {"gate": "loop_back_to_inner_loop"}]
    assert len(counting.renders) == 1 + len(counting.route_builds)


def test_runtime_resume_routes_once_with_the_journaled_decisions(
    world: World, s3_server: MotoS3
) -> None:
    s3_server.create_bucket(BUCKET)
    key = "testing/runtime-mode/once-3/grades/decision.json"
    s3_server.put(BUCKET, key, json.dumps({"decision": "loop_back"}).encode())
    assert _submit(world, RUNTIME, Counting(), s3_server, run_id="once-3").exit_code == 0
    counting = Counting()

    again = _submit(world, RUNTIME, counting, s3_server, resume_run="once-3")

    assert again.exit_code == 0, again.to_json()
    assert len(world.sim_jobs()) == 4  # replayed, nothing relaunched
    assert counting.route_builds == [{"gate": "loop_back_to_inner_loop"}]


def test_runtime_accelerator_resolution_lists_nodes_once_per_run(
    world: World, tmp_path: Path
) -> None:
    world.fake.add_node(
        "gpu-0", gpus=8, labels={GFD: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}
    )
    spec = tmp_path / "gpu-chain.yaml"
    spec.write_text(
        chain_spec(4, "{cloud: kubernetes, cpus: 1, memory: 1Gi, accelerators: RTXPRO6000:1}"),
        encoding="utf-8",
    )
    counting = Counting()

    result = _submit(world, spec, counting, run_id="once-4", resolve_accelerators=True)

    assert result.status == "SUCCEEDED", result.to_json()
    assert len(world.sim_jobs()) == 4
    assert _node_listings(world) == 1  # the submit's remap and the route's share it
    assert counting.texts and all(RTXPRO in text for text in counting.texts)  # remapped
    again = _submit(world, spec, Counting(), resume_run="once-4", resolve_accelerators=True)
    assert again.exit_code == 0, again.to_json()
    assert _node_listings(world) == 2  # a resume reads the catalog once again
