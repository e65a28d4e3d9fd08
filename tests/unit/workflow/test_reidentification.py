"""Re-identifying a runtime wave from the spec file on disk (issue 9): the digest is the
one the launch recorded while the file is unchanged, differs once a step changes, and is
absent, with the reason, once the file no longer loads or validates; it never raises."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.execution import recovery
from npa_infra.workflow.planning import api, loading
from npa_infra.workflow.submission import reidentification, submitflags

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
