"""``npa cluster down --cluster CTX [--json]`` through the real typer app and the Kubernetes double.

The real adapter (``KubeApi``, the official client) reads the double through a
kubeconfig named by ``KUBECONFIG``; the double's request log proves the
command only reads, on the exact context. Each case asserts the exit code,
stdout (JSON where asked) and stderr separately (style.md rule 18).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.cli.main import app
from tests.support.fakekube import FakeKube
from tests.support.pdbworld import controller, run_pod

Invoke = Callable[..., Result]
REPORT_KEYS = {"status", "context", "nodes", "budgets", "blocking", "skipped_pods"}
BUDGET_KEYS = {
    "name",
    "namespace",
    "selector",
    "matching_ready_pods",
    "unhealthy_pods",
    "disruptions_allowed",
    "blocks",
    "reason",
    "note",
    "system",
}


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    fake = FakeKube.start(tmp_path / "kube")
    monkeypatch.setenv("KUBECONFIG", str(fake.kubeconfig))
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    fake.add_node("node-1")
    fake.add_node("node-2")
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def npa() -> Invoke:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(app, ["cluster", "down", *args], catch_exceptions=False)

    return invoke


def _workload(fake: FakeKube, ns: str, app_name: str, count: int, kind: str = "ReplicaSet") -> None:
    owner = controller(kind, f"{app_name}-rs")
    for index in range(count):
        node = f"node-{1 + index % 2}"
        run_pod(fake, ns, f"{app_name}-{index}", labels={"app": app_name}, owner=owner, node=node)


@pytest.fixture
def cluster(kube: FakeKube) -> FakeKube:
    """Budgets that block (int, percentage, kube-system) and ones that do not."""
    _workload(kube, "team-a", "web", 3)
    _workload(kube, "team-a", "batch", 4)
    _workload(kube, "team-a", "cache", 2)
    _workload(kube, "kube-system", "kube-dns", 2, kind="Deployment")
    run_pod(kube, "kube-system", "cilium-a", owner=controller("DaemonSet", "cilium"))
    run_pod(kube, "kube-system", "cilium-b", owner=controller("DaemonSet", "cilium"), node="node-2")
    run_pod(kube, "kube-system", "etcd-node-1", mirror=True)
    web = {"matchLabels": {"app": "web"}}
    kube.add_pdb("team-a", "web", selector=web, min_available=2)
    kube.add_pdb("team-a", "batch", selector={"matchLabels": {"app": "batch"}}, min_available="50%")
    kube.add_pdb(
        "team-a", "cache", selector={"matchLabels": {"app": "cache"}}, max_unavailable="100%"
    )
    kube.add_pdb(
        "kube-system", "coredns", selector={"matchLabels": {"app": "kube-dns"}}, min_available=1
    )
    kube.add_pdb("team-b", "orphan", selector={"matchLabels": {"app": "gone"}}, min_available=1)
    kube.add_pdb("team-b", "nothing", selector=None, min_available=1)
    return kube


def _json(result: Result) -> Any:
    return json.loads(result.stdout)


def _writes(fake: FakeKube) -> list[str]:
    return [f"{c.method} {c.path}" for c in fake.calls() if c.method != "GET"]


def test_cluster_down_json_blocking_and_free_budgets_reported(
    cluster: FakeKube, npa: Invoke
) -> None:
    result = npa("--cluster", "fake-a", "--json")

    assert result.exit_code == 0, result.stderr
    report = _json(result)
    assert set(report) == REPORT_KEYS
    assert all(set(b) == BUDGET_KEYS for b in report["budgets"])
    assert (report["status"], report["context"], report["nodes"]) == ("preview", "fake-a", 2)
    got = {
        (b["namespace"], b["name"]): (
            b["matching_ready_pods"],
            b["disruptions_allowed"],
            b["blocks"],
            b["reason"],
        )
        for b in report["budgets"]
    }
    assert got == {
        ("kube-system", "coredns"): (2, 1, True, "exceeds_disruptions_allowed"),
        ("team-a", "batch"): (4, 2, True, "exceeds_disruptions_allowed"),
        ("team-a", "cache"): (2, 2, False, "within_budget"),
        ("team-a", "web"): (3, 1, True, "exceeds_disruptions_allowed"),
        ("team-b", "nothing"): (0, 0, False, "null_selector"),
        ("team-b", "orphan"): (0, 0, False, "no_matching_pods"),
    }
    assert report["blocking"] == 3
    assert report["skipped_pods"] == {"daemonset": 2, "mirror": 1}
    by_name = {b["name"]: b for b in report["budgets"]}
    assert by_name["coredns"]["system"] and not by_name["web"]["system"]
    assert by_name["web"]["selector"] == "app=web" and by_name["nothing"]["selector"] is None
    assert "1 of 3 ready pods can be evicted at once; the other 2 wait" in by_name["web"]["note"]
    assert result.stderr == ""


def test_cluster_down_reads_only_on_the_exact_context(cluster: FakeKube, npa: Invoke) -> None:
    before = len(cluster.calls())

    result = npa("--cluster", "fake-a", "--json")

    assert result.exit_code == 0
    made = cluster.calls()[before:]
    assert made and _writes(cluster) == []
    assert {c.user for c in made} == {"fake-a"}
    assert sorted({c.path for c in made}) == [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/apis/policy/v1/poddisruptionbudgets",
    ]


@pytest.mark.parametrize(
    ("arrange", "ready", "allowed", "reason"),
    [
        (lambda f: None, 3, 0, "min_available_all_pods"),
        (lambda f: f.set_pdb_status("team-a", "db", None), 3, 0, "min_available_all_pods"),
        (
            lambda f: f.set_controller_scale(
                f.pod("db-0", "team-a")["metadata"]["ownerReferences"][0]["uid"], 2
            ),
            3,
            1,
            "exceeds_disruptions_allowed",
        ),
    ],
    ids=["min-equals-pods", "recomputed", "scale-below-pods"],
)
def test_cluster_down_min_available_percentage_all_pods_blocks(
    kube: FakeKube,
    npa: Invoke,
    arrange: Callable[[FakeKube], None],
    ready: int,
    allowed: int,
    reason: str,
) -> None:
    _workload(kube, "team-a", "db", 3, kind="StatefulSet")
    kube.add_pdb("team-a", "db", selector={"matchLabels": {"app": "db"}}, min_available="100%")
    arrange(kube)

    [budget] = _json(npa("--cluster", "fake-a", "--json"))["budgets"]

    assert (budget["matching_ready_pods"], budget["disruptions_allowed"]) == (ready, allowed)
    assert (budget["blocks"], budget["reason"]) == (True, reason)


def test_cluster_down_unhealthy_pods_protected_unless_always_allow(
    kube: FakeKube, npa: Invoke
) -> None:
    owner = controller("ReplicaSet", "api-rs")
    for name in ("api-0", "api-1"):  # Running, never Ready
        run_pod(kube, "team-a", name, labels={"app": "api"}, owner=owner, ready=False)
        kube.set_pod_phase(name, "Running", namespace="team-a")
    selector = {"matchLabels": {"app": "api"}}
    kube.add_pdb("team-a", "api", selector=selector, min_available=1)
    kube.add_pdb(
        "team-a",
        "api-lenient",
        selector=selector,
        min_available=1,
        unhealthy_pod_eviction_policy="AlwaysAllow",
    )

    budgets = {b["name"]: b for b in _json(npa("--cluster", "fake-a", "--json"))["budgets"]}

    strict, lenient = budgets["api"], budgets["api-lenient"]
    assert (strict["matching_ready_pods"], strict["unhealthy_pods"]) == (0, 2)
    assert (strict["blocks"], strict["reason"]) == (True, "unhealthy_pods_protected")
    assert (lenient["blocks"], lenient["reason"]) == (False, "within_budget")


def test_cluster_down_no_budgets_nothing_blocks(kube: FakeKube, npa: Invoke) -> None:
    _workload(kube, "team-a", "web", 2)

    result = npa("--cluster", "fake-a", "--json")
    text = npa("--cluster", "fake-a")

    assert result.exit_code == 0 and text.exit_code == 0
    report = _json(result)
    assert (report["budgets"], report["blocking"], report["nodes"]) == ([], 0, 2)
    assert "no PodDisruptionBudgets: none will hold up the drain" in text.stdout
    assert _writes(kube) == []


def test_cluster_down_text_table_notes_and_summary(cluster: FakeKube, npa: Invoke) -> None:
    result = npa("--context", "fake-a")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "context: fake-a (2 nodes); nothing was changed"
    assert lines[1].split() == [
        "NAMESPACE",
        "NAME",
        "SELECTOR",
        "READY",
        "ALLOWED",
        "BLOCKS",
        "REASON",
    ]
    web = next(line for line in lines if line.startswith("team-a") and " web " in line)
    assert web.split() == [
        "team-a",
        "web",
        "app=web",
        "3",
        "1",
        "yes",
        "exceeds_disruptions_allowed",
    ]
    nothing = next(line for line in lines if line.startswith("team-b") and " nothing " in line)
    assert "<none: null selector>" in nothing and nothing.split()[-2:] == ["no", "null_selector"]
    assert any(line.startswith("  kube-system/coredns: ") for line in lines)
    assert not any(line.startswith("  team-a/cache: ") for line in lines)
    assert "not evicted by a drain: 2 DaemonSet pods, 1 mirror pods" in lines
    assert lines[-1].startswith("3 of 6 budgets will hold up the drain: expect it to take minutes")


def test_cluster_down_unknown_context_exit_1_lists_contexts_no_request(
    kube: FakeKube, npa: Invoke
) -> None:
    before = len(kube.calls())

    result = npa("--cluster", "nope")
    as_json = npa("--cluster", "nope", "--json")

    assert result.exit_code == 1 and result.stdout == ""
    assert "Error: context 'nope' is not defined in" in result.stderr
    assert "fake-a" in result.stderr and "fake-b" in result.stderr
    assert "Hint: use one of the contexts the kubeconfig defines" in result.stderr
    assert "no fallback to the current context" in result.stderr
    assert as_json.exit_code == 1
    error = _json(as_json)
    assert error["status"] == "error" and error["error"]["details"]["kind"] == "unknown_context"
    assert len(kube.calls()) == before


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_cluster_down_unreachable_api_server_names_what_was_checked(
    kube: FakeKube, npa: Invoke, as_json: bool
) -> None:
    result = npa("--cluster", "unreachable", *(["--json"] if as_json else []))

    assert result.exit_code == 1
    if as_json:
        error = _json(result)["error"]
        message, remedy = error["message"], error["remedy"]
        assert error["details"]["kind"] == "transport"
        assert error["details"]["server"].startswith("http://127.0.0.1:")
    else:
        assert result.stdout == ""
        message = result.stderr.splitlines()[0].removeprefix("Error: ")
        remedy = result.stderr.splitlines()[-1].removeprefix("Hint: ")
    assert message.startswith("cannot read context 'unreachable' at http://127.0.0.1:")
    assert "checked: nodes, pods bound to nodes, poddisruptionbudgets" in message
    assert "list nodes" in message
    assert remedy.startswith("check that the API server of context 'unreachable' is reachable")
    assert "Traceback" not in result.stderr


def test_cluster_down_forbidden_budgets_exit_1_with_rbac_remedy(
    cluster: FakeKube, npa: Invoke
) -> None:
    cluster.deny("fake-a", "list", "poddisruptionbudgets")

    result = npa("--cluster", "fake-a")

    assert result.exit_code == 1
    assert "list poddisruptionbudgets in all namespaces" in result.stderr
    assert "Hint: grant the user of context 'fake-a' the permission" in result.stderr
    assert _writes(cluster) == []
