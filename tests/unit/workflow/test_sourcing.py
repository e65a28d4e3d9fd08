"""Which source a submit uses, through the real ``submit --plan-only`` path (no S3, no writes).

The decision itself is crossed in ``tests/unit/source/test_decision.py``;
these cases check what ``sourcing.plan_source`` gathers (environment, saved
URI, checkout, stack, spec) and that plan-only writes nothing.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, UsageError
from npa_infra.journal.store import Journal
from npa_infra.source import tree
from npa_infra.workflow.submission import pipeline, sourcing, submitflags

REPO = Path(__file__).resolve().parents[3]
MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"

BARE_SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: bare}
config:
  bucket: @BUCKET@
  @EXTRA@
resources:
  default: {cloud: kubernetes, cpus: 1}
  img: {cloud: kubernetes, cpus: 1, image: "registry.example.com/team/img:1"}
states:
  build:
    resources: img
    run: {shell: echo build}
    next: train
  train:
    run: {shell: echo train}
    terminal: true
"""

RUNTIME_SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: rt-src, executionMode: runtime}
config:
  bucket: src-bucket
  decision_uri: "s3://src-bucket/d/{{run.id}}/decision.json"
resources:
  default: {cloud: kubernetes, cpus: 1, image: "registry.example.com/team/img:1"}
  bare: {cloud: kubernetes, cpus: 1}
states:
  gate:
    run: {shell: echo gate}
    writesDecision: true
    outputs:
      - {uri: "{{config.decision_uri}}", schema: npa.test.decision.v1}
    transitions:
      - {when: promote_checkpoint, goto: accept}
      - {when: loop_back, goto: reject}
  accept:
    run: {shell: echo ok}
    terminal: true
  reject:
    resources: bare
    run: {shell: echo no}
    terminal: true
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "npa-home"


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {"NPA_HOME": str(home), "PATH": "/usr/bin:/bin"}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    return root


def spec_file(tmp_path: Path, *, bucket: str = "src-bucket", extra: str = "") -> Path:
    path = tmp_path / "bare.yaml"
    path.write_text(
        BARE_SPEC.replace("@BUCKET@", bucket).replace("@EXTRA@", extra), encoding="utf-8"
    )
    return path


def plan_only(spec: Path, env: dict[str, str], tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "plan_only": True,
        "run_id": "src-1",
        "preflight_images": False,
        "render_dir": tmp_path / "rendered",
        "project_root": tmp_path,
    }
    values.update(overrides)
    report = pipeline.submit(spec, submitflags.SubmitOptions(**values), env=env)
    assert isinstance(report, pipeline.SubmitReport)
    source: dict[str, Any] = report.to_json()["source"]
    source["_yaml"] = report.jobs[0].text
    return source


def test_plan_only_images_everywhere_not_required(env: dict[str, str], tmp_path: Path) -> None:
    source = plan_only(MINIMAL, env, tmp_path, source_root=tmp_path / "never-scanned")

    assert (source["status"], source["uri"], source["would_stage"]) == ("not_required", None, False)


def test_plan_only_image_less_step_would_stage_and_writes_nothing(
    env: dict[str, str], tmp_path: Path, checkout: Path, home: Path
) -> None:
    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout)

    fp = tree.scan(checkout).fingerprint
    uri = f"s3://src-bucket/npa-src/npa/{fp}/"
    assert source["status"] == "stage"
    assert (source["would_stage"], source["uri"], source["fingerprint"]) == (True, uri, fp)
    assert (source["reason"], source["origin"], source["states"]) == (
        "missing",
        "checkout",
        ["train"],
    )
    assert f"NPA_SRC_S3_URI: {uri}" in source["_yaml"]
    # nothing staged or saved: the home holds only the journal, whose one row is the plan
    journal_files = {"journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"}
    assert {p.name for p in home.iterdir()} <= journal_files
    with Journal.open(home) as journal:
        assert (journal.runs(), [p.run_id for p in journal.plans()]) == ([], ["src-1"])


def test_plan_only_exported_uri_kept_without_scanning(env: dict[str, str], tmp_path: Path) -> None:
    env["NPA_SRC_S3_URI"] = "s3://team/src/custom"
    env["NPA_E2E_NPA_SRC_S3_URI"] = "s3://team/src/e2e"

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=tmp_path / "absent")

    assert (source["status"], source["uri"], source["origin"]) == (
        "keep",
        "s3://team/src/custom",
        "environment",
    )
    assert source["fingerprint"] is None


def test_plan_only_e2e_uri_when_primary_unset(env: dict[str, str], tmp_path: Path) -> None:
    env["NPA_E2E_NPA_SRC_S3_URI"] = "s3://team/src/e2e"

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=tmp_path / "absent")

    assert (source["uri"], source["origin"]) == ("s3://team/src/e2e", "e2e_environment")


@pytest.mark.parametrize(
    "value",
    ["not-a-uri", "s3://", "s3://bucket", "s3://bucket/"],
    ids=["text", "empty", "bucket", "slash"],
)
def test_plan_only_malformed_exported_uri_config_error(
    env: dict[str, str], tmp_path: Path, value: str
) -> None:
    env["NPA_SRC_S3_URI"] = value

    with pytest.raises(ConfigError, match="NPA_SRC_S3_URI"):
        plan_only(spec_file(tmp_path), env, tmp_path)


