"""The compatibility corpus (dsl.md §8): 52 reference specs, read in place.

``NPA_SPEC_CORPUS`` names the corpus directory and ``NPA_TOOL_CATALOG`` the
reference tool catalog. Without them the module skips on a developer machine
and fails under CI. Each spec is loaded and planned once per module through a
cache, so the whole file stays fast.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from npa_infra.catalog.loader import select_catalog
from npa_infra.catalog.model import Catalog
from npa_infra.errors import RenderError, SpecError
from npa_infra.plan import waves
from npa_infra.plan.model import Plan, Wave
from npa_infra.plan.planner import build_plan
from npa_infra.render.documents import render_plan
from npa_infra.render.images import ImageSelection
from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.planning import api
from npa_infra.workflow.planning.loading import ValidatedSpec, load_validated

pytestmark = pytest.mark.corpus

ASSUMPTIONS = {"default": "", "loop_back": "loop_back", "promote": "promote_checkpoint"}
TOKEN = re.compile(
    r"\{\{\s*(?:config|run|state|loop)\.[A-Za-z0-9_.-]+\s*(?:\|\s*[A-Za-z0-9_]+\s*)?\}\}"
)
BUCKET = "npa-corpus-override-bucket"
SRC = "s3://npa-corpus-src/npa-src/npa/fingerprint/"
SHA40 = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "0123456789abcdef" * 4
SIM2REAL_IMAGE_KEYS = (
    "controller_image",
    "transfer_image",
    "envgen_image",
    "reason_image",
    "isaac_image",
    "viewer_image",
)
# libyaml when present: the round-trip checks parse every rendered document.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BAKED_ERROR = "requires a registry-qualified immutable image because config.require_baked_npa"


class Counts(NamedTuple):
    """dsl.md §8.2: states; steps under default/loop_back/promote; waves (parallel)."""

    states: int
    default: int
    loop_back: int
    promote: int
    waves: int
    parallel_waves: int


ONE_STEP = (
    "alpamayo2-super-inference",
    "byof",
    "byof-droid-policy-learning",
    "byof-maniskill",
    "byof-mujoco-playground",
    "byof-openpi",
    "byof-robocasa",
    "byof-wan2.2",
    "byof-wan2.2-multigpu",
    "cosmos2-transfer",
    "cosmos3-checkpoint-eval",
    "cosmos3-generate",
    "cosmos3-reason",
    "cosmos3-text-to-image",
    "mjlab-eval",
    "retargeting",
    "sonic-eval",
    "sonic-train",
    "token-factory-caption",
    "token-factory-cosmos-reason",
    "token-factory-generate",
    "vlm-eval-benchmark",
    "vlm-eval-single",
    "vlm-eval-token-factory",
)
LINEAR = {
    "byof-ltx2": 2,
    "content-agents-rigid-object": 5,
    "cosmos-fetch": 2,
    "insights-aggregate": 2,
    "insights-smoke": 3,
    "isaac-franka-capture-reason": 2,
    "openpi-pi05-four-mode": 6,
    "scenario-gen-smoke": 2,
    "sim2real-two-step": 2,
    "sim2real-two-step-agent": 2,
    "sonic-export": 2,
    "sonic-export-eval": 3,
    "tokenfactory-rollout-judge": 2,
    "tokenfactory-rollout-judge-combo": 2,
    "tokenfactory-scene-to-rollout-judge": 3,
    "tokenfactory-train-triage": 2,
}
STRUCTURED = {
    "adversarial-scenario-hardening": Counts(7, 12, 12, 6, 12, 0),
    "bdd100k-pipeline": Counts(13, 11, 11, 11, 11, 0),
    "cosmos-synth-fanout-curation": Counts(5, 4, 4, 4, 4, 0),
    "dataset-ingest-curate": Counts(6, 4, 4, 5, 4, 0),
    "isaac-lab-rl-sweep": Counts(6, 5, 5, 5, 2, 1),
    "paidf-cosmos3": Counts(17, 13, 13, 15, 13, 0),
    "physical-ai-data-factory": Counts(20, 17, 19, 17, 17, 0),
    "rl-policy-training-sim-success": Counts(5, 4, 4, 4, 4, 0),
    "sim2real": Counts(20, 52, 52, 24, 42, 10),
    "sim2real-vlm-rl-demo": Counts(9, 19, 19, 11, 19, 0),
    "token-factory-gate-loop": Counts(7, 11, 11, 5, 11, 0),
    "token-factory-parallel-fanout": Counts(5, 4, 4, 4, 2, 1),
}
EXPECTED: dict[str, Counts] = {
    **{name: Counts(1, 1, 1, 1, 1, 0) for name in ONE_STEP},
    **{name: Counts(n, n, n, n, n, 0) for name, n in LINEAR.items()},
    **STRUCTURED,
}
SPECS = sorted(EXPECTED)
DEFAULT_DECISION = {
    **{name: "" for name in SPECS},
    **{
        name: "loop_back_to_inner_loop"
        for name in (
            "adversarial-scenario-hardening",
            "dataset-ingest-curate",
            "paidf-cosmos3",
            "rl-policy-training-sim-success",
            "token-factory-gate-loop",
            "sim2real-vlm-rl-demo",
        )
    },
    "physical-ai-data-factory": "promote_checkpoint",
}
BASE64_SPECS = ("byof-ltx2", "byof-wan2.2", "byof-wan2.2-multigpu")
BAKED_SPECS = ("sim2real", "cosmos3-checkpoint-eval")


@dataclass
class Corpus:
    root: Path
    catalog: Catalog
    _loaded: dict[tuple[str, tuple[tuple[str, str], ...]], ValidatedSpec] = field(
        default_factory=dict
    )
    _plans: dict[tuple[str, str, tuple[tuple[str, str], ...]], Plan] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.root / f"{name}.yaml"

    def load(self, name: str, variables: Mapping[str, str] | None = None) -> ValidatedSpec:
        key = (name, tuple(sorted((variables or {}).items())))
        if key not in self._loaded:
            self._loaded[key] = load_validated(self.path(name), self.catalog, variables or {})
        return self._loaded[key]

    def plan(self, name: str, assume: str = "", variables: Mapping[str, str] | None = None) -> Plan:
        frozen = tuple(sorted((variables or {}).items()))
        key = (name, assume, frozen)
        if key not in self._plans:
            spec = self.load(name, variables).spec
            self._plans[key] = build_plan(
                spec, self.catalog, run_id=f"{name}-corpus", assume_decision=assume
            )
        return self._plans[key]

    def raw(self, name: str) -> dict[str, Any]:
        data = yaml.load(self.path(name).read_text(encoding="utf-8"), Loader=LOADER)
        assert isinstance(data, dict)
        return data


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    root = os.environ.get("NPA_SPEC_CORPUS", "")
    catalog = os.environ.get("NPA_TOOL_CATALOG", "")
    if not root or not catalog:
        message = (
            "set NPA_SPEC_CORPUS and NPA_TOOL_CATALOG to run the corpus tests (make test does)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Corpus(Path(root), select_catalog(None, os.environ))


def settings(plan: Plan, **overrides: Any) -> RenderSettings:
    base: dict[str, Any] = {
        "workflow": plan.workflow,
        "run_id": plan.run_id,
        "config": plan.config,
        "src_s3_uri": SRC,
    }
    base.update(overrides)
    return RenderSettings(**base)


def plan_text(plan: Plan) -> str:
    return json.dumps(plan.to_json(), sort_keys=True)


def parallel_waves(plan: Plan) -> list[Wave]:
    return [w for w in waves.compute(plan) if w.kind == "parallel"]


# -- the corpus itself --------------------------------------------------------------------


def test_corpus_directory_holds_exactly_the_52_expected_specs(corpus: Corpus) -> None:
    found = sorted(p.stem for p in corpus.root.glob("*.yaml"))

    assert len(SPECS) == 52
    assert found == SPECS
    assert (corpus.root / "NOTICE").is_file()


# -- invariant 1: validation ------------------------------------------------------------------


@pytest.mark.parametrize("name", SPECS, ids=SPECS)
def test_corpus_spec_validates_states_sorted_and_initial_first(corpus: Corpus, name: str) -> None:
    report = api.validate_spec(corpus.path(name), env=os.environ)

    declared = list(corpus.raw(name)["states"])
    assert report.states == sorted(declared)
    assert report.initial == declared[0]
    assert report.to_json()["status"] == "valid"


# -- invariants 2 and 4: plan shape and tokens ------------------------------------------------


@pytest.mark.parametrize("assume", ASSUMPTIONS.values(), ids=ASSUMPTIONS.keys())
@pytest.mark.parametrize("name", SPECS, ids=SPECS)
def test_corpus_plan_ends_terminal_with_leaf_steps_and_resolved_tokens(
    corpus: Corpus, name: str, assume: str
) -> None:
    spec = corpus.load(name).spec
    plan = corpus.plan(name, assume)

    assert plan.steps
    assert spec.states[plan.steps[-1].state].terminal
    for step in plan.steps:
        state = spec.states[step.state]
        assert not state.parallel and not state.sequence, f"group state {step.state} planned"
        assert step.argv or step.shell.strip(), f"empty command in {step.task_name}"
    leftover = TOKEN.findall(plan_text(plan))
    assert leftover == []


@pytest.mark.parametrize("name", BASE64_SPECS, ids=BASE64_SPECS)
def test_corpus_base64_token_spec_resolved_in_plan(corpus: Corpus, name: str) -> None:
    text = corpus.path(name).read_text(encoding="utf-8")

    assert "|base64" in text
    assert "|base64" not in plan_text(corpus.plan(name))


# -- invariant 5: bucket override ------------------------------------------------------------


@pytest.mark.parametrize("assume", ASSUMPTIONS.values(), ids=ASSUMPTIONS.keys())
@pytest.mark.parametrize("name", SPECS, ids=SPECS)
def test_corpus_var_bucket_removes_every_example_bucket(
    corpus: Corpus, name: str, assume: str
) -> None:
    before = plan_text(corpus.plan(name, assume))
    after = plan_text(corpus.plan(name, assume, {"bucket": BUCKET}))

    assert "example-bucket" not in after
    if "example-bucket" in before:
        assert BUCKET in after


# -- invariant 6: step and wave counts ---------------------------------------------------------


@pytest.mark.parametrize("name", SPECS, ids=SPECS)
def test_corpus_step_and_wave_counts_match_table(corpus: Corpus, name: str) -> None:
    spec = corpus.load(name).spec
    default_waves = waves.compute(corpus.plan(name))

    observed = Counts(
        states=len(spec.states),
        default=len(corpus.plan(name).steps),
        loop_back=len(corpus.plan(name, "loop_back").steps),
        promote=len(corpus.plan(name, "promote_checkpoint").steps),
        waves=len(default_waves),
        parallel_waves=sum(1 for w in default_waves if w.kind == "parallel"),
    )

    assert observed == EXPECTED[name]


@pytest.mark.parametrize("assume", ["", "loop_back"], ids=["default", "loop_back"])
def test_corpus_sim2real_rollouts_nine_times_over_outer_and_inner_iterations(
    corpus: Corpus, assume: str
) -> None:
    rollouts = [s for s in corpus.plan("sim2real", assume).steps if s.state == "stage-07-rollouts"]

    expected = [f"outer-{o}/iter-{i}" for o in (1, 2, 3) for i in (1, 2, 3)]
    assert len(rollouts) == 9
    for step, marker in zip(rollouts, expected, strict=True):
        assert any(marker in out["uri"] for out in step.outputs), (marker, step.outputs)


@pytest.mark.parametrize("assume", ASSUMPTIONS.values(), ids=ASSUMPTIONS.keys())
def test_corpus_bdd100k_step_order(corpus: Corpus, assume: str) -> None:
    order = [s.task_name for s in corpus.plan("bdd100k-pipeline", assume).steps]

    assert order == [
        "ingest",
        "backfill-cpu",
        "backfill-clip",
        "curate-views",
        "train-rider",
        "train-nighttime",
        "train-distant",
        "eval-rider",
        "eval-nighttime",
        "eval-distant",
        "review",
    ]


@pytest.mark.parametrize(
    ("assume", "last"),
    [("", "escalate"), ("loop_back", "escalate"), ("promote_checkpoint", "publish")],
    ids=["default", "loop_back", "promote"],
)
def test_corpus_token_factory_gate_loop_end_state(corpus: Corpus, assume: str, last: str) -> None:
    assert corpus.plan("token-factory-gate-loop", assume).steps[-1].state == last


# -- invariant 7: default assumed decision ------------------------------------------------------


@pytest.mark.parametrize("name", SPECS, ids=SPECS)
def test_corpus_default_assumed_decision(corpus: Corpus, name: str) -> None:
    assert corpus.plan(name).assume_decision == DEFAULT_DECISION[name]


# -- invariant 8: parallelCount ------------------------------------------------------------------


def test_corpus_sim2real_shard_count_three_parallel_count_mismatch(corpus: Corpus) -> None:
    with pytest.raises(SpecError) as info:
        corpus.load("sim2real", {"shard_count": "3"})

    matching = [i for i in info.value.issues if "parallelCount resolves to 3" in i.message]
    assert matching
    assert "the group declares 2 members" in matching[0].message
    assert matching[0].path.endswith(".parallelCount")
    assert matching[0].line > 0


# -- invariant 9: waves ----------------------------------------------------------------------------


def test_corpus_token_factory_parallel_fanout_waves(corpus: Corpus) -> None:
    fan, aggregate = waves.compute(corpus.plan("token-factory-parallel-fanout"))

    assert (fan.kind, fan.name, len(fan.steps)) == ("parallel", "caption-shards", 3)
    assert (fan.max_concurrency, fan.batches) == (3, 1)
    assert (aggregate.kind, aggregate.name) == ("serial", "aggregate")


def test_corpus_isaac_lab_rl_sweep_waves(corpus: Corpus) -> None:
    sweep, select = waves.compute(corpus.plan("isaac-lab-rl-sweep"))

    assert (sweep.kind, len(sweep.steps)) == ("parallel", 4)
    assert (select.kind, select.name) == ("serial", "select-best")


def test_corpus_sim2real_stage_04_once_and_stage_08_nine_times(corpus: Corpus) -> None:
    names = [w.name for w in parallel_waves(corpus.plan("sim2real"))]

    assert len(names) == 10
    assert sum(1 for n in names if n.startswith("stage-04")) == 1
    assert sum(1 for n in names if n.startswith("stage-08")) == 9
    assert names[0].startswith("stage-04")


# -- invariant 10: baked images --------------------------------------------------------------------


@pytest.mark.parametrize("name", BAKED_SPECS, ids=BAKED_SPECS)
def test_corpus_baked_spec_declares_baked_npa_with_empty_source_sha(
    corpus: Corpus, name: str
) -> None:
    config = corpus.load(name).spec.config

    assert str(config["require_baked_npa"]) == "1"
    assert str(config["source_sha"]) == ""


@pytest.mark.parametrize("runtime", [False, True], ids=["one-shot", "runtime"])
@pytest.mark.parametrize("name", BAKED_SPECS, ids=BAKED_SPECS)
def test_corpus_baked_spec_as_shipped_render_fails_baked_error(
    corpus: Corpus, name: str, runtime: bool
) -> None:
    plan = corpus.plan(name)

    with pytest.raises(RenderError, match="require_baked_npa"):
        render_plan(plan, settings(plan), runtime=runtime)


@pytest.mark.parametrize("name", BAKED_SPECS, ids=BAKED_SPECS)
def test_corpus_baked_spec_with_source_sha_mutable_images_render_fails(
    corpus: Corpus, name: str
) -> None:
    plan = corpus.plan(name, variables={"source_sha": SHA40})

    with pytest.raises(RenderError, match=BAKED_ERROR):
        render_plan(plan, settings(plan), runtime=False)


def _pinned_images(keys: tuple[str, ...]) -> dict[str, str]:
    return {k: f"registry.example.com/sim2real/{k.replace('_', '-')}@{DIGEST}" for k in keys}


def test_corpus_sim2real_all_six_images_pinned_renders_exact_digests(corpus: Corpus) -> None:
    images = _pinned_images(SIM2REAL_IMAGE_KEYS)
    plan = corpus.plan("sim2real", variables={"source_sha": SHA40, **images})

    for runtime in (False, True):
        jobs = render_plan(plan, settings(plan, src_s3_uri=""), runtime=runtime)
        ids = {d["resources"]["image_id"] for j in jobs for d in j.documents[1:]}
        assert ids <= {f"docker:{i}" for i in images.values()}
        assert sum(len(j.documents) - 1 for j in jobs) == len(plan.steps)


@pytest.mark.parametrize("missing", SIM2REAL_IMAGE_KEYS, ids=SIM2REAL_IMAGE_KEYS)
def test_corpus_sim2real_one_image_unpinned_render_fails(corpus: Corpus, missing: str) -> None:
    images = _pinned_images(tuple(k for k in SIM2REAL_IMAGE_KEYS if k != missing))
    plan = corpus.plan("sim2real", variables={"source_sha": SHA40, **images})

    with pytest.raises(RenderError, match=BAKED_ERROR):
        render_plan(plan, settings(plan), runtime=False)


def test_corpus_cosmos3_checkpoint_eval_pinned_override_renders(corpus: Corpus) -> None:
    plan = corpus.plan("cosmos3-checkpoint-eval", variables={"source_sha": SHA40})
    image = f"registry.example.com/cosmos3/checkpoint-eval@{DIGEST}"
    selection = ImageSelection(overrides=((plan.steps[0].tool_ref, image),))

    (job,) = render_plan(plan, settings(plan, selection=selection), runtime=False)

    assert job.documents[1]["resources"]["image_id"] == f"docker:{image}"
    assert "pip install" not in job.documents[1]["setup"]


# -- every other spec renders ------------------------------------------------------------------------


RENDERABLE = [n for n in SPECS if n not in BAKED_SPECS]


@pytest.mark.parametrize("runtime", [False, True], ids=["one-shot", "runtime"])
@pytest.mark.parametrize("name", RENDERABLE, ids=RENDERABLE)
def test_corpus_spec_renders_round_trippable_yaml_with_unique_task_names(
    corpus: Corpus, name: str, runtime: bool
) -> None:
    plan = corpus.plan(name, variables={"bucket": BUCKET})

    jobs = render_plan(plan, settings(plan), runtime=runtime)

    assert sum(len(j.documents) - 1 for j in jobs) == len(plan.steps)
    for job in jobs:
        assert list(yaml.load_all(job.text, Loader=LOADER)) == list(job.documents)
        names = [d["name"] for d in job.documents[1:]]
        assert len(set(names)) == len(names)
