"""Which images a spec can run (cli.md §1.3): every branch, loop, sequence and parallel member."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from npa_infra.catalog import images as pins
from npa_infra.catalog.builtin import BUILTIN
from npa_infra.render.images import ImageSelection
from npa_infra.workflow.planning import loading
from preflight import targets

REG = "registry.example.com/team"

BRANCHES = textwrap.dedent(
    f"""\
    apiVersion: npa.workflow/v0.0.1
    kind: Workflow
    metadata: {{name: branches}}
    config:
      bucket: b
      root_uri: "s3://{{{{config.bucket}}}}/x/{{{{run.id}}}}"
      decision_uri: "{{{{config.root_uri}}}}/decision.json"
      train_image: {REG}/train:1
      optional: ""
    resources:
      default: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/base:1}}
      train: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: "{{{{config.train_image}}}}"}}
      fan: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/fan:1}}
      publish: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/publish:1}}
      escalate: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/escalate:1}}
      optional: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/optional:1}}
      shadowed: {{cloud: kubernetes, cpus: 1, memory: 1Gi, image: {REG}/shadowed:1}}
    states:
      prepare:
        run: {{shell: echo prepare}}
        next: rounds
      rounds:
        loop: {{max: 2, until: promote_checkpoint}}
        sequence: [train, decide]
        next: fan
      train:
        run: {{shell: echo train}}
        resources: train
      decide:
        run: {{shell: echo decide}}
        writesDecision: true
        outputs:
          - {{uri: "{{{{config.decision_uri}}}}", schema: npa.test.decision.v1}}
      fan:
        parallel: [f1, f2]
        next: route
      f1:
        run: {{shell: echo f1}}
        resources: fan
      f2:
        run: {{shell: echo f2}}
        resources: fan
      route:
        run: {{shell: echo route}}
        transitions:
          - {{when: promote_checkpoint, goto: publish}}
          - {{if: config.optional, goto: optional-step}}
          - {{when: loop_back, goto: escalate}}
          - {{goto: escalate}}
          - {{goto: shadowed-step}}
      publish:
        run: {{shell: echo publish}}
        resources: publish
        terminal: true
      escalate:
        run: {{shell: echo escalate}}
        resources: escalate
        terminal: true
      optional-step:
        run: {{shell: echo optional}}
        resources: optional
        terminal: true
      shadowed-step:
        run: {{shell: echo shadowed}}
        resources: shadowed
        terminal: true
    """
)


def _load(
    tmp_path: Path, text: str, variables: dict[str, str] | None = None
) -> loading.ValidatedSpec:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return loading.load_validated(path, BUILTIN, variables or {})


def _targets(
    tmp_path: Path,
    text: str = BRANCHES,
    variables: dict[str, str] | None = None,
    selection: ImageSelection | None = None,
) -> dict[str, tuple[str, ...]]:
    v = _load(tmp_path, text, variables)
    found = targets.image_targets(
        v.spec, BUILTIN, run_id="r-1", selection=selection or ImageSelection(), variables=variables
    )
    return {t.image: t.steps for t in found}


def test_image_targets_every_branch_loop_and_parallel_member_once(tmp_path: Path) -> None:
    found = _targets(tmp_path)

    assert found == {
        f"{REG}/base:1": ("prepare", "decide", "route"),
        f"{REG}/train:1": ("train",),
        f"{REG}/fan:1": ("f1", "f2"),
        f"{REG}/publish:1": ("publish",),
        f"{REG}/escalate:1": ("escalate",),
    }


def test_image_targets_if_config_branch_enabled_by_var(tmp_path: Path) -> None:
    found = _targets(tmp_path, variables={"optional": "yes"})

    assert found[f"{REG}/optional:1"] == ("optional-step",)
    assert f"{REG}/shadowed:1" not in found  # after an unconditional transition: never taken


def test_image_targets_profile_token_resolved_with_var(tmp_path: Path) -> None:
    found = _targets(tmp_path, variables={"train_image": f"{REG}/train:2"})

    assert f"{REG}/train:2" in found and f"{REG}/train:1" not in found


def test_image_targets_global_image_replaces_all_exact_override_wins(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        apiVersion: npa.workflow/v0.0.1
        kind: Workflow
        metadata: {name: tools}
        config: {bucket: b, root_uri: "s3://b/x", trigger_uri: "s3://b/t", env_count: "1",
                 shard_index: "0", shard_count: "1"}
        states:
          a:
            toolRef: workbench.sim2real.check_trigger
            next: b
          b:
            toolRef: workbench.isaac_lab.envgen
            terminal: true
        """
    )
    sel = ImageSelection(
        overrides=(("workbench.isaac_lab.envgen", f"{REG}/isaac:dev"),),
        global_image=f"{REG}/all:1",
    )

    found = _targets(tmp_path, text, selection=sel)

    assert found == {f"{REG}/all:1": ("a",), f"{REG}/isaac:dev": ("b",)}


def test_image_targets_catalog_images_at_pinned_tags(tmp_path: Path) -> None:
    spec = Path(__file__).resolve().parents[3] / "workflows" / "testing" / "loop-decision.yaml"

    found = _targets(tmp_path, spec.read_text(encoding="utf-8"))

    workbench = pins.catalog_image("npa-workbench", pins.DEFAULT_REGISTRY)
    viewer = pins.catalog_image("npa-viewer", pins.DEFAULT_REGISTRY)
    assert found[workbench] == ("decide", "route", "escalate")
    assert found[viewer] == ("publish",)  # only on the promote_checkpoint branch


def test_image_targets_image_less_steps_skipped(tmp_path: Path) -> None:
    found = _targets(tmp_path, selection=ImageSelection(global_image="none"))

    assert found == {}


@pytest.mark.parametrize(
    ("entry_transitions", "expected"),
    [(False, ("first", "second", "after")), (True, ("first", "after"))],
    ids=["entry-follows-next", "entry-with-transitions-stops"],
)
def test_reachable_states_sequence_entry_follows_next_only_without_transitions(
    tmp_path: Path, entry_transitions: bool, expected: tuple[str, ...]
) -> None:
    routing = "    transitions: [{when: loop_back, goto: second}]\n" if entry_transitions else ""
    text = (
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: seq}\n"
        "config: {bucket: b}\n"
        "states:\n"
        "  group:\n    sequence: [first]\n    next: after\n"
        "  first:\n    run: {shell: echo 1}\n" + routing + "    next: second\n"
        "  second:\n    run: {shell: echo 2}\n"
        "  after:\n    run: {shell: echo 3}\n    terminal: true\n"
    )
    spec = _load(tmp_path, text).spec

    assert targets.reachable_states(spec, spec.config) == expected
