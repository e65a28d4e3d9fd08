"""Re-identifying a runtime wave from the spec file on disk (issue 9): the digest is the
one the launch recorded while the file is unchanged, differs once a step changes, and is
absent, with the reason, once the file no longer loads or validates; it never raises.

``Routes`` (issue 19): a routing is planned and rendered once per decision set that
changes it, and is the same as a fresh render for any decisions."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from npa_infra.catalog.model import Catalog
from npa_infra.plan import planner
from npa_infra.plan.model import Plan
from npa_infra.render.tasks import RenderSettings
from npa_infra.spec.model import Spec
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.planning import api, loading
from npa_infra.workflow.submission import planners, reidentification, submitflags
from tests import strategies

ROOT = Path(__file__).resolve().parents[3]

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: reid, executionMode: runtime}
config: {root_uri: "s3://example-bucket/reid/{{run.id}}"}
resources:
  default: {cloud: kubernetes, cpus: 1, memory: 1Gi}
states:
  train:
    toolRef: workbench.rerun.report
    terminal: true
"""


def _spec(directory: Path) -> Path:
    path = directory / "reid.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


def _router(spec: Path) -> tuple[reidentification.Router, str]:
    """A router as ``submit`` builds it, and wave 0's digest as the launch recorded it."""
    catalog = api.select(None, {})
    loaded = loading.load_validated(spec, catalog, {}).spec
    settings = RenderSettings(
        workflow=loaded.name, run_id="reid-1", config={}, src_s3_uri="s3://b/src/"
    )
    options = submitflags.SubmitOptions(resolve_accelerators=False)
    router = reidentification.Router(catalog, "reid-1", options, settings, {})
    job = router.render(loaded, {}).jobs[0]
    return router, hashlib.sha256(job.text.encode()).hexdigest()


def test_identify_unchanged_file_gives_the_launched_digest(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    router, launched = _router(spec)

    fresh = router.reidentifier(spec)({}, 0)

    assert fresh.digest == launched


def test_identify_changed_step_gives_another_digest(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    router, launched = _router(spec)
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("cpus: 1", "cpus: 2"), encoding="utf-8")

    fresh = router.identify(spec, {}, 0)

    assert fresh.digest is not None and fresh.digest != launched


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param("states: [unclosed\n", "no longer validates", id="unparseable"),
        pytest.param("kind: Workflow\n", "no longer validates", id="invalid"),
        pytest.param(None, "spec file not found", id="deleted"),
    ],
)
def test_identify_unloadable_spec_has_no_digest_and_says_why(
    tmp_path: Path, content: str | None, reason: str
) -> None:
    spec = _spec(tmp_path)
    router, _ = _router(spec)
    if content is None:
        spec.unlink()
    else:
        spec.write_text(content, encoding="utf-8")

    fresh = router.identify(spec, {}, 0)

    assert fresh.digest is None and reason in fresh.reason


