"""Stack configuration files read without the Pulumi engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.errors import ConfigError
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.workflow.target.stackfile import read_stack

REPO = Path(__file__).resolve().parents[3]


def test_read_stack_dev_example_feeds_controller_settings() -> None:
    stack = read_stack("dev", REPO)
    controller = stack.controller()
    assert (stack.context, stack.namespace) == ("kind-npa-dev", "npa-dev")
    assert (controller.cpus, controller.memory_gb) == (2, 8)
    assert controller.remote_identity == "npa-runner"
    generated = IsolatedDir.generated_config(stack.context, controller)
    assert generated["kubernetes"]["allowed_contexts"] == ["kind-npa-dev"]
    assert generated["kubernetes"]["pod_config"] == {
        "spec": {"priorityClassName": "npa-controller"}
    }
    assert generated["jobs"]["controller"]["resources"]["region"] == "kind-npa-dev"


def _stack(tmp_path: Path, body: str) -> Path:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text("config:\n" + body)
    return tmp_path


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            "  npa-infra:controllerCpus: zero\n",
            r"\.yaml:2:\d+: npa-infra:controllerCpus: must be a positive integer",
        ),
        (
            "  npa-infra:controllerMemoryGb: 0\n",
            r"\.yaml:2:\d+: npa-infra:controllerMemoryGb: must be a positive integer",
        ),
        (
            "  npa-infra:controllerPodConfig: [a]\n",
            r"\.yaml:2:\d+: npa-infra:controllerPodConfig: must be a mapping",
        ),
    ],
    ids=["cpus-text", "memory-zero", "pod-config-list"],
)
def test_read_stack_bad_controller_settings_named(tmp_path: Path, body: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        read_stack("t", _stack(tmp_path, body))


def test_read_stack_outputs_only_fields_empty_from_file() -> None:
    stack = read_stack("dev", REPO)
    assert (stack.source, stack.controller_name, stack.src_s3_uri) == ("configuration file", "", "")
    assert (stack.source_prefix, stack.s3_endpoint) == ("npa-src/npa", "")


def test_read_stack_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Pulumi\.nope\.yaml"):
        read_stack("nope", tmp_path)