def test_plan_only_saved_current_reused(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    fp = tree.scan(checkout).fingerprint
    saved = f"s3://elsewhere/npa-src/npa/{fp}/"
    sourcing.save_uri(env, None, saved)

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout)

    assert (source["status"], source["uri"], source["reason"]) == ("reuse", saved, "saved_current")
    assert source["would_stage"] is False


def test_plan_only_saved_outdated_restages(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    sourcing.save_uri(env, None, f"s3://src-bucket/npa-src/npa/{'0' * 64}/")

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout)

    assert (source["status"], source["reason"]) == ("stage", "saved_outdated")


def test_plan_only_saved_per_stack_preferred_over_top_level(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    fp = tree.scan(checkout).fingerprint
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s1.yaml").write_text(
        "config:\n  npa-infra:bucket: stack-bucket\n  npa-infra:sourcePrefix: /team/src/\n"
    )
    sourcing.save_uri(env, None, f"s3://top/npa-src/npa/{'0' * 64}/")
    sourcing.save_uri(env, "s1", f"s3://stack-bucket/team/src/{fp}/")

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout, stack="s1")

    assert (source["status"], source["uri"]) == ("reuse", f"s3://stack-bucket/team/src/{fp}/")
    saved = yaml.safe_load(npa_config.config_path(env).read_text())
    assert set(saved) == {"src_s3_uri", "stacks"}


def test_plan_only_stack_bucket_and_prefix_name_the_staged_uri(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s1.yaml").write_text(
        "config:\n  npa-infra:bucket: stack-bucket\n  npa-infra:sourcePrefix: team/src\n"
    )

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout, stack="s1")

    fp = tree.scan(checkout).fingerprint
    assert source["uri"] == f"s3://stack-bucket/team/src/{fp}/"


def test_plan_only_stage_src_forces_over_export(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    env["NPA_SRC_S3_URI"] = "s3://team/src/custom"

    source = plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout, stage_src=True)

    assert (source["status"], source["reason"]) == ("stage", "forced")


def test_plan_only_no_stage_src_nothing_selected_refused(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_only(spec_file(tmp_path), env, tmp_path, source_root=checkout, no_stage_src=True)

    assert "--no-stage-src forbids staging" in caught.value.message
    assert "NPA_SRC_S3_URI, NPA_E2E_NPA_SRC_S3_URI" in caught.value.message
    assert "export NPA_SRC_S3_URI" in caught.value.remedy


def test_plan_only_no_stage_src_with_export_kept(env: dict[str, str], tmp_path: Path) -> None:
    env["NPA_SRC_S3_URI"] = "s3://team/src/custom"

    source = plan_only(spec_file(tmp_path), env, tmp_path, no_stage_src=True)

    assert source["status"] == "keep"


def test_plan_only_placeholder_bucket_no_stack_refused(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    with pytest.raises(ConfigError, match="no bucket is known") as caught:
        plan_only(spec_file(tmp_path, bucket="example-bucket"), env, tmp_path, source_root=checkout)

    assert "npa-infra:bucket" in caught.value.remedy


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"stage_src": True, "no_stage_src": True}, "mutually exclusive"),
        ({"stage_src": True, "image": "registry.example.com/x:1"}, "conflicts with --image"),
    ],
    ids=["both-flags", "with-image"],
)
def test_plan_only_stage_src_flag_conflicts_usage_error(
    env: dict[str, str], tmp_path: Path, overrides: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(UsageError, match=fragment):
        plan_only(spec_file(tmp_path), env, tmp_path, **overrides)


def test_plan_only_stage_src_with_image_none_allowed(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    source = plan_only(
        spec_file(tmp_path), env, tmp_path, source_root=checkout, stage_src=True, image="none"
    )

    assert (source["status"], source["states"]) == ("stage", ["build", "train"])


def test_plan_only_source_overlay_every_step_needs_source(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    spec = spec_file(tmp_path, extra="source_overlay: true")

    source = plan_only(spec, env, tmp_path, source_root=checkout)

    assert source["states"] == ["build", "train"]
    assert "NPA_SRC_OVERLAY" in source["_yaml"]


def test_plan_only_runtime_state_after_decision_counts(
    env: dict[str, str], tmp_path: Path, checkout: Path
) -> None:
    spec = tmp_path / "rt.yaml"
    spec.write_text(textwrap.dedent(RUNTIME_SPEC), encoding="utf-8")

    source = plan_only(spec, env, tmp_path, source_root=checkout)

    # The runtime plan stops at gate's unread decision; reject may still run later.
    assert (source["status"], source["states"]) == ("stage", ["reject"])


def test_saved_uri_invalid_value_config_error(env: dict[str, str]) -> None:
    npa_config.save_config(env, {"src_s3_uri": "https://not-s3"})

    with pytest.raises(ConfigError, match="src_s3_uri"):
        sourcing.saved_uri(env, None)


def test_default_checkout_is_this_editable_repo() -> None:
    assert sourcing.default_checkout() == REPO
