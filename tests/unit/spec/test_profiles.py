"""Resource profile shape: unknown keys warn, deployIfAbsent is validated (dsl.md §1.4)."""

from __future__ import annotations

import pytest

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.workflow.planning.loading import load_validated

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata:
  name: profiles
resources:
  gpu:
    cloud: kubernetes
    accelerators: H100:1
{extra}
states:
  train:
    resources: gpu
    run: {{argv: [python3, train.py]}}
    terminal: true
"""


def _validate(extra: str):  # type: ignore[no-untyped-def]
    return load_validated("profiles.yaml", BUILTIN, text=SPEC.format(extra=extra))


def test_profile_unknown_key_warns_with_location() -> None:
    validated = _validate("    gpus_per_node: 8")
    [warning] = validated.warnings
    assert warning.path == "$.resources.gpu.gpus_per_node"
    assert (warning.line, warning.column) == (9, 5)
    assert "unknown resource profile key" in warning.message


def test_profile_unrendered_kubernetes_key_warns() -> None:
    validated = _validate("    kubernetes:\n      namespace: team-a")
    assert [w.path for w in validated.warnings] == ["$.resources.gpu.kubernetes.namespace"]


@pytest.mark.parametrize(
    "extra",
    [
        "    deployIfAbsent: true",
        "    deployIfAbsent: {clusterName: c1, context: ctx, gpuNodes: 2}",
    ],
    ids=["true", "mapping"],
)
def test_profile_deploy_if_absent_valid_forms_accepted(extra: str) -> None:
    assert _validate(extra).warnings == []


@pytest.mark.parametrize(
    ("extra", "path", "fragment"),
    [
        (
            "    deployIfAbsent: sometimes",
            "$.resources.gpu.deployIfAbsent",
            "must be true or a mapping",
        ),
        (
            "    deployIfAbsent: {cluster: c1}",
            "$.resources.gpu.deployIfAbsent",
            "unknown deployIfAbsent field(s): 'cluster'",
        ),
    ],
    ids=["scalar", "unknown-field"],
)
def test_profile_deploy_if_absent_bad_forms_located(extra: str, path: str, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        _validate(extra)
    [issue] = caught.value.issues
    assert issue.path == path
    assert fragment in issue.message
    assert issue.line == 9
    assert issue.hint