def test_identify_wave_no_longer_planned_has_no_digest(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    router, _ = _router(spec)

    fresh = router.identify(spec, {}, 3)

    assert fresh.digest is None and "wave 03 is no longer in the plan" in fresh.reason


def test_identity_unchanged_without_a_digest_reports_the_recomputation_reason() -> None:
    reason = "the spec on disk no longer validates: 1 problem(s) in s.yaml: bad"

    check = recovery.identity_unchanged("a" * 64, lambda: recovery.Recomputed(None, reason))

    assert (check.ok, check.indeterminate, check.reason) == (False, True, reason)


LOOP = ROOT / "workflows/testing/loop-decision.yaml"  # decision keys rounds@rounds=1..3, route
LOOP_KEYS = ["rounds@rounds=1", "rounds@rounds=2", "rounds@rounds=3", "route", "elsewhere"]


@dataclass
class Counting:
    """``planners.Planning`` with every plan build counted."""

    builds: int = 0

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
        self.builds += 1
        return planner.build_plan(
            spec,
            catalog,
            run_id=run_id,
            assume_decision=assume_decision,
            variables=variables,
            decisions=decisions,
        )

    def planning(self) -> planners.Planning:
        return planners.Planning(build=self.build)


def _routes(path: Path, counting: Counting) -> reidentification.Routes:
    catalog = api.select(None, {})
    loaded = loading.load_validated(path, catalog, {}).spec
    settings = RenderSettings(
        workflow=loaded.name, run_id="memo-1", config={}, src_s3_uri="s3://b/src/"
    )
    options = submitflags.SubmitOptions(resolve_accelerators=False)
    router = reidentification.Router(
        catalog, "memo-1", options, settings, {}, planning=counting.planning()
    )
    return reidentification.Routes(router, loaded)


def test_routes_unchanged_decision_set_reuses_the_same_rendered() -> None:
    counting = Counting()
    routes = _routes(LOOP, counting)

    first = routes({"rounds@rounds=1": "loop_back"})
    again = routes({"rounds@rounds=1": "loop_back"})

    assert again is first and counting.builds == 1


def test_routes_route_changing_decision_plans_once_more() -> None:
    counting = Counting()
    routes = _routes(LOOP, counting)
    start = routes({})
    assert start.routed.pending is not None
    decided = {start.routed.pending.key: "loop_back"}

    extended = routes(decided)
    routes(decided)
    routes({})

    assert counting.builds == 2
    assert len(extended.jobs) > len(start.jobs)


def test_routes_decision_the_route_never_reads_reuses_it() -> None:
    counting = Counting()
    routes = _routes(LOOP, counting)
    first = routes({})

    # the walk stops at rounds@rounds=1 and never consults ``elsewhere``
    assert routes({"elsewhere": "promote"}) is first and counting.builds == 1


def test_routes_alias_of_a_used_decision_reuses_the_route() -> None:
    counting = Counting()
    routes = _routes(LOOP, counting)

    first = routes({"rounds@rounds=1": "loop_back"})

    assert routes({"rounds@rounds=1": "loop_back_to_inner_loop"}) is first
    assert counting.builds == 1


def test_identify_plans_afresh_each_time(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    counting = Counting()
    catalog = api.select(None, {})
    settings = RenderSettings(workflow="reid", run_id="reid-1", config={}, src_s3_uri="s3://b/")
    options = submitflags.SubmitOptions(resolve_accelerators=False)
    router = reidentification.Router(
        catalog, "reid-1", options, settings, {}, planning=counting.planning()
    )

    router.identify(spec, {}, 0)
    router.identify(spec, {}, 0)

    assert counting.builds == 2  # re-identification never reuses a routing (issue 9)


@settings(max_examples=40, deadline=None)
@example(  # the last round's decision differs, the route's steps do not: two builds
    sets=[
        {"rounds@rounds=1": "loop_back", "rounds@rounds=2": "loop_back"}
        | {"rounds@rounds=3": "promote", "route": "promote"},
        {"rounds@rounds=1": "loop_back", "rounds@rounds=2": "loop_back"}
        | {"rounds@rounds=3": "loop_back", "route": "promote"},
    ]
)
@given(sets=st.lists(strategies.decision_sets(LOOP_KEYS), min_size=1, max_size=5))
def test_routes_any_decision_sets_render_as_a_fresh_render(sets: list[dict[str, str]]) -> None:
    counting = Counting()
    routes = _routes(LOOP, counting)
    fresh = _routes(LOOP, Counting())

    consulted: set[tuple[tuple[tuple[str, str], ...], str | None]] = set()
    for decided in sets:
        memo = routes(decided)
        again = fresh.router.render(fresh.spec, decided)
        assert [j.text for j in memo.jobs] == [j.text for j in again.jobs]
        assert memo.routed.pending == again.routed.pending
        pending = memo.routed.pending.key if memo.routed.pending else None
        consulted.add((memo.routed.decisions_used, pending))

    # one build per distinct set of consulted decisions (two may render alike), never per call
    assert counting.builds == len(consulted)
