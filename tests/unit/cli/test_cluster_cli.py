"""``npa cluster down`` with an injected cluster (``Services.cluster``): the SDK's seam.

The context is still resolved from the first kubeconfig file (exactly; never
the current context); the reads go to a ``FakeCluster``. The double-backed
cases are in ``tests/integration/kube/test_cluster_down_cli.py``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from npa_infra.cli import services
from npa_infra.cli.main import app
from npa_infra.kube.models import (
    BudgetStatus,
    DisruptionBudget,
    KubeErrorKind,
    LabelSelector,
    NodePod,
)
from tests.support.fakecluster import FakeCluster, gpu_node, kube_error


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [
            {"name": "prod", "context": {"cluster": "c", "user": "u"}},
            {"name": "ambient", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "ambient",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def _cluster() -> FakeCluster:
    fake = FakeCluster("prod", node_list=[gpu_node("n1"), gpu_node("n2")])
    fake.bound_pod_list = [NodePod(f"web-{i}", "team-a", "n1", (("app", "web"),)) for i in (0, 1)]
    fake.budget_list = [
        DisruptionBudget(
            "web",
            "team-a",
            LabelSelector((("app", "web"),)),
            min_available=2,
            status=BudgetStatus(2, 2, 0, 2, 1),
        )
    ]
    return fake


def _invoke(fake: FakeCluster, opened: list[tuple[Path, str]], *args: str) -> tuple[int, str, str]:
    def factory(path: Path, context: str) -> FakeCluster:
        opened.append((path, context))
        return fake

    given = dataclasses.replace(services.build(None), cluster=factory)  # the SDK's Services
    result = CliRunner().invoke(app, ["cluster", "down", *args], obj=given, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cluster_down_injected_cluster_exact_context_read_and_closed(kubeconfig: Path) -> None:
    fake, opened = _cluster(), []

    code, stdout, stderr = _invoke(fake, opened, "--cluster", "prod", "--json")

    assert code == 0, stderr
    assert opened == [(kubeconfig, "prod")]
    assert fake.calls == ["nodes", "bound_pods", "disruption_budgets"] and fake.closed
    report = json.loads(stdout)
    [budget] = report["budgets"]
    assert (report["context"], report["nodes"], report["blocking"]) == ("prod", 2, 1)
    assert (budget["blocks"], budget["reason"]) == (True, "min_available_all_pods")


def test_cluster_down_read_failure_names_server_exit_1(kubeconfig: Path) -> None:
    fake, opened = _cluster(), []
    fake.fail_on["bound_pods"] = kube_error(KubeErrorKind.RATE_LIMIT, "list pods throttled")

    code, stdout, stderr = _invoke(fake, opened, "--cluster", "prod")

    assert code == 1 and stdout == ""
    assert stderr.startswith(
        "Error: cannot read context 'prod' at https://k8s.example:6443 for the drain preview"
    )
    assert "list pods throttled" in stderr and "Hint: fix it" in stderr
    assert fake.closed


def test_cluster_down_missing_cluster_option_is_a_usage_error(kubeconfig: Path) -> None:
    fake, opened = _cluster(), []

    code, stdout, stderr = _invoke(fake, opened, "--json")

    assert code == 64 and stdout == "" and "--cluster" in stderr
    assert opened == []
